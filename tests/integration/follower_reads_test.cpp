// Follower reads (daemon/follower_reads.h): the pure decisions (which routes a follower serves, when its
// view must be checked or reloaded, how long a read may wait) with constructed steady-clock times, and the
// view against a real etcd member: loaded on the first read, checked (not reloaded) while the revision
// stands, reloaded when a record is written, and a 503 once etcd is gone.
#include "daemon/follower_reads.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "control/records.h"
#include "core/json.h"
#include "storage/etcd_store.h"
#include "tests/fakes/etcd_cluster.h"

namespace shepherd {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

TEST(FollowerRoutes, DurableReadsAreServedAndWritesLiveStateAndLongPollsGoToTheLeader) {
  using enum FollowerRoute;
  // Served from the view: reads whose answers come from the stored records.
  for (const char* target : {"/v1/jobs", "/v1/jobs?state=queued&limit=5", "/v1/jobs/j1", "/v1/nodes",
                             "/v1/nodes/n0", "/v1/jobs/j1/placement", "/v1/jobs/j1/checkpoints",
                             "/v1/jobs/j1/failures", "/v1/failures?kind=node_lost", "/v1/jobs/j1/goodput",
                             "/v1/goodput", "/v1/events", "/v1/events?after=3&wait=0", "/v1/whoami"})
    EXPECT_EQ(ClassifyFollowerRoute("GET", target), kRead) << target;
  EXPECT_EQ(ClassifyFollowerRoute("HEAD", "/v1/jobs/j1"), kRead);
  EXPECT_EQ(ClassifyFollowerRoute("POST", "/v1/plan"), kRead);
  // Live state, long polls, every write and unknown paths: the leader's.
  for (const char* target : {"/v1/jobs/j1/health", "/v1/jobs/j1/steps", "/v1/nodes/n0/assignments",
                             "/v1/events?wait=5", "/v1/events?after=1&wait=0.5", "/ui/index.html", "/v2/x"})
    EXPECT_EQ(ClassifyFollowerRoute("GET", target), kToLeader) << target;
  for (const auto& [method, target] :
       std::vector<std::pair<const char*, const char*>>{{"POST", "/v1/jobs"},
                                                        {"POST", "/v1/jobs/j1/cancel"},
                                                        {"PATCH", "/v1/nodes/n0"},
                                                        {"DELETE", "/v1/nodes/n0"},
                                                        {"POST", "/v1/nodes/n0/heartbeat"},
                                                        {"POST", "/v1/simulate"},
                                                        {"POST", "/v1/jobs/j1/reports"},
                                                        {"PUT", "/v1/jobs"}})
    EXPECT_EQ(ClassifyFollowerRoute(method, target), kToLeader) << method << " " << target;
}

TEST(FollowerRoutes, EveryRuleNamesARouteOfTheRouteTable) {
  for (const FollowerRouteRule& r : FollowerRouteTable()) {
    const bool found = std::any_of(RouteTable().begin(), RouteTable().end(), [&](const RouteRule& t) {
      return t.method == r.method && t.pattern == r.pattern;
    });
    EXPECT_TRUE(found) << r.method << " " << r.pattern;
    EXPECT_FALSE(r.why.empty()) << r.pattern;
  }
}

TEST(FollowerView, IsFreshWithinTheBoundAndCheckedBeyondIt) {
  const SteadyTime t0 = SteadyTime(100s);
  EXPECT_EQ(JudgeView(std::nullopt, t0, 1s), ViewFreshness::kCheck);  // no view yet
  EXPECT_EQ(JudgeView(t0, t0, 1s), ViewFreshness::kFresh);
  EXPECT_EQ(JudgeView(t0, t0 + 1s, 1s), ViewFreshness::kFresh);  // exactly the bound
  EXPECT_EQ(JudgeView(t0, t0 + 1s + 1ns, 1s), ViewFreshness::kCheck);
  EXPECT_EQ(JudgeView(t0, t0 + 250ms, 200ms), ViewFreshness::kCheck);
  EXPECT_EQ(JudgeView(t0, t0 + 3600s, 3600s), ViewFreshness::kFresh);
}

TEST(FollowerView, IsReloadedOnlyWhenTheRevisionMoved) {
  EXPECT_EQ(JudgeRevision(std::nullopt, 7), ViewRefresh::kReload);
  EXPECT_EQ(JudgeRevision(7, 7), ViewRefresh::kKeep);
  EXPECT_EQ(JudgeRevision(7, 8), ViewRefresh::kReload);
  EXPECT_EQ(JudgeRevision(9, 8), ViewRefresh::kReload);  // etcd restored from an older backup: reload
}

TEST(FollowerView, AReadWaitsAtMostTheBound) {
  const SteadyTime q = SteadyTime(50s);
  EXPECT_FALSE(WaitedTooLong(q, q + 10s, 10s));
  EXPECT_TRUE(WaitedTooLong(q, q + 10s + 1ms, 10s));
}

// ---- against a real etcd member

double Metric(const std::string& text, const std::string& name) {
  const std::size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

class FollowerReadsEtcd : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.ok()) << etcd_.error(); }

  std::unique_ptr<FollowerReads> Reads(std::chrono::nanoseconds max_age) {
    FollowerReadsOptions o;
    o.endpoints = etcd_.endpoints();
    o.prefix = "/fr";
    o.max_age = max_age;
    o.etcd_timeout = 500ms;
    return std::make_unique<FollowerReads>(o);
  }

  // Writes node `id` as the leader's inventory would (its record), through an unfenced store.
  void PutNode(const std::string& id) {
    if (!writer_) {
      auto s = OpenEtcdStore(EtcdStoreOptions{.endpoints = etcd_.endpoints(), .prefix = "/fr"});
      ASSERT_TRUE(s.ok()) << s.status().message();
      writer_ = std::move(s).value();
    }
    auto node = ParseNode(Json{{"id", id}, {"gpus", 2}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}},
                          DefaultTopologyLevels());
    ASSERT_TRUE(node.ok()) << node.status().message();
    WriteBatch b;
    b.Put(NodeRecord(*node));
    std::promise<Status> done;
    writer_->Write(std::move(b), [&](Status s) { done.set_value(s); });
    ASSERT_TRUE(done.get_future().get().ok());
  }

  void Put(Record r) {
    WriteBatch b;
    b.Put(std::move(r));
    std::promise<Status> done;
    writer_->Write(std::move(b), [&](Status s) { done.set_value(s); });
    ASSERT_TRUE(done.get_future().get().ok());
  }

  // GET `target` through `reads`; the answer within a bound.
  static HttpResponse Get(FollowerReads& reads, const std::string& target) {
    auto answer = std::make_shared<std::promise<HttpResponse>>();
    auto got = answer->get_future();
    reads.Serve(HttpRequest{.method = "GET", .target = target},
                [answer](HttpResponse r) { answer->set_value(std::move(r)); });
    EXPECT_EQ(got.wait_for(20s), std::future_status::ready);
    return got.get();
  }

  static std::string Header(const HttpResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return v;
    return "";
  }

  static std::string Metrics(const FollowerReads& reads) {
    std::string out = "\n";
    reads.AppendMetrics(&out);
    return out;
  }

  testing::EtcdCluster etcd_{1};
  std::unique_ptr<Store> writer_;
};

