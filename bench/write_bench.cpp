// Write latency vs state size: the same writes on an empty database and on one holding
// 20,000 nodes and 5,000 running jobs, through the real Controller and a real SQLite file (WAL,
// synchronous=FULL, group commit). Plain main, steady_clock timing; both states measured in one run.
//
//   write_bench [--nodes 20000] [--jobs 5000] [--reps 200] [--dir /tmp] [--store etcd://HOST:PORT[,...]]
//
// Writes measured (each acknowledged after its COMMIT; untimed steps keep the state from drifting):
//   submit   POST /v1/jobs's path: PlanFor + SubmitJob of an 8-GPU job that fits (then cancelled, untimed);
//   cancel   CancelJob of such a job (submitted untimed);
//   register UpsertNode of a new 8-GPU node (then deleted, untimed);
//   patch    PatchNode cordoning a free node (then uncordoned, untimed);
//   report   IngestReports: a batch of 16 step reports, one per rank of a running job;
//   finding  an agent heartbeat reporting a GPU fault on a running job's node: a gpu_fault finding, its
//            recovery (cordon, restart elsewhere) and the records, in one COMMIT.
// For each: the control thread's share (the synchronous call) and the full latency to `done` (with the
// COMMIT), median and p90 in microseconds.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "control/controller.h"
#include "health/report.h"
#include "storage/etcd_store.h"
#include "storage/store.h"

namespace shepherd {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Store completions arrive on the writer thread; the bench's "control thread" (main) runs them.
class PostQueue {
 public:
  void Post(std::function<void()> f) {
    {
      std::lock_guard lock(mu_);
      q_.push_back(std::move(f));
    }
    cv_.notify_one();
  }
  // Runs posted functions until `done()` holds.
  void RunUntil(const std::function<bool()>& done) {
    while (!done()) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !q_.empty(); });
      auto f = std::move(q_.front());
      q_.pop_front();
      lock.unlock();
      f();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
};

Node MakeNode(int i) {
  Node n;
  n.id = "node-" + std::to_string(100000 + i);
  n.hostname = n.id;
  n.gpus = 8;
  n.gpu_memory_gib = 80;
  n.topology = {{"spine", "s" + std::to_string(i / 1024)}, {"leaf", "l" + std::to_string(i / 32)}};
  n.nvlink_domain = n.id;
  return n;
}

JobSpec MakeSpec(int gpus) {
  JobSpec s;
  s.name = "bench";
  s.model = {1e9, 8, 1024, 8, 1024, 32000};
  s.training.global_batch_size = 64;
  s.resources.gpus = gpus;
  s.parallelism = {false, 8, 1, gpus / 8, 0};
  s.policy.heartbeat_timeout_s = 3600;  // nothing reports in this bench: no heartbeat_lost findings
  s.command = {"python3", "train.py"};
  s.launch_mode = LaunchMode::kAgents;
  return s;
}

