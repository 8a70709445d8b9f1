// Store throughput: batches committed per second through the Store interface on SQLite (WAL,
// synchronous=FULL) and on etcd with 1 and 3 real members (tests/fakes/etcd_cluster.h starts them on
// loopback, data in /tmp), all in one run. Plain main, steady_clock timing.
//
//   store_bench [--batches 5000] [--sequential 300] [--body 400] [--placement-nodes 2048] [--placements 5]
//
// Each batch is 3 puts (a job-sized record, an attempt, a finding) of about --body bytes each.
// pipelined:  every batch queued at once; the writer's group commit decides (etcd: split into
//             transactions of at most 128 operations) -> batches/s.
// sequential: one batch at a time, the next once `done` ran -> batches/s and median/p90 latency (ms).
// placement:  (etcd, default limits) --placements batches one at a time, each shaped as placing a job on
//             --placement-nodes nodes: the job, its attempt and one event per node (335 bytes each, the
//             size measured for the 16,384-node job's placement, 5.5 MB over 16,390 operations); larger
//             than one transaction, so staged -> median and max ms to commit one.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "storage/etcd_store.h"
#include "storage/store.h"
#include "tests/fakes/etcd_cluster.h"

namespace shepherd {
namespace {

using Steady = std::chrono::steady_clock;

WriteBatch Batch(int i, const std::string& body) {
  const std::string id = "job-" + std::to_string(i);
  WriteBatch b;
  b.Put(Record{Collection::kJobs, id, id, body});
  b.Put(Record{Collection::kAttempts, id + "/1", id, body});
  b.Put(Record{Collection::kFindings, "f-" + std::to_string(i), id, body});
  return b;
}

struct Result {
  double pipelined_per_s = 0;
  double sequential_per_s = 0;
  double median_ms = 0, p90_ms = 0;
};

Result Measure(Store& store, int batches, int sequential, const std::string& body) {
  Result r;
  std::atomic<int> failed{0};
  auto start = Steady::now();
  for (int i = 0; i < batches; ++i)
    store.Write(Batch(i, body), [&](Status s) {
      if (!s.ok()) ++failed;
    });
  store.Flush();
  r.pipelined_per_s = batches / std::chrono::duration<double>(Steady::now() - start).count();
  std::vector<double> ms;
  start = Steady::now();
  for (int i = 0; i < sequential; ++i) {
    std::promise<Status> p;
    const auto t0 = Steady::now();
    store.Write(Batch(batches + i, body), [&](Status s) { p.set_value(s); });
    if (!p.get_future().get().ok()) ++failed;
    ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
  }
  r.sequential_per_s = sequential / std::chrono::duration<double>(Steady::now() - start).count();
  std::sort(ms.begin(), ms.end());
  r.median_ms = ms.empty() ? 0 : ms[ms.size() / 2];
  r.p90_ms = ms.empty() ? 0 : ms[ms.size() * 9 / 10];
  if (failed) std::fprintf(stderr, "%d batches failed\n", failed.load());
  return r;
}

WriteBatch Placement(int i, int nodes) {
  const std::string job = "placed-" + std::to_string(i);
  const std::string event = "{\"kind\":\"node_state\",\"pad\":\"" + std::string(290, 'e') + "\"}";
  WriteBatch b;
  b.Put(Record{Collection::kJobs, job, job, std::string(335, 'j')});
  b.Put(Record{Collection::kAttempts, job + "/1", job, std::string(335, 'a')});
  for (int n = 0; n < nodes; ++n)
    b.Put(Record{Collection::kMeta, "event/" + job + "/" + std::to_string(n), "", event});
  return b;
}

void MeasurePlacement(const char* name, Store& store, int nodes, int placements) {
  std::vector<double> ms;
  size_t bytes = 0;
  for (const WriteBatch::Op& op : Placement(0, nodes).ops)
    bytes += op.record.key.size() + op.record.body.size();
  for (int i = 0; i < placements; ++i) {
    std::promise<Status> p;
    const auto t0 = Steady::now();
    store.Write(Placement(i, nodes), [&](Status s) { p.set_value(s); });
    if (Status s = p.get_future().get(); !s.ok()) {
      std::fprintf(stderr, "placement failed: %s\n", s.message().c_str());
      return;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-14s placement of %d nodes (%d operations, %.2f MB): median %.0f ms  max %.0f ms over %d\n",
              name, nodes, nodes + 2, bytes / 1e6, ms[ms.size() / 2], ms.back(), placements);
}

void Print(const char* name, const Result& r) {
  std::printf(
      "%-14s pipelined %8.0f batches/s   sequential %7.0f batches/s   latency median %6.2f ms  p90 %6.2f "
      "ms\n",
      name, r.pipelined_per_s, r.sequential_per_s, r.median_ms, r.p90_ms);
}

}  // namespace
}  // namespace shepherd

int main(int argc, char** argv) {
  using namespace shepherd;
  int batches = 5000, sequential = 300, body_size = 400, placement_nodes = 2048, placements = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--batches")
      batches = v;
    else if (flag == "--sequential")
      sequential = v;
    else if (flag == "--body")
      body_size = v;
    else if (flag == "--placement-nodes")
      placement_nodes = v;
    else if (flag == "--placements")
      placements = std::max(1, v);
    else {
      std::fprintf(stderr, "store_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  const std::string body = "{\"x\":\"" + std::string(std::max(0, body_size - 8), 'b') + "\"}";
  std::printf("%d batches pipelined, %d sequential, 3 puts of %zu bytes each\n", batches, sequential,
              body.size());

  const std::string dir =
      (std::filesystem::temp_directory_path() / ("store-bench-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  {
    auto sqlite = OpenSqliteStore(dir + "/bench.db");
    if (!sqlite.ok()) return std::fprintf(stderr, "%s\n", sqlite.status().message().c_str()), 1;
    Print("sqlite", Measure(**sqlite, batches, sequential, body));
  }
  std::filesystem::remove_all(dir);
  for (int members : {1, 3}) {
    testing::EtcdCluster etcd(members);
    if (!etcd.ok()) return std::fprintf(stderr, "%s\n", etcd.error().c_str()), 1;
    auto store = OpenEtcdStore(EtcdStoreOptions{.endpoints = etcd.endpoints()});
    if (!store.ok()) return std::fprintf(stderr, "%s\n", store.status().message().c_str()), 1;
    const char* name = members == 1 ? "etcd 1 member" : "etcd 3 members";
    Print(name, Measure(**store, batches, sequential, body));
    if (placement_nodes > 0) MeasurePlacement(name, **store, placement_nodes, placements);
  }
  return 0;
}
