// FloodGuard (api/flood_guard.h), FloodLimits and Shedding (daemon/overload.h), ConnectionsThatFit
// (core/open_files.h): pure pieces, a fake steady clock. Expected values are worked out by hand from the
// rates and bursts.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include "api/flood_guard.h"
#include "core/open_files.h"
#include "core/time.h"
#include "daemon/overload.h"
#include "health/lateness.h"

namespace shepherd {
namespace {

using namespace std::chrono_literals;
using TimePoint = FloodGuard::Clock::time_point;

TEST(FloodGuardTest, ABurstPassesThenTheRateAndTheRestIsRefusedWithRetryAfter) {
  FloodGuard g({.rate_per_s = 5, .burst = 20});
  const TimePoint t0{};
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(g.Admit("n1", t0)) << i;
  std::optional<int> wait = g.Admit("n1", t0);
  ASSERT_TRUE(wait);
  EXPECT_EQ(*wait, 1);  // one token comes back in 0.2 s: Retry-After is whole seconds, at least 1
  // 1 s later: 5 tokens.
  int admitted = 0;
  for (int i = 0; i < 50; ++i) admitted += !g.Admit("n1", t0 + 1s);
  EXPECT_EQ(admitted, 5);
  // Another key has its own bucket.
  EXPECT_FALSE(g.Admit("n2", t0 + 1s));
}

TEST(FloodGuardTest, ASenderAtItsIntervalIsNeverRefused) {
  FloodGuard g({.rate_per_s = 5, .burst = 20});
  TimePoint t{};
  for (int i = 0; i < 1000; ++i, t += 250ms) EXPECT_FALSE(g.Admit("n1", t)) << i;  // 4 a second
}

TEST(FloodGuardTest, ZeroRateIsNoLimit) {
  FloodGuard g({.rate_per_s = 0, .burst = 1});
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(g.Admit("n1", TimePoint{}));
  EXPECT_EQ(g.keys(), 0u);
}

TEST(FloodGuardTest, KeysAreBoundedAndIdleOnesMakeRoom) {
  FloodGuard g({.rate_per_s = 1, .burst = 2, .max_keys = 3});
  const TimePoint t0{};
  for (const char* k : {"a", "b", "c"}) {
    EXPECT_FALSE(g.Admit(k, t0));
    EXPECT_FALSE(g.Admit(k, t0));
  }
  EXPECT_TRUE(g.Admit("a", t0));  // a is out of tokens
  // Full, nothing refilled yet: a new key is admitted untracked (liveness first), nothing grows.
  EXPECT_FALSE(g.Admit("d", t0));
  EXPECT_EQ(g.keys(), 3u);
  // 5 s later every bucket has refilled: the sweep drops them and the new key is tracked.
  EXPECT_FALSE(g.Admit("e", t0 + 5s));
  EXPECT_EQ(g.keys(), 1u);
}

// The route table's entry for `method pattern`.
const RouteRule& Route(const std::string& method, const std::string& pattern) {
  for (const RouteRule& r : RouteTable())
    if (r.method == method && r.pattern == pattern) return r;
  ADD_FAILURE() << "no route " << method << " " << pattern;
  return RouteTable().front();
}

TEST(FloodLimitsTest, HeartbeatsByNodeAndReportsByRankCredential) {
  FloodLimits limits({.heartbeats_per_node_s = 1, .reports_per_rank_s = 1});  // bursts of 20
  const TimePoint t0{};
  const std::map<std::string, std::string> n1{{"id", "n1"}}, n2{{"id", "n2"}}, job{{"id", "job-000001"}};
  int refused = 0;
  std::optional<HttpResponse> last;
  for (int i = 0; i < 25; ++i)
    if (auto r = limits.Judge(Route("POST", "/v1/nodes/{id}/heartbeat"), n1, std::nullopt, t0)) {
      ++refused;
      last = r;
    }
  EXPECT_EQ(refused, 5);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->status, 429);
  bool retry_after = false;
  for (const auto& [k, v] : last->headers) retry_after |= k == "Retry-After" && v == "1";
  EXPECT_TRUE(retry_after);
  EXPECT_FALSE(limits.Judge(Route("POST", "/v1/nodes/{id}/heartbeat"), n2, std::nullopt, t0));  // another node
  EXPECT_FALSE(limits.Judge(Route("GET", "/v1/nodes/{id}/assignments"), n1, std::nullopt, t0));  // not judged