struct Sample {
  std::vector<double> call_us, total_us;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

class Bench {
 public:
  Bench(const std::string& dir, int nodes, int jobs, const std::vector<std::string>& etcd_endpoints)
      : dir_(dir), nodes_(nodes) {
    Result<std::unique_ptr<Store>> store = Status(Code::kInternal, "no store");
    if (!etcd_endpoints.empty()) {  // --store etcd://...: a prefix of its own per state
      EtcdStoreOptions options;
      options.endpoints = etcd_endpoints;
      options.prefix = "/" + std::filesystem::path(dir).filename().string();
      store = OpenEtcdStore(options);
    } else {
      std::filesystem::create_directories(dir);
      store = OpenSqliteStore(dir + "/bench.db");
    }
    if (!store.ok()) {
      std::fprintf(stderr, "open: %s\n", store.status().message().c_str());
      std::exit(1);
    }
    store_ = std::move(*store);
    controller_ = std::make_unique<Controller>(
        store_.get(), &clock_, [this](std::function<void()> f) { posted_.Post(std::move(f)); },
        ControllerOptions{});
    if (!controller_->Recover().ok()) std::exit(1);
    // Fill: nodes, then `jobs` running 16-GPU jobs (2 nodes each) so that free nodes remain.
    int pending = 0;
    for (int i = 0; i < nodes; ++i) {
      ++pending;
      controller_->UpsertNode(MakeNode(i), false, [&](Result<NodeUpsert>) { --pending; });
    }
    for (int j = 0; j < jobs; ++j) {
      JobSpec s = MakeSpec(16);
      auto est = controller_->view().PlanFor(s);
      ++pending;
      controller_->SubmitJob(s, *est, [&](Result<JobView> r) {
        if (!r.ok()) std::fprintf(stderr, "fill submit: %s\n", r.status().message().c_str());
        if (r.ok()) fill_jobs_.push_back(r->job.id);
        --pending;
      });
    }
    posted_.RunUntil([&] { return pending == 0; });
  }
  ~Bench() {
    controller_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Times writes from..to-1 into `out`: before(i) untimed, then start(i, done) issues write i (done() on
  // its answer), then after(i) untimed.
  using Start = std::function<void(int, std::function<void()>)>;
  void Measure(int from, int to, Sample& out, const Start& start, const std::function<void(int)>& before = {},
               const std::function<void(int)>& after = {}) {
    for (int i = from; i < to; ++i) {
      if (before) before(i);
      bool done = false;
      const auto t0 = SteadyClock::now();
      start(i, [&] { done = true; });
      const auto t1 = SteadyClock::now();
      posted_.RunUntil([&] { return done; });
      const auto t2 = SteadyClock::now();
      out.call_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      out.total_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
      if (after) after(i);
    }
  }

  // Runs one write to completion (untimed).
  template <typename T, typename F>
  void Untimed(F issue) {
    bool done = false;
    issue([&](Result<T> r) {
      if (!r.ok()) std::fprintf(stderr, "untimed write: %s\n", r.status().message().c_str());
      done = true;
    });
    posted_.RunUntil([&] { return done; });
  }

  void SubmitSmall(std::function<void()> done) {
    JobSpec spec = MakeSpec(8);
    controller_->AssertReadable();  // this thread constructed the Controller: its control thread
    auto est = controller_->view().PlanFor(spec);
    controller_->SubmitJob(spec, *est, [this, done = std::move(done)](Result<JobView> r) {
      if (r.ok()) last_job_ = r->job.id;
      done();
    });
  }
  void CancelLast() {
    Untimed<JobView>([&](auto cb) { controller_->CancelJob(last_job_, "bench", cb); });
  }

  void Submit(int from, int to, Sample& out) {
    Measure(
        from, to, out, [&](int, auto done) { SubmitSmall(done); }, {}, [&](int) { CancelLast(); });
  }
  void Cancel(int from, int to, Sample& out) {
    Measure(
        from, to, out,
        [&](int, auto done) {
          controller_->CancelJob(last_job_, "bench", [done](Result<JobView> r) {
            if (!r.ok()) std::fprintf(stderr, "cancel: %s\n", r.status().message().c_str());
            done();
          });
        },
        [&](int) {
          bool submitted = false;
          SubmitSmall([&] { submitted = true; });
          posted_.RunUntil([&] { return submitted; });
        });
  }
  void Register(int from, int to, Sample& out) {
    const std::string id = MakeNode(nodes_ + 1).id;
    Measure(
        from, to, out,
        [&](int, auto done) {
          controller_->UpsertNode(MakeNode(nodes_ + 1), false, [done](Result<NodeUpsert> r) {
            if (!r.ok()) std::fprintf(stderr, "register: %s\n", r.status().message().c_str());
            done();
          });
        },
        {}, [&](int) { Untimed<NodeView>([&](auto cb) { controller_->DeleteNode(id, cb); }); });
  }
  void Patch(int from, int to, Sample& out) {
    const std::string id = MakeNode(nodes_ - 1).id;  // free: the fill places jobs from the first node
    Measure(
        from, to, out,
        [&](int, auto done) {
          controller_->PatchNode(id, NodePatch{.schedulable = false}, [done](Result<NodeView> r) {
            if (!r.ok()) std::fprintf(stderr, "patch: %s\n", r.status().message().c_str());
            done();
          });
        },
        {},
        [&](int) {
          Untimed<NodeView>([&](auto cb) { controller_->PatchNode(id, NodePatch{.schedulable = true}, cb); });
        });
  }
  void Reports(int from, int to, Sample& out) {
    Measure(from, to, out, [&](int i, auto done) {
      const std::string& job = fill_jobs_[i % fill_jobs_.size()];
      ReportBatch batch;
      for (int r = 0; r < 16; ++r) {
        Report rep;
        rep.rank = r;
        rep.attempt = 1;
        rep.time = clock_.Now();
        rep.kind = ReportKind::kStep;
        rep.step = 1 + i / static_cast<int>(fill_jobs_.size());
        rep.loss = 2.0;
        rep.step_time_s = 1.0;
        batch.reports.emplace_back(r, rep);
      }
      controller_->IngestReports(job, batch, [done](Result<IngestSummary> r) {
        if (!r.ok()) std::fprintf(stderr, "reports: %s\n", r.status().message().c_str());
        done();
      });
    });
  }
  void Finding(int from, int to, Sample& out) {
    // A node of a running job (the fill placed them from the first): a gpu_fault finding for that job,
    // whose recovery then runs (cordon, restart elsewhere) as it would in production.
    Measure(from, to, out, [&](int i, auto done) {
      AgentHeartbeat hb;
      hb.gpu_faults.push_back({0, "xid", "bench"});
      controller_->NodeHeartbeat(MakeNode(i * 2).id, hb, [done](Result<HeartbeatAck> r) {
        if (!r.ok()) std::fprintf(stderr, "heartbeat: %s\n", r.status().message().c_str());
        done();
      });
    });
  }
  size_t findings() const {
    controller_->AssertReadable();
    return controller_->view().GetFailures({}).value().size();
  }

 private:
  std::string dir_;
  int nodes_;
  SystemClock clock_;
  PostQueue posted_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Controller> controller_;
  std::vector<std::string> fill_jobs_;  // the fill's running jobs
  std::string last_job_;                // the latest small job submitted
};

}  // namespace
}  // namespace shepherd

int main(int argc, char** argv) {
  using namespace shepherd;
  spdlog::set_level(spdlog::level::err);
  int nodes = 20000, jobs = 5000, reps = 200, rounds = 10;
  std::string dir = "/tmp", only_write, only_state;
  std::vector<std::string> etcd;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--nodes") nodes = std::atoi(argv[i + 1]);
    if (k == "--jobs") jobs = std::atoi(argv[i + 1]);
    if (k == "--reps") reps = std::atoi(argv[i + 1]);
    if (k == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    if (k == "--dir") dir = argv[i + 1];
    if (k == "--store") {  // sqlite (default, in --dir) or etcd://HOST:PORT[,...]
      auto loc = ParseStoreLocation(argv[i + 1]);
      if (!loc.ok() || loc->kind != StoreLocation::Kind::kEtcd) {
        std::fprintf(stderr, "--store: etcd://HOST:PORT[,...] (SQLite is the default, in --dir)\n");
        return 2;
      }
      etcd = loc->endpoints;
    }
    if (k == "--write") only_write = argv[i + 1];  // profiling: one write kind only
    if (k == "--state") only_state = argv[i + 1];  // profiling: "empty" or "full" only
  }
  // "empty": just enough for the measured writes (each finding's job restarts onto fresh nodes).
  struct Row {
    const char* state;
    int nodes, jobs;
  };
  std::vector<Row> rows;
  for (const Row& r : {Row{"empty", 4 * reps + 8, reps}, Row{"full", nodes, jobs}})
    if (only_state.empty() || only_state == r.state) rows.push_back(r);
  std::vector<std::unique_ptr<Bench>> benches;
  for (const Row& r : rows) {
    const auto t0 = SteadyClock::now();
    benches.push_back(std::make_unique<Bench>(
        dir + "/write-bench-" + std::to_string(::getpid()) + "-" + r.state, r.nodes, r.jobs, etcd));
    std::printf("%s: %d nodes, %d jobs, fill %.1f s\n", r.state, r.nodes, r.jobs,
                std::chrono::duration<double>(SteadyClock::now() - t0).count());
  }
  // In this order: findings restart jobs, so they come last. Each write kind runs in `rounds` rounds of
  // reps/rounds writes, alternating the states (and which goes first), so that a burst of load from the
  // rest of the machine hits both states alike; every state still makes `reps` writes of each kind.
  using Write = void (Bench::*)(int, int, Sample&);
  const std::pair<const char*, Write> writes[] = {
      {"submit", &Bench::Submit}, {"cancel", &Bench::Cancel},  {"register", &Bench::Register},
      {"patch", &Bench::Patch},   {"report", &Bench::Reports}, {"finding", &Bench::Finding}};
  std::printf("%-8s %-6s %10s %10s %10s %10s\n", "write", "state", "call_p50", "call_p90", "total_p50",
              "total_p90");
  for (const auto& [name, write] : writes) {
    if (!only_write.empty() && only_write != name) continue;
    std::vector<Sample> samples(benches.size());
    for (int round = 0; round < rounds; ++round) {
      const int from = round * reps / rounds, to = (round + 1) * reps / rounds;
      for (size_t k = 0; k < benches.size(); ++k) {
        const size_t b = round % 2 == 0 ? k : benches.size() - 1 - k;
        (benches[b].get()->*write)(from, to, samples[b]);
      }
    }
    for (size_t b = 0; b < benches.size(); ++b) {
      const Sample& s = samples[b];
      std::printf("%-8s %-6s %10.0f %10.0f %10.0f %10.0f\n", name, rows[b].state, Pct(s.call_us, 0.5),
                  Pct(s.call_us, 0.9), Pct(s.total_us, 0.5), Pct(s.total_us, 0.9));
    }
    if (benches.size() == 2) {
      std::printf("%-8s ratio  %10.1fx %21.1fx\n", name,
                  Pct(samples[1].call_us, 0.5) / Pct(samples[0].call_us, 0.5),
                  Pct(samples[1].total_us, 0.5) / Pct(samples[0].total_us, 0.5));
    }
  }
  for (size_t b = 0; b < benches.size(); ++b)
    std::printf("%s: %zu findings recorded (microseconds above)\n", rows[b].state, benches[b]->findings());
  return 0;
}
