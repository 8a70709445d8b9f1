// The real daemon under load at fleet scale: paginated lists, probes answered without the control thread,
// 429 with Retry-After when a request queue is full, quotas. The control thread is blocked on purpose
// through the test hook (config "test_hooks": POST /test/block-control?ms=N, api/front_door.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string NodeBody(const std::string& id) {
  return Json{
      {"id", id}, {"gpus", 8}, {"gpu_memory_gib", 80}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}
      .dump();
}

std::string JobBody() {
  return Json{
      {"name", "t"},
      {"model", {{"parameters", 1e9}, {"layers", 8}, {"hidden", 1024}, {"heads", 8}, {"seq_len", 1024}}},
      {"training", {{"global_batch_size", 64}}},
      {"parallelism", {{"tp", 8}, {"pp", 1}, {"dp", 1}}},
      {"resources", {{"gpus", 8}}},
      {"command", {"python3", "train.py"}}}
      .dump();
}

Json J(const HttpResult& r) {
  return Json::parse(r.body);
}

// Starts a daemon with `config` as its --config file.
std::unique_ptr<Daemon> Start(const TempDir& dir, const Json& config) {
  const std::string path = dir.path + "/config.json";
  std::ofstream(path) << config.dump();
  auto d = std::make_unique<Daemon>(dir.path, std::vector<std::string>{"--config", path});
  EXPECT_TRUE(d->WaitReady()) << d->log();
  return d;
}

std::set<std::string> ErrorFields(const HttpResult& r) {
  std::set<std::string> out;
  const Json body = J(r);
  for (const auto& e : body["errors"]) out.insert(e["field"].get<std::string>());
  return out;
}

TEST(Load, ListsArePagedInAStableOrderWithACursor) {
  TempDir dir;
  auto d = Start(dir, Json::object());
  std::vector<std::string> ids;
  for (int i = 24; i >= 0; --i) {  // registered in reverse: the order is by id, not by registration
    char id[16];
    std::snprintf(id, sizeof id, "n%02d", i);
    ASSERT_EQ(Http(d->port(), "POST", "/v1/nodes", NodeBody(id)).status, 201);
    ids.insert(ids.begin(), id);
  }
  std::vector<std::string> seen;
  std::string target = "/v1/nodes?limit=10";
  for (int page = 0; page < 5; ++page) {
    HttpResult r = Http(d->port(), "GET", target);
    ASSERT_EQ(r.status, 200) << r.body;
    Json body = J(r);
    EXPECT_LE(body["nodes"].size(), 10u);
    EXPECT_EQ(body["summary"]["nodes"], 25);  // the summary is over the whole inventory on every page
    for (const auto& n : body["nodes"]) seen.push_back(n["id"]);
    if (body["next_cursor"].is_null()) break;
    EXPECT_EQ(body["next_cursor"], seen.back());
    target = "/v1/nodes?limit=10&cursor=" + body["next_cursor"].get<std::string>();
  }
  EXPECT_EQ(seen, ids);
  // Default page size covers small inventories in one page.
  Json all = J(Http(d->port(), "GET", "/v1/nodes"));
  EXPECT_EQ(all["nodes"].size(), 25u);
  EXPECT_TRUE(all["next_cursor"].is_null());

  // Jobs: three, paged one at a time, in id order.
  std::vector<std::string> jobs;
  for (int i = 0; i < 3; ++i) {
    HttpResult r = Http(d->port(), "POST", "/v1/jobs", JobBody());
    ASSERT_EQ(r.status, 201) << r.body;
    jobs.push_back(J(r)["id"]);
  }
  std::vector<std::string> paged;
  std::string cursor;
  do {
    Json body = J(Http(d->port(), "GET", "/v1/jobs?limit=1" + (cursor.empty() ? "" : "&cursor=" + cursor)));
    ASSERT_LE(body["jobs"].size(), 1u);
    for (const auto& j : body["jobs"]) paged.push_back(j["id"]);
    cursor = body["next_cursor"].is_null() ? "" : body["next_cursor"].get<std::string>();
  } while (!cursor.empty() && paged.size() < 10);
  std::sort(jobs.begin(), jobs.end());
  EXPECT_EQ(paged, jobs);

  // Bounds: 422 naming the field.
  for (const char* bad : {"limit=0", "limit=1001", "limit=ten", "limit=", "limit=-1"}) {
    for (const char* route : {"/v1/nodes?", "/v1/jobs?", "/v1/failures?"}) {
      HttpResult r = Http(d->port(), "GET", std::string(route) + bad);
      EXPECT_EQ(r.status, 422) << route << bad;
      EXPECT_EQ(ErrorFields(r), std::set<std::string>{"limit"}) << route << bad << r.body;
    }
  }
  EXPECT_EQ(Http(d->port(), "GET", "/v1/nodes?limit=1000").status, 200);
  HttpResult empty_cursor = Http(d->port(), "GET", "/v1/jobs?cursor=");
  EXPECT_EQ(empty_cursor.status, 422);
  EXPECT_EQ(ErrorFields(empty_cursor), std::set<std::string>{"cursor"});
  HttpResult bad_failure_cursor = Http(d->port(), "GET", "/v1/failures?cursor=n01");
  EXPECT_EQ(bad_failure_cursor.status, 422);
  EXPECT_EQ(ErrorFields(bad_failure_cursor), std::set<std::string>{"cursor"});
  HttpResult unknown_checkpoint = Http(d->port(), "GET", "/v1/jobs/" + jobs[0] + "/checkpoints?cursor=nope");
  EXPECT_EQ(unknown_checkpoint.status, 422);
  EXPECT_EQ(ErrorFields(unknown_checkpoint), std::set<std::string>{"cursor"});
  Json checkpoints = J(Http(d->port(), "GET", "/v1/jobs/" + jobs[0] + "/checkpoints?limit=5"));
  EXPECT_TRUE(checkpoints["next_cursor"].is_null());
}