TEST_F(FollowerReadsEtcd, LoadsOnTheFirstReadChecksWhileTheRevisionStandsAndReloadsWhenItMoves) {
  PutNode("n0");
  auto reads = Reads(1ns);  // every read checks the revision
  EXPECT_EQ(Metric(Metrics(*reads), "shepherd_follower_view_loads_total"), 0);  // idle: nothing loaded

  HttpResponse first = Get(*reads, "/v1/nodes/n0");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(Json::parse(first.body)["id"], "n0");
  EXPECT_EQ(Header(first, "Shepherd-Served-By"), "follower");
  const std::string revision = Header(first, "Shepherd-Read-Revision");
  ASSERT_FALSE(revision.empty());
  EXPECT_EQ(Metric(Metrics(*reads), "shepherd_follower_view_loads_total"), 1);

  // Nothing written: the check finds the same revision and loads nothing.
  HttpResponse again = Get(*reads, "/v1/nodes");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(Header(again, "Shepherd-Read-Revision"), revision);
  EXPECT_EQ(Metric(Metrics(*reads), "shepherd_follower_view_loads_total"), 1);

  // A record written: the next read reloads and sees it.
  PutNode("n1");
  HttpResponse after = Get(*reads, "/v1/nodes/n1");
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_GT(std::stoll(Header(after, "Shepherd-Read-Revision")), std::stoll(revision));
  EXPECT_EQ(Metric(Metrics(*reads), "shepherd_follower_view_loads_total"), 2);
  EXPECT_EQ(Metric(Metrics(*reads), "shepherd_follower_reads_total{result=\"served\"}"), 3);
}