  Principal rank3{.role = Role::kRank, .name = "rank:job-000001", .job = "job-000001", .attempt = 1, .rank = 3};
  Principal any_rank{.role = Role::kRank, .name = "rank:job-000001", .job = "job-000001", .attempt = 1};
  refused = 0;
  for (int i = 0; i < 25; ++i) refused += limits.Judge(Route("POST", "/v1/jobs/{id}/reports"), job, rank3, t0).has_value();
  EXPECT_EQ(refused, 5);
  Principal rank4 = rank3;
  rank4.rank = 4;
  EXPECT_FALSE(limits.Judge(Route("POST", "/v1/jobs/{id}/reports"), job, rank4, t0));  // its own bucket
  // A job-wide token is shared by every rank: not limited per request here.
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(limits.Judge(Route("POST", "/v1/jobs/{id}/reports"), job, any_rank, t0));
}

TEST(SheddingTest, OwnCapacityIsTheDaemonsLatenessTheCallersQuotaIsNot) {
  Shedding s;
  s.Count(ShedReason::kConnectionCap);
  s.Count(ShedReason::kEvicted);
  s.Count(ShedReason::kBodyBudget);
  s.Count(ShedReason::kQueueFull);
  s.Count(ShedReason::kIdentityCap);
  s.Count(ShedReason::kBodyShare);
  s.Count(ShedReason::kRateLimited);
  s.Count(ShedReason::kRateLimited);
  EXPECT_EQ(s.TakeOwnCapacity(), 4u);
  EXPECT_EQ(s.TakeOwnCapacity(), 0u);
  EXPECT_EQ(s.total(ShedReason::kRateLimited), 2u);
  std::string out;
  s.AppendMetrics(&out);
  EXPECT_NE(out.find("shepherd_requests_shed_total{reason=\"rate_limited\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("shepherd_requests_shed_total{reason=\"evicted\"} 1\n"), std::string::npos) << out;

  // Fed to the lateness model at a tick, shedding restarts the listening window: a node silent since
  // before the shedding gets a full window of listening after it.
  const Time t0 = FromUnixSeconds(1764410000);
  Lateness lateness(2, t0);
  s.Count(ShedReason::kEvicted);
  lateness.OnRefusals(s.TakeOwnCapacity(), t0 + Seconds(30));
  EXPECT_EQ(lateness.listening_since(), t0 + Seconds(30));
  s.Count(ShedReason::kRateLimited);  // a flooder's own quota: listening goes on
  lateness.OnRefusals(s.TakeOwnCapacity(), t0 + Seconds(31));
  EXPECT_EQ(lateness.listening_since(), t0 + Seconds(30));
}

TEST(OpenFilesTest, ConnectionsAreFittedToTheSoftLimit) {
  OpenFilesLimit l{.soft_before = 1024, .soft = 4096, .hard = 4096};
  EXPECT_EQ(ConnectionsThatFit(l, 40000, 272), 4096u - 272u);
  EXPECT_EQ(ConnectionsThatFit(l, 1000, 272), 1000u);
  l.soft = 100;
  EXPECT_EQ(ConnectionsThatFit(l, 40000, 272), 1u);
  l.unlimited = true;
  EXPECT_EQ(ConnectionsThatFit(l, 40000, 272), 40000u);
  EXPECT_EQ(Describe(OpenFilesLimit{.soft_before = 1024, .soft = 4096, .hard = 4096}),
            "open files: soft limit 1024 raised to 4096 (the hard limit)");
}

}  // namespace
}  // namespace shepherd
