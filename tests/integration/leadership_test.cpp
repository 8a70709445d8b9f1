// Leadership (daemon/leadership.h) against real etcd members, and the follower's answers
// (daemon/follower.h) as plain values. Waits are bounded polls; the expected values are written out here.
#include "daemon/leadership.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/json.h"
#include "daemon/follower.h"
#include "net/etcd_client.h"
#include "tests/fakes/etcd_cluster.h"

namespace shepherd {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

template <typename F>
bool PollUntil(F f, std::chrono::milliseconds deadline) {
  const auto end = Steady::now() + deadline;
  while (Steady::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

TEST(TermDeadline, IsTheRenewalsSendTimePlusTheConfirmedTtl) {
  const SteadyTime sent = SteadyTime(std::chrono::seconds(100));
  EXPECT_EQ(TermDeadline(sent, 5), SteadyTime(std::chrono::seconds(105)));
  EXPECT_EQ(TermDeadline(sent, 0), sent);  // an expired lease: over when the renewal went out
  EXPECT_EQ(TermDeadline(sent, -1), sent);
}

TEST(LeaderRecord, RoundTripsAndRefusesOtherValues) {
  auto r = DecodeLeaderRecord(EncodeLeaderRecord({.replica_id = "r1", .url = "http://10.0.0.1:8080"}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->replica_id, "r1");
  EXPECT_EQ(r->url, "http://10.0.0.1:8080");
  EXPECT_FALSE(DecodeLeaderRecord("not json").ok());
  EXPECT_FALSE(DecodeLeaderRecord(R"({"replica_id": 1, "url": "x"})").ok());
  EXPECT_FALSE(DecodeLeaderRecord(R"(["r1"])").ok());
}

TEST(LeaderTtl, BelowTwoSecondsIsRefusedByName) {
  EXPECT_TRUE(CheckLeaderTtl(2).ok());
  Status s = CheckLeaderTtl(1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--leader-ttl-s 1"), std::string::npos) << s.message();
}

HttpRequest Req(std::string method, std::string target) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

std::string HeaderOf(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

TEST(FollowerAnswer, RedirectsEverythingButProbesAndMetricsToTheLeader) {
  LeadershipView view{.leader = LeaderRecord{.replica_id = "r0", .url = "http://10.0.0.1:8080"},
                      .store_up = true,
                      .changes = 2};
  const std::string me = "http://10.0.0.2:8080";
  HttpResponse post = FollowerAnswer(Req("POST", "/v1/jobs"), view, me);
  EXPECT_EQ(post.status, 307);
  EXPECT_EQ(HeaderOf(post, "Location"), "http://10.0.0.1:8080/v1/jobs");
  HttpResponse get = FollowerAnswer(Req("GET", "/v1/jobs/j1?x=1"), view, me);
  EXPECT_EQ(get.status, 307);
  EXPECT_EQ(HeaderOf(get, "Location"), "http://10.0.0.1:8080/v1/jobs/j1?x=1");
  EXPECT_EQ(FollowerAnswer(Req("GET", "/healthz"), view, me).status, 200);
  HttpResponse ready = FollowerAnswer(Req("GET", "/readyz"), view, me);
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(Json::parse(ready.body),
            Json::parse(
                R"({"ready": false, "role": "follower", "leader": "http://10.0.0.1:8080", "store": "up",
                    "serves_reads": false})"));
  // A follower serving reads says so; its read series follow the role's.
  EXPECT_EQ(Json::parse(FollowerAnswer(Req("GET", "/readyz"), view, me, true).body)["serves_reads"], true);
  EXPECT_NE(FollowerAnswer(Req("GET", "/metrics"), view, me, true, "extra 1\n").body.find("\nextra 1\n"),
            std::string::npos);
  HttpResponse metrics = FollowerAnswer(Req("GET", "/metrics"), view, me);
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\nshepherd_leader 0\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("\nshepherd_store_up 1\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("\nshepherd_leader_changes_total 2\n"), std::string::npos) << metrics.body;
}

TEST(FollowerAnswer, WithoutAKnownLeaderAnswers503RetryAfterAndNeverRedirectsToItself) {
  const std::string me = "http://10.0.0.2:8080";
  LeadershipView none{.store_up = false};
  HttpResponse r = FollowerAnswer(Req("POST", "/v1/jobs"), none, me);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(HeaderOf(r, "Retry-After"), "1");
  EXPECT_EQ(Json::parse(FollowerAnswer(Req("GET", "/readyz"), none, me).body)["store"], "no quorum");
  LeadershipView self{.leader = LeaderRecord{.replica_id = "old", .url = me}, .store_up = true};
  EXPECT_EQ(FollowerAnswer(Req("GET", "/v1/nodes"), self, me).status, 503);
  EXPECT_TRUE(Json::parse(FollowerAnswer(Req("GET", "/readyz"), self, me).body)["leader"].is_null());
}

class LeadershipEtcd : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.ok()) << etcd_.error(); }

  std::unique_ptr<Leadership> Start(const std::string& id, int64_t ttl_s = 2) {
    auto l = Leadership::Start(LeadershipOptions{.endpoints = etcd_.endpoints(),
                                                 .prefix = "/lt",
                                                 .replica_id = id,
                                                 .advertise_url = "http://" + id,
                                                 .ttl_s = ttl_s});
    EXPECT_TRUE(l.ok()) << l.status().message();
    return l.ok() ? std::move(l).value() : nullptr;
  }

  testing::EtcdCluster etcd_{1};
};

TEST_F(LeadershipEtcd, OneLeadsTheOtherFollowsAndTakesOverWhenTheTermEnds) {
  auto a = Start("a");
  ASSERT_TRUE(PollUntil([&] { return a->HeldAt(Steady::now()); }, 20s));
  auto b = Start("b");
  ASSERT_TRUE(PollUntil([&] { return b->View().leader.has_value(); }, 20s));
  EXPECT_EQ(b->View().leader->url, "http://a");
  EXPECT_FALSE(b->HeldAt(Steady::now()));
  // The fence is the leader key's create_revision, as etcd has it.
  auto client = net::EtcdClient::Create({.endpoints = etcd_.endpoints()});
  ASSERT_TRUE(client.ok());
  auto key = (*client)->Range("/lt/leader", false);
  ASSERT_TRUE(key.ok());
  ASSERT_EQ(key->kvs.size(), 1u);
  ASSERT_TRUE(a->View().fence.has_value());
  EXPECT_EQ(a->View().fence->create_revision, key->kvs[0].create_revision);
  EXPECT_EQ(a->View().fence->leader_key, "/lt/leader");
  // A keeps leading past several TTLs (renewals work).
  std::this_thread::sleep_for(5s);
  EXPECT_TRUE(a->HeldAt(Steady::now()));
  EXPECT_FALSE(b->HeldAt(Steady::now()));
  // A stops (its daemon got SIGTERM): the lease is revoked and B leads.
  a->Stop();
  EXPECT_FALSE(a->HeldAt(Steady::now()));
  ASSERT_TRUE(PollUntil([&] { return b->HeldAt(Steady::now()); }, 20s));
  EXPECT_EQ(b->View().changes, 1u);
  EXPECT_GT(b->View().fence->create_revision, key->kvs[0].create_revision);
}

TEST_F(LeadershipEtcd, ALeaderWhoseEtcdStopsAnsweringLosesLeadershipWithinItsTtl) {
  auto a = Start("a");
  ASSERT_TRUE(PollUntil([&] { return a->HeldAt(Steady::now()); }, 20s));
  etcd_.Pause(0);
  const auto paused = Steady::now();
  ASSERT_TRUE(PollUntil([&] { return !a->HeldAt(Steady::now()); }, 10s));
  // No later than the TTL after the last renewal answered, which went out before the pause.
  EXPECT_FALSE(a->HeldAt(paused + 2s));
  EXPECT_TRUE(PollUntil([&] { return !a->View().store_up; }, 10s));
  etcd_.Resume(0);
  a->EndTerm();
  // Once etcd answers again the replica campaigns and leads again (its old lease has expired by now).
  EXPECT_TRUE(PollUntil([&] { return a->HeldAt(Steady::now()); }, 30s));
}

TEST_F(LeadershipEtcd, RelinquishEndsTheTermAtOnce) {
  auto a = Start("a");
  ASSERT_TRUE(PollUntil([&] { return a->HeldAt(Steady::now()); }, 20s));
  a->Relinquish();
  EXPECT_FALSE(a->HeldAt(Steady::now()));
  EXPECT_EQ(a->View().role, ReplicaRole::kFollower);
}

}  // namespace
}  // namespace shepherd