TEST_F(FollowerReadsEtcd, WithinTheBoundAViewIsServedWithoutAskingEtcdAndBeyondItEtcdGoneIs503) {
  PutNode("n0");
  auto reads = Reads(400ms);
  ASSERT_EQ(Get(*reads, "/v1/nodes").status, 200);
  const auto loaded = Steady::now();
  etcd_.Pause(0);
  // Within the bound the view answers with no call to etcd (a paused member would make any call time out).
  HttpResponse fresh = Get(*reads, "/v1/nodes/n0");
  if (Steady::now() - loaded < 400ms) {
    EXPECT_EQ(fresh.status, 200);
    EXPECT_LE(std::stod(Header(fresh, "Shepherd-Read-Age")), 0.4);
  }
  // Beyond it the read needs etcd, which does not answer: 503 with Retry-After, never the older view.
  while (Steady::now() - loaded <= 450ms) std::this_thread::sleep_for(10ms);  // past the bound (the input)
  HttpResponse stale = Get(*reads, "/v1/nodes/n0");
  etcd_.Resume(0);
  EXPECT_EQ(stale.status, 503) << stale.body;
  EXPECT_EQ(Header(stale, "Retry-After"), "1");
  EXPECT_EQ(Header(stale, "Shepherd-Served-By"), "follower");
  EXPECT_EQ(Header(stale, "Shepherd-Read-Revision"), "");
  EXPECT_NE(Json::parse(stale.body)["detail"].get<std::string>().find("cannot serve reads"),
            std::string::npos);
  EXPECT_EQ(Metric(Metrics(*reads), "shepherd_follower_reads_total{result=\"unavailable\"}"), 1);
  // etcd back: served again.
  EXPECT_EQ(Get(*reads, "/v1/nodes/n0").status, 200);
}

}  // namespace
}  // namespace shepherd

