// The arrival-order straggler rule (health/arrival_stragglers.h) on a fake clock: windows of summaries
// whose waits are written by hand, so the expected rank, lateness and share are known without the rule.
#include "health/arrival_stragglers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "tests/health/health_test_util.h"

namespace shepherd::testing {
namespace {

const Time kT0 = FromUnixSeconds(1'800'000'000);

GroupSummary Group(const char* name, int64_t count, double wait_s) {
  GroupSummary g;
  g.group = name;
  g.group_kind = GroupKindFromName(name);
  g.count = count;
  g.wait_s = wait_s;
  return g;
}

class ArrivalTest : public ::testing::Test {
 protected:
  void Layout(int tp, int pp, int dp) {
    auto l = RankLayout::Build(MakeContext(tp, pp, dp, kT0).plan, MakeContext(tp, pp, dp, kT0).placement, 0);
    ASSERT_TRUE(l.ok()) << l.status().message();
    layout_ = std::make_unique<RankLayout>(std::move(l).value());
    arrivals_.Tick(*layout_, now_);  // opens the first window
  }
  // One window of `window_s` (the rule's): every rank reports `count` collectives of `group` waiting
  // wait(rank) seconds on average, then the window closes.
  void Window(const char* group, const std::function<double(int)>& wait, int count = 5) {
    for (int r = 0; r < layout_->world_size(); ++r)
      arrivals_.Observe(r, layout_->world_size(), Group(group, count, wait(r) * count));
    now_ += Seconds(arrivals_.rule().window_s);
    EXPECT_TRUE(arrivals_.Tick(*layout_, now_));
  }
  bool Named(int rank) const {
    for (const ArrivalStraggler& s : arrivals_.named())
      if (s.rank == rank) return true;
    return false;
  }

  ArrivalStragglers arrivals_{ArrivalRuleFor(1.0)};
  std::unique_ptr<RankLayout> layout_;
  Time now_ = kT0;
};

TEST_F(ArrivalTest, RuleForTheSummaryInterval) {
  EXPECT_DOUBLE_EQ(ArrivalRuleFor(1).window_s, 1.5);
  EXPECT_DOUBLE_EQ(ArrivalRuleFor(1).min_span_s, 30);
  EXPECT_DOUBLE_EQ(ArrivalRuleFor(0.2).window_s, 1.5);
  EXPECT_DOUBLE_EQ(ArrivalRuleFor(4).window_s, 6);
  EXPECT_DOUBLE_EQ(ArrivalRuleFor(4).min_span_s, 19 * 6.0);  // 20 windows of 6 s
}

TEST_F(ArrivalTest, PersistentLateArriverIsNamedAfterTwentyWindowsAndThirtySeconds) {
  Layout(1, 1, 4);
  // Rank 2 arrives 0.15 s late to every all-reduce: it waits 0.01 s, the others 0.16 s.
  auto wait = [](int r) { return r == 2 ? 0.01 : 0.16; };
  for (int w = 1; w <= 19; ++w) {
    Window("dp", wait);
    EXPECT_TRUE(arrivals_.named().empty()) << "window " << w;  // 19 windows, 28.5 s: not yet
  }
  Window("dp", wait);  // the 20th window ends 30 s after the first began
  ASSERT_EQ(arrivals_.named().size(), 1u);
  const ArrivalStraggler& s = arrivals_.named()[0];
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.group, GroupKind::kDp);
  EXPECT_NEAR(s.lateness_s, 0.15, 1e-4);
  EXPECT_DOUBLE_EQ(s.share_held_up, 1.0);
  EXPECT_EQ(s.windows, 20);
  EXPECT_NEAR(s.span_s, 30, 1e-6);
}

TEST_F(ArrivalTest, HealthyNoiseNamesNoOneOverThirtyMinutes) {
  Layout(1, 1, 2);  // two members: the worst case, a coin per window
  uint64_t x = 88172645463325252ull;  // xorshift: deterministic noise
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<double>(x % 100000) / 100000.0;
  };
  int held_windows = 0;
  for (int w = 0; w < 1200; ++w) {  // 30 minutes of 1.5 s windows
    // Arrival order random each window, and large against the waits (5-25 ms apart on 20 ms).
    const double a = 0.02 + 0.02 * next(), b = 0.02 + 0.02 * next();
    if (std::abs(a - b) > std::max(0.001, 0.25 * std::max(a, b))) ++held_windows;
    Window("dp", [&](int r) { return r == 0 ? a : b; });
    ASSERT_TRUE(arrivals_.named().empty()) << "window " << w;
  }
  EXPECT_GT(held_windows, 100);  // the noise did exceed the margin often: the test exercises the share rule
}

TEST_F(ArrivalTest, TransientLatenessNamesNoOne) {
  Layout(1, 1, 4);
  for (int w = 0; w < 15; ++w) Window("dp", [](int r) { return r == 1 ? 0.0 : 0.3; });  // 22.5 s late
  for (int w = 0; w < 40; ++w) {
    Window("dp", [](int) { return 0.05; });
    EXPECT_TRUE(arrivals_.named().empty());
  }
}

TEST_F(ArrivalTest, WithinTheMarginNoOneHoldsTheGroupUp) {
  Layout(1, 1, 4);
  // 0.8 ms below the others (under the 1 ms floor), then 20 % below (under the 25 % share of the wait).
  for (int w = 0; w < 30; ++w) Window("dp", [](int r) { return r == 3 ? 0.0022 : 0.003; });
  for (int w = 0; w < 30; ++w) Window("dp", [](int r) { return r == 3 ? 0.08 : 0.1; });
  EXPECT_TRUE(arrivals_.named().empty());
  EXPECT_EQ(arrivals_.windows_closed(), 60);
}

TEST_F(ArrivalTest, AWindowWithASilentMemberIsNotJudged) {
  Layout(1, 1, 4);
  // Rank 0 sends nothing: rank 3's low wait proves nothing (rank 0 may be the one everyone waits for).
  for (int w = 0; w < 40; ++w) {
    for (int r = 1; r < 4; ++r) arrivals_.Observe(r, 4, Group("dp", 5, r == 3 ? 0.05 : 1.0));
    arrivals_.Observe(0, 4, Group("dp", 0, 0.0));  // no collective completed: not a report of a wait
    now_ += Seconds(1.5);
    arrivals_.Tick(*layout_, now_);
  }
  EXPECT_TRUE(arrivals_.named().empty());
  // With every member reporting, the same waits name rank 3.
  for (int w = 0; w < 20; ++w) Window("dp", [](int r) { return r == 3 ? 0.01 : 0.2; });
  EXPECT_TRUE(Named(3));
}

TEST_F(ArrivalTest, RecoveredRankIsNoLongerNamed) {
  Layout(1, 1, 4);
  for (int w = 0; w < 25; ++w) Window("dp", [](int r) { return r == 0 ? 0.0 : 0.1; });
  ASSERT_TRUE(Named(0));
  int w = 0;
  while (Named(0) && w < 100) Window("dp", [](int) { return 0.1; }), ++w;
  EXPECT_FALSE(Named(0));
  EXPECT_GT(w, 5);   // hysteresis: a few healthy windows do not clear it
  EXPECT_LE(w, 30);  // but it clears within about 45 s
}

TEST_F(ArrivalTest, ShareCountsTheRanksCollectivesInHeldWindows) {
  Layout(1, 1, 4);
  // Rank 1 holds the group up in 9 of every 10 windows (6 collectives each); in the 10th it is on time and
  // runs 2 collectives. Over 40 windows its share of collectives held up: 36·6 / (36·6 + 4·2) = 216 / 224.
  for (int w = 0; w < 40; ++w) {
    const bool late = w % 10 != 9;
    Window("dp", [&](int r) { return r == 1 && late ? 0.02 : 0.1; }, late ? 6 : 2);
  }
  ASSERT_EQ(arrivals_.named().size(), 1u);
  const ArrivalStraggler& s = arrivals_.named()[0];
  EXPECT_EQ(s.rank, 1);
  EXPECT_NEAR(s.share_held_up, 216.0 / 224.0, 1e-4);
  EXPECT_NEAR(s.lateness_s, 0.08, 1e-4);
}

TEST_F(ArrivalTest, GroupsFollowTheLayoutCoordinates) {
  Layout(2, 2, 4);  // rank = tp + 2·(dp + 4·pp): 16 ranks
  // The rank at tp 1, dp 2, pp 1 (1 + 2·(2 + 4) = 13) is late in its tp group (with rank 12) and in its
  // dp group (ranks 9, 11, 13, 15).
  const int slow = 1 + 2 * (2 + 4 * 1);
  for (int w = 0; w < 21; ++w) {
    for (int r = 0; r < 16; ++r) {
      arrivals_.Observe(r, 16, Group("tp", 4, (r == slow ? 0.001 : 0.05) * 4));
      arrivals_.Observe(r, 16, Group("dp", 2, (r == slow ? 0.002 : 0.07) * 2));
      arrivals_.Observe(r, 16, Group("pp", 3, r * 0.01));  // pp: never judged (schedule-driven)
    }
    now_ += Seconds(1.5);
    arrivals_.Tick(*layout_, now_);
  }
  ASSERT_EQ(arrivals_.named().size(), 2u);
  EXPECT_EQ(arrivals_.named()[0].rank, slow);
  EXPECT_EQ(arrivals_.named()[0].group, GroupKind::kTp);
  EXPECT_NEAR(arrivals_.named()[0].lateness_s, 0.049, 1e-4);
  EXPECT_EQ(arrivals_.named()[1].rank, slow);
  EXPECT_EQ(arrivals_.named()[1].group, GroupKind::kDp);
  EXPECT_NEAR(arrivals_.named()[1].lateness_s, 0.068, 1e-4);
}

TEST_F(ArrivalTest, BadSummariesAreIgnored) {
  Layout(1, 1, 4);
  for (int w = 0; w < 25; ++w) {
    for (int r = 0; r < 4; ++r) {
      arrivals_.Observe(r, 4, Group("dp", 3, 0.3));
      arrivals_.Observe(r, 4, Group("dp", 1, r == 2 ? -5.0 : std::nan("")));  // negative, NaN: ignored
      arrivals_.Observe(r + 4, 4, Group("dp", 1, 0.0));                      // outside the world
      arrivals_.Observe(r, 4, Group("mygroup", 1, 0.0));                     // named group: ignored
    }
    now_ += Seconds(1.5);
    arrivals_.Tick(*layout_, now_);
  }
  EXPECT_TRUE(arrivals_.named().empty());
}

TEST_F(ArrivalTest, StateIsSmallPerRank) {
  // The per-rank accumulators and slot map of one group kind, plus one run per group of two.
  const size_t per_rank = 8 + 4 + 40 / 2;
  EXPECT_LE(per_rank, 64u);
  Layout(8, 16, 1024);  // 131,072 ranks
  for (int r = 0; r < layout_->world_size(); ++r) arrivals_.Observe(r, layout_->world_size(), Group("dp", 1, 0.1));
  now_ += Seconds(1.5);
  EXPECT_TRUE(arrivals_.Tick(*layout_, now_));
  EXPECT_TRUE(arrivals_.named().empty());
}

}  // namespace
}  // namespace shepherd::testing

