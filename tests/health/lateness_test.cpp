// The daemon's own lateness is never the ranks' fault: simulated time, the JobMonitor fed as the controller
// feeds it (every report, an Evaluate per tick with Lateness's listening_since).
#include "health/lateness.h"

#include <gtest/gtest.h>

#include "tests/health/health_test_util.h"

namespace shepherd::testing {
namespace {

constexpr double kLateAfter = 2;

// One tick of a daemon: the control thread turns, then evaluates.
std::vector<Finding> Tick(JobMonitor& m, Lateness& a, Time now) {
  a.OnTurn(now);
  return m.Evaluate(now, a.listening_since());
}

// Every rank except `silent` reports at `now`.
void Reports(JobMonitor& m, int world, Time now, int64_t step, int silent = -1) {
  for (int r = 0; r < world; ++r)
    if (r != silent) ASSERT_TRUE(m.Ingest(Heartbeat(r, now, step), now).status.ok());
}

TEST(LatenessTest, GapBetweenTurnsIsAStallThatRestartsListening) {
  FakeClock clock;
  Lateness a(kLateAfter, clock.Now());
  Time start = clock.Now();
  for (int i = 0; i < 5; ++i) {
    clock.AdvanceSeconds(1);
    a.OnTurn(clock.Now());
  }
  EXPECT_EQ(a.listening_since(), start);  // turns every second: healthy since the start
  EXPECT_EQ(a.facts(clock.Now()).stalls, 0u);
  clock.AdvanceSeconds(12);  // SIGSTOP
  a.OnTurn(clock.Now());
  EXPECT_EQ(a.listening_since(), clock.Now());
  Lateness::Facts f = a.facts(clock.Now());
  EXPECT_EQ(f.stalls, 1u);
  EXPECT_DOUBLE_EQ(f.longest_stall_s, 12);
}

TEST(LatenessTest, TickLagAndQueueAgeOverTheThresholdAreLateness) {
  FakeClock clock;
  Lateness a(kLateAfter, clock.Now());
  Time start = clock.Now();
  clock.AdvanceSeconds(1);
  a.OnTickLag(Seconds(0.3), clock.Now());
  a.OnQueueAge(Seconds(0.5), clock.Now());
  EXPECT_EQ(a.listening_since(), start);
  EXPECT_FALSE(a.facts(clock.Now()).late);
  clock.AdvanceSeconds(1);
  a.OnTickLag(Seconds(0.2), clock.Now());
  a.OnQueueAge(Seconds(19), clock.Now());  // reads starved the control thread
  EXPECT_EQ(a.listening_since(), clock.Now());
  EXPECT_TRUE(a.facts(clock.Now()).late);
  clock.AdvanceSeconds(1);
  a.OnTickLag(Seconds(3), clock.Now());  // still late: the same episode
  a.OnQueueAge(Seconds(0.1), clock.Now());
  EXPECT_EQ(a.facts(clock.Now()).stalls, 1u);
  EXPECT_EQ(a.listening_since(), clock.Now());
}

TEST(LatenessTest, ATwelveSecondStallRaisesNoFinding) {
  FakeClock clock;
  MonitorContext ctx = MakeContext(2, 1, 2, clock.Now());
  auto m = MakeMonitor(ctx);
  Lateness a(kLateAfter, clock.Now());
  int64_t step = 0;
  std::vector<Finding> all;
  auto run = [&](int seconds) {
    for (int i = 0; i < seconds; ++i) {
      clock.AdvanceSeconds(1);
      Reports(*m, 4, clock.Now(), ++step);
      for (Finding& f : Tick(*m, a, clock.Now())) all.push_back(f);
    }
  };
  run(30);
  clock.AdvanceSeconds(12);  // the daemon is stopped: no report is processed, no tick runs
  // On SIGCONT the tick may run before the queued reports are read.
  for (Finding& f : Tick(*m, a, clock.Now())) all.push_back(f);
  Reports(*m, 4, clock.Now(), ++step);
  run(30);
  EXPECT_TRUE(all.empty()) << ToString(all.front().kind) << ": " << all.front().detail;
}

// 600 agents behind one address: past the per-address connection cap the server answered their heartbeats
// 503 itself, and then declared four of those nodes lost. A refusal is the daemon not listening: silence
// counts from after the last one.
TEST(LatenessTest, RequestsTheServerRefusedAreTheDaemonNotListening) {
  FakeClock clock;
  MonitorContext ctx = MakeContext(2, 1, 2, clock.Now());
  auto m = MakeMonitor(ctx);
  Lateness a(kLateAfter, clock.Now());
  std::vector<Finding> all;
  int64_t step = 0;
  auto run = [&](int seconds, uint64_t refused_per_s, int silent) {
    for (int i = 0; i < seconds; ++i) {
      clock.AdvanceSeconds(1);
      Reports(*m, 4, clock.Now(), ++step, silent);
      a.OnRefusals(refused_per_s, clock.Now());
      for (Finding& f : Tick(*m, a, clock.Now())) all.push_back(f);
    }
  };
  run(30, 0, -1);
  EXPECT_EQ(a.facts(clock.Now()).stalls, 0u);
  run(40, 5, 3);  // rank 3's reports are among the refused ones
  EXPECT_TRUE(all.empty()) << all.front().detail;
  EXPECT_EQ(a.listening_since(), clock.Now());
  run(30, 0, -1);  // served again
  EXPECT_TRUE(all.empty()) << all.front().detail;
  run(30, 0, 3);  // silent while nothing is refused: found
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().kind, FindingKind::kHeartbeatLost);
}

TEST(LatenessTest, ARankSilentWhileTheDaemonIsHealthyIsStillFound) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(2, 1, 2, clock.Now()));
  Lateness a(kLateAfter, clock.Now());
  int64_t step = 0;
  for (int i = 0; i < 5; ++i) {
    clock.AdvanceSeconds(1);
    Reports(*m, 4, clock.Now(), ++step);
    EXPECT_TRUE(Tick(*m, a, clock.Now()).empty());
  }
  Time last_heard = clock.Now();
  std::vector<Finding> found;
  while (found.empty() && clock.Now() - last_heard < Seconds(30)) {
    clock.AdvanceSeconds(1);
    Reports(*m, 4, clock.Now(), ++step, /*silent=*/2);
    found = Tick(*m, a, clock.Now());
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kHeartbeatLost);
  EXPECT_EQ(found[0].ranks, std::vector<int>{2});
  EXPECT_DOUBLE_EQ(ToSeconds(clock.Now() - last_heard), 11);  // the first tick past the 10 s timeout
}