namespace shepherd {
namespace {

TEST_F(FollowerReadsEtcd, AFindingTheLeaderRecordedIsServedAsTheLeaderRendersIt) {
  PutNode("n0");
  Finding f;
  f.id = "f-7";
  f.job = "job-000001";
  f.attempt = 1;
  f.kind = FindingKind::kNodeLost;
  f.nodes = {"n0"};
  f.detected_at = FromUnixSeconds(1'800'000'000);
  f.incident = "f-7";
  f.detail = "node n0 silent for 10 s";
  Put(FindingRecord(f));
  auto reads = Reads(1s);
  HttpResponse r = Get(*reads, "/v1/failures");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json failures = Json::parse(r.body)["failures"];
  ASSERT_EQ(failures.size(), 1u) << r.body;
  EXPECT_EQ(failures[0]["id"], "f-7");
  EXPECT_EQ(failures[0]["kind"], "node_lost");
  EXPECT_EQ(failures[0]["nodes"], Json::array({"n0"}));
  EXPECT_EQ(failures[0]["detected_at"], "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(Get(*reads, "/v1/failures?kind=hang").body.find("f-7"), std::string::npos);
}

}  // namespace
}  // namespace shepherd

namespace shepherd {
namespace {

// Lease renewals (daemon/follower_lease.h) against a real etcd member: renewed for a node the view has,
// refused for a node it has not and for ranks it does not assign the node, 422 for a body it cannot read,
// and 503 once etcd cannot confirm the view; each counted.
TEST_F(FollowerReadsEtcd, ARenewOnlyHeartbeatIsAnsweredFromTheViewAndTakesNothing) {
  PutNode("n0");
  FollowerReadsOptions o;
  o.endpoints = etcd_.endpoints();
  o.prefix = "/fr";
  o.max_age = 1s;
  o.renew_max_age = 400ms;
  o.etcd_timeout = 500ms;
  o.controller.agent_lease_s = 42;
  auto reads = std::make_unique<FollowerReads>(o);
  ASSERT_TRUE(reads->renews());
  auto renew = [&](const std::string& node, const std::string& body) {
    auto answer = std::make_shared<std::promise<HttpResponse>>();
    auto got = answer->get_future();
    reads->Renew(HttpRequest{.method = "POST", .target = "/v1/nodes/" + node + "/heartbeat", .body = body},
                 node, [answer](HttpResponse r) { answer->set_value(std::move(r)); });
    EXPECT_EQ(got.wait_for(20s), std::future_status::ready);
    return got.get();
  };
  const std::string idle = R"({"agent": {"pid": 1}, "processes": []})";
  HttpResponse ok = renew("n0", idle);
  ASSERT_EQ(ok.status, 200) << ok.body;
  const Json answer = Json::parse(ok.body);
  EXPECT_EQ(answer["renew_only"], true);
  EXPECT_EQ(answer["lease_s"], 42);
  EXPECT_EQ(answer["ack_exits"], Json::array());
  EXPECT_FALSE(answer.contains("node_lost"));
  EXPECT_EQ(Header(ok, "Shepherd-Served-By"), "follower");
  EXPECT_FALSE(Header(ok, "Shepherd-Read-Revision").empty());

  HttpResponse unknown = renew("n9", idle);
  EXPECT_EQ(unknown.status, 503) << unknown.body;
  // A rank of a job the view does not have: not renewed (the leader decides), nothing stopped.
  HttpResponse foreign =
      renew("n0", R"({"processes": [{"job": "job-000009", "attempt": 1, "rank": 0, "state": "running"}]})");
  EXPECT_EQ(foreign.status, 503) << foreign.body;
  EXPECT_NE(foreign.body.find("only the leader renews"), std::string::npos) << foreign.body;
  HttpResponse bad =
      renew("n0", R"({"processes": [{"job": "j", "attempt": "x", "rank": 0, "state": "running"}]})");
  EXPECT_EQ(bad.status, 422) << bad.body;
  EXPECT_NE(bad.body.find("processes[0].attempt"), std::string::npos) << bad.body;

  // Past the bound with etcd unreadable: no renewal from the older view.
  const auto confirmed = Steady::now();
  etcd_.Pause(0);
  while (Steady::now() - confirmed <= 450ms) std::this_thread::sleep_for(10ms);
  HttpResponse stale = renew("n0", idle);
  etcd_.Resume(0);
  EXPECT_EQ(stale.status, 503) << stale.body;
  EXPECT_EQ(Header(stale, "Retry-After"), "1");

  const std::string m = Metrics(*reads);
  EXPECT_EQ(Metric(m, "shepherd_follower_lease_renewals_total{result=\"renewed\"}"), 1);
  EXPECT_EQ(Metric(m, "shepherd_follower_lease_renewals_total{result=\"stopped\"}"), 0);
  EXPECT_EQ(Metric(m, "shepherd_follower_lease_renewals_total{result=\"refused\"}"), 4);
  EXPECT_EQ(Metric(m, "shepherd_follower_lease_refusals_total{reason=\"unknown_node\"}"), 1);
  EXPECT_EQ(Metric(m, "shepherd_follower_lease_refusals_total{reason=\"not_desired\"}"), 1);
  EXPECT_EQ(Metric(m, "shepherd_follower_lease_refusals_total{reason=\"invalid\"}"), 1);
  EXPECT_EQ(Metric(m, "shepherd_follower_lease_refusals_total{reason=\"unavailable\"}"), 1);
  EXPECT_EQ(renew("n0", idle).status, 200) << "etcd back: renewed again";
}

}  // namespace
}  // namespace shepherd