namespace shepherd::testing {
namespace {

Report Summary(int rank, Time t, int64_t count, double wait_s) {
  Report r;
  r.rank = rank;
  r.attempt = 1;
  r.time = t;
  r.kind = ReportKind::kSummary;
  r.phase = Phase::kTrain;
  GroupSummary g;
  g.group = "dp";
  g.group_kind = GroupKind::kDp;
  g.completed = 100;
  g.count = count;
  g.wait_s = wait_s;
  r.groups.push_back(g);
  return r;
}

// The JobMonitor surfaces: one straggler finding naming the rank and its node with the evidence, the
// health check's arrival evidence, and nothing for equal waits.
TEST(JobMonitorArrivalTest, SummariesNameTheLateArriverOnItsNode) {
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 4, clock.Now(), /*gpus_per_node=*/2);  // ranks 0,1 on n0; 2,3 on n1
  auto m = Training(c);
  std::vector<Finding> found;
  for (int s = 0; s < 60; ++s) {  // one summary per rank per second; rank 3 arrives 0.2 s late
    for (int r = 0; r < 4; ++r) ASSERT_TRUE(m->Ingest(Summary(r, clock.Now(), 4, r == 3 ? 0.02 : 0.82), clock.Now()).status.ok());
    for (const Finding& f : OfKind(m->Evaluate(clock.Now()), FindingKind::kStraggler)) found.push_back(f);
    clock.Advance(Seconds(1));
  }
  ASSERT_EQ(found.size(), 1u);  // one incident, not one per window
  const Finding& f = found[0];
  EXPECT_EQ(f.ranks, std::vector<int>({3}));
  EXPECT_EQ(f.nodes, std::vector<std::string>({"n1"}));
  ASSERT_TRUE(f.straggler);
  EXPECT_EQ(f.straggler->group, "dp");
  EXPECT_NEAR(f.straggler->lateness_s, 0.2, 1e-3);
  EXPECT_NEAR(f.straggler->share_held_up, 1.0, 1e-6);
  EXPECT_GE(f.straggler->windows, 20);
  const Json h = m->HealthJson(clock.Now());
  EXPECT_EQ(h["status"], "degraded");
  EXPECT_EQ(h["checks"]["straggler"]["status"], "stragglers");
  const Json& a = h["checks"]["straggler"]["arrival"]["stragglers"];
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["rank"], 3);
  EXPECT_EQ(a[0]["node"], "n1");
  EXPECT_EQ(a[0]["group"], "dp");
  EXPECT_EQ(h["checks"]["straggler"]["action"], "record");
  EXPECT_EQ(h["suspects"]["nodes"], Json::array({"n1"}));
}