TEST(LatenessTest, ARankSilentAcrossAStallIsFoundOneFullWindowAfterIt) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(2, 1, 2, clock.Now()));
  Lateness a(kLateAfter, clock.Now());
  int64_t step = 0;
  for (int i = 0; i < 5; ++i) {
    clock.AdvanceSeconds(1);
    Reports(*m, 4, clock.Now(), ++step);
    Tick(*m, a, clock.Now());
  }
  clock.AdvanceSeconds(12);
  EXPECT_TRUE(Tick(*m, a, clock.Now()).empty());
  Time resumed = clock.Now();
  std::vector<Finding> found;
  while (found.empty() && clock.Now() - resumed < Seconds(30)) {
    clock.AdvanceSeconds(1);
    Reports(*m, 4, clock.Now(), ++step, /*silent=*/1);  // rank 1 died during the stall
    found = Tick(*m, a, clock.Now());
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].ranks, std::vector<int>{1});
  EXPECT_DOUBLE_EQ(ToSeconds(clock.Now() - resumed), 11);
}

TEST(LatenessTest, NoVerdictUntilAFullWindowAfterARestart) {
  FakeClock clock;
  Time attempt_started = clock.Now();
  auto m = MakeMonitor(MakeContext(2, 1, 2, attempt_started));
  clock.AdvanceSeconds(600);  // the daemon restarts long after the attempt started; nothing was heard
  Lateness a(kLateAfter, clock.Now());
  a.Restart(clock.Now());
  for (int i = 0; i < 10; ++i) {
    clock.AdvanceSeconds(1);
    EXPECT_TRUE(Tick(*m, a, clock.Now()).empty()) << "second " << i + 1;
  }
  clock.AdvanceSeconds(1);
  std::vector<Finding> found = Tick(*m, a, clock.Now());  // no rank re-attached in a full window
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].ranks.size(), 4u);
}

}  // namespace
}  // namespace shepherd::testing
