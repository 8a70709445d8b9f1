// Lease renewal by a follower (daemon/follower_lease.h): the pure decision with constructed steady-clock
// times (view age, no view, an unknown node, a lost node, ranks the view does not assign) and the reading
// of a heartbeat's running ranks, with clear refusals naming the field.
#include "daemon/follower_lease.h"

#include <gtest/gtest.h>

#include <chrono>

namespace shepherd {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using enum RenewalVerdict;

const Steady::time_point kT0 = Steady::time_point(100s);

RenewalInput Fresh(std::vector<RankInView> running) {
  return {.confirmed_at = kT0,
          .now = kT0 + 400ms,
          .max_age = 1s,
          .node_known = true,
          .running = std::move(running)};
}

TEST(FollowerRenewal, RenewsFromAViewNoOlderThanItsBoundWhenEveryRunningRankIsDesired) {
  EXPECT_EQ(DecideRenewal(Fresh({RankInView::kDesired, RankInView::kDesired})),
            (RenewalDecision{kRenew, RenewalRefusal::kNone}));
  EXPECT_EQ(DecideRenewal(Fresh({})), (RenewalDecision{kRenew, RenewalRefusal::kNone}))
      << "an idle node's agent keeps its lease";
  RenewalInput at_bound = Fresh({RankInView::kDesired});
  at_bound.now = kT0 + 1s;  // exactly S old: still renewed
  EXPECT_EQ(DecideRenewal(at_bound).verdict, kRenew);
}

TEST(FollowerRenewal, AViewOlderThanTheBoundOrNoViewRenewsNothing) {
  RenewalInput old = Fresh({RankInView::kDesired});
  old.now = kT0 + 1s + 1ns;
  EXPECT_EQ(DecideRenewal(old), (RenewalDecision{kRefuse, RenewalRefusal::kStaleView}));
  RenewalInput none = Fresh({RankInView::kDesired});
  none.confirmed_at.reset();
  EXPECT_EQ(DecideRenewal(none), (RenewalDecision{kRefuse, RenewalRefusal::kStaleView}));
  RenewalInput off = Fresh({RankInView::kDesired});
  off.max_age = 0s;  // renewals off
  EXPECT_EQ(DecideRenewal(off).verdict, kRefuse);
  // Staleness is judged before anything the view says: an old view's "lost" is not acted on either.
  RenewalInput old_lost = Fresh({RankInView::kLost});
  old_lost.now = kT0 + 5s;
  EXPECT_EQ(DecideRenewal(old_lost).verdict, kRefuse);
}

TEST(FollowerRenewal, ANodeTheViewDoesNotHaveIsRefused) {
  RenewalInput in = Fresh({RankInView::kDesired});
  in.node_known = false;
  EXPECT_EQ(DecideRenewal(in), (RenewalDecision{kRefuse, RenewalRefusal::kUnknownNode}));
}

TEST(FollowerRenewal, ALostNodeIsToldToStopWhateverElseItRuns) {
  EXPECT_EQ(DecideRenewal(Fresh({RankInView::kLost})), (RenewalDecision{kStop, RenewalRefusal::kNone}));
  EXPECT_EQ(DecideRenewal(Fresh({RankInView::kDesired, RankInView::kLost, RankInView::kNotDesired})).verdict,
            kStop);
}

TEST(FollowerRenewal, RanksTheViewDoesNotAssignTheNodeAreLeftToTheLeader) {
  // The view may be older than an assignment the agent already holds: the lease is not renewed (the agent
  // keeps the one it has), and nothing is stopped.
  EXPECT_EQ(DecideRenewal(Fresh({RankInView::kDesired, RankInView::kNotDesired})),
            (RenewalDecision{kRefuse, RenewalRefusal::kNotDesired}));
  EXPECT_STREQ(ToString(RenewalRefusal::kNotDesired), "not_desired");
}

TEST(FollowerRenewal, ReadsTheRunningRanksOfAHeartbeat) {
  Json body = Json::parse(R"({"agent": {"pid": 1}, "processes": [
      {"job": "job-000001", "attempt": 2, "rank": 5, "pid": 42, "state": "running"},
      {"job": "job-000001", "attempt": 1, "rank": 5, "state": "exited", "exit_code": 1}],
      "reports": [{"job": "job-000001", "attempt": 2, "rank": 5, "reports": []}]})");
  Result<std::vector<RankRef>> ranks = RunningRanksOf(body);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  ASSERT_EQ(ranks->size(), 1u);
  EXPECT_EQ((*ranks)[0], (RankRef{"job-000001", 2, 5}));
  EXPECT_TRUE(RunningRanksOf(Json::parse(R"({"processes": null})"))->empty());
  EXPECT_TRUE(RunningRanksOf(Json::parse("{}"))->empty());
}

TEST(FollowerRenewal, ABadHeartbeatIsRefusedNamingTheField) {
  auto field = [](const char* text) {
    Result<std::vector<RankRef>> r = RunningRanksOf(Json::parse(text));
    EXPECT_EQ(r.status().code(), Code::kInvalidContent) << text;
    return r.ok() || r.status().fields().empty() ? std::string() : r.status().fields()[0].field;
  };
  EXPECT_EQ(field("[]"), "$");
  EXPECT_EQ(field(R"({"processes": {}})"), "processes");
  EXPECT_EQ(field(R"({"processes": [1]})"), "processes[0]");
  EXPECT_EQ(field(R"({"processes": [{"job": "j", "attempt": 1, "rank": 0, "state": "gone"}]})"),
            "processes[0].state");
  EXPECT_EQ(field(R"({"processes": [{"job": "", "attempt": 1, "rank": 0, "state": "running"}]})"),
            "processes[0].job");
  EXPECT_EQ(field(R"({"processes": [{"job": "j", "attempt": -1, "rank": 0, "state": "running"}]})"),
            "processes[0].attempt");
  EXPECT_EQ(field(R"({"processes": [{"job": "j", "attempt": 1, "rank": 2147483648, "state": "running"}]})"),
            "processes[0].rank");
  // Bounded: more entries than the protocol allows are refused before any is read.
  Json many = {{"processes", Json::array()}};
  for (int i = 0; i < 257; ++i)
    many["processes"].push_back({{"job", "j"}, {"attempt", 1}, {"rank", i}, {"state", "running"}});
  EXPECT_EQ(RunningRanksOf(many).status().code(), Code::kInvalidContent);
}

}  // namespace
}  // namespace shepherd