TEST(Load, ProbesAnswerWhileTheControlThreadIsBlocked) {
  TempDir dir;
  auto d = Start(dir, {{"test_hooks", true}});
  // The hook answers as the block begins: from then on the control thread sleeps for 2 s.
  ASSERT_EQ(Http(d->port(), "POST", "/test/block-control?ms=2000").status, 200);
  const auto block_start = Clock::now();
  const auto window_end = block_start + 1800ms;  // safely inside the block
  // A read sent now waits for the control thread: it proves the block is real.
  auto read = std::async(std::launch::async, [&] {
    HttpResult r = Http(d->port(), "GET", "/v1/nodes");
    return std::make_pair(r.status, Clock::now());
  });
  int probes = 0;
  while (Clock::now() < window_end) {
    const auto t0 = Clock::now();
    const char* path = probes % 2 ? "/readyz" : "/healthz";
    HttpResult r = Http(d->port(), "GET", path);
    const auto took = Clock::now() - t0;
    if (t0 + took > window_end) break;
    ++probes;
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_LT(took, 100ms) << path << " waited for the control thread";
  }
  EXPECT_GE(probes, 5);
  auto [read_status, read_done] = read.get();
  EXPECT_EQ(read_status, 200);
  EXPECT_GE(read_done, window_end) << "the read should have waited for the blocked control thread";
}

TEST(Load, AFullQueueAnswers429WithRetryAfter) {
  TempDir dir;
  auto d = Start(dir, {{"test_hooks", true}, {"queue_write", 1}});
  ASSERT_EQ(Http(d->port(), "POST", "/test/block-control?ms=3000").status, 200);
  // The control thread sleeps for 3 s: of two writes sent now, one fills the one-place write queue and
  // the other is refused at once.
  auto w0 =
      std::async(std::launch::async, [&] { return Http(d->port(), "POST", "/v1/nodes", NodeBody("w0")); });
  auto w1 =
      std::async(std::launch::async, [&] { return Http(d->port(), "POST", "/v1/nodes", NodeBody("w1")); });
  EXPECT_EQ(Http(d->port(), "GET", "/healthz").status, 200);  // probes answer while the queue is full
  HttpResult r0 = w0.get(), r1 = w1.get();
  const HttpResult& refused = r0.status == 429 ? r0 : r1;
  const HttpResult& served = r0.status == 429 ? r1 : r0;
  ASSERT_EQ(refused.status, 429) << r0.body << r1.body;
  EXPECT_EQ(served.status, 201) << served.body;  // the queued write is served once the block ends
  HttpResult copy = refused;
  EXPECT_EQ(copy.headers["retry-after"], "1");
  EXPECT_EQ(copy.headers["content-type"], "application/problem+json");
  EXPECT_EQ(J(refused)["status"], 429);
  EXPECT_EQ(ErrorFields(refused), std::set<std::string>{"queue"});
  EXPECT_NE(Http(d->port(), "GET", "/metrics").body.find("route=\"write queue\""), std::string::npos);
}

TEST(Load, QuotasOnNodesAndOnActiveJobsPerSubmitter) {
  TempDir dir;
  auto d = Start(dir, {{"max_nodes", 2}, {"max_active_jobs_per_submitter", 1}});
  ASSERT_EQ(Http(d->port(), "POST", "/v1/nodes", NodeBody("a")).status, 201);
  ASSERT_EQ(Http(d->port(), "POST", "/v1/nodes", NodeBody("b")).status, 201);
  HttpResult third = Http(d->port(), "POST", "/v1/nodes", NodeBody("c"));
  EXPECT_EQ(third.status, 429);
  EXPECT_EQ(ErrorFields(third), std::set<std::string>{"quota.max_nodes"});
  EXPECT_EQ(third.headers["retry-after"], "30");
  EXPECT_EQ(Http(d->port(), "POST", "/v1/nodes", NodeBody("a")).status, 200);  // updates stay allowed
  HttpResult first = Http(d->port(), "POST", "/v1/jobs", JobBody());
  ASSERT_EQ(first.status, 201) << first.body;
  HttpResult second = Http(d->port(), "POST", "/v1/jobs", JobBody());
  EXPECT_EQ(second.status, 429);
  EXPECT_EQ(ErrorFields(second), std::set<std::string>{"quota.max_active_jobs_per_submitter"});
  EXPECT_EQ(second.headers["retry-after"], "30");
  ASSERT_EQ(Http(d->port(), "POST", "/v1/jobs/" + J(first)["id"].get<std::string>() + "/cancel").status, 200);
  EXPECT_EQ(Http(d->port(), "POST", "/v1/jobs", JobBody()).status, 201);  // an ended job frees the quota
}

}  // namespace
}  // namespace shepherd::testing