// The wire form (docs/api.md "Summaries") through ParseReport; a summary refused for its seq going backwards
// feeds nothing to the rule.
TEST(JobMonitorArrivalTest, ParsedSummariesFeedTheRuleAndRefusedOnesDoNot) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 4, clock.Now(), 2));
  std::vector<Finding> found;
  for (int s = 0; s < 60; ++s) {
    for (int r = 0; r < 4; ++r) {
      const double wait = r == 1 ? 0.01 : 0.61;  // per 3 collectives: rank 1 is 0.2 s late to each
      Json j = Json::parse(R"({"kind": "summary", "attempt": 1, "step": 10, "phase": "train",
                               "groups": [{"group": "dp", "completed": 0, "count": 3, "wait_s": 0}]})");
      j["rank"] = r;
      j["time"] = ToUnixSeconds(clock.Now());
      j["groups"][0]["completed"] = 100 + 3 * s;
      j["groups"][0]["wait_s"] = wait;
      Result<Report> rep = ParseReport(j, clock.Now());
      ASSERT_TRUE(rep.ok()) << rep.status().message();
      ASSERT_TRUE(m->Ingest(*rep, clock.Now()).status.ok());
      // A replayed older summary claiming rank 2 was the late one: refused (seq_backwards), no evidence.
      if (s > 0 && r == 2) {
        j["groups"][0]["completed"] = 100 + 3 * (s - 1);
        j["groups"][0]["wait_s"] = 0.0;
        j["groups"][0]["count"] = 300;  // taken, it would make rank 2 the lowest mean wait (0.61 / 303 s)
        Result<Report> old = ParseReport(j, clock.Now());
        ASSERT_TRUE(old.ok());
        EXPECT_TRUE(m->Ingest(*old, clock.Now()).ignored);
      }
    }
    for (const Finding& f : OfKind(m->Evaluate(clock.Now()), FindingKind::kStraggler)) found.push_back(f);
    clock.Advance(Seconds(1));
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].ranks, std::vector<int>({1}));
  EXPECT_EQ(found[0].nodes, std::vector<std::string>({"n0"}));
  EXPECT_NEAR(found[0].straggler->lateness_s, 0.2, 1e-3);
}

TEST(JobMonitorArrivalTest, EqualWaitsNameNoOne) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 4, clock.Now(), 2));
  for (int s = 0; s < 120; ++s) {
    for (int r = 0; r < 4; ++r) m->Ingest(Summary(r, clock.Now(), 4, 0.4 + 0.004 * ((r + s) % 4)), clock.Now());
    EXPECT_TRUE(OfKind(m->Evaluate(clock.Now()), FindingKind::kStraggler).empty());
    clock.Advance(Seconds(1));
  }
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["straggler"]["status"], "ok");
  EXPECT_GT(m->HealthJson(clock.Now())["checks"]["straggler"]["arrival"]["windows_closed"], 50);  // 1 s ticks close a 1.5 s window every 2 s
}

}  // namespace
}  // namespace shepherd::testing
