// Unknown processes (health/unknown_processes.h): which running processes the daemon has no record of, and
// when they stop being kept. Simulated time.
#include "health/unknown_processes.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_clock.h"

namespace shepherd {
namespace {

ProcessStatus Proc(const std::string& job, int attempt, int rank, bool running = true, int64_t pid = 0) {
  ProcessStatus p;
  p.rank = {job, attempt, rank};
  p.running = running;
  p.pid = pid;
  return p;
}

// The daemon knows job-1 up to attempt 2 only.
bool Knows(const RankRef& r) {
  return r.job == "job-1" && r.attempt <= 2;
}

TEST(UnknownProcesses, AHealthyNodeHasNone) {
  FakeClock clock;
  // The current attempt, an older attempt being stopped (fencing, not unknown) and an exit of an old one.
  auto u = TrackUnknown({}, {Proc("job-1", 2, 0), Proc("job-1", 1, 0), Proc("job-1", 1, 1, false)}, Knows,
                        clock.Now());
  EXPECT_TRUE(u.empty());
  EXPECT_TRUE(KeepList(u).empty());
}

TEST(UnknownProcesses, UnknownJobsAndAttemptsNeverStartedAreTrackedFromFirstSight) {
  FakeClock clock;
  Time first = clock.Now();
  auto u = TrackUnknown({}, {Proc("job-1", 2, 0), Proc("job-9", 1, 3, true, 4242), Proc("job-1", 3, 0)},
                        Knows, first);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].rank, (RankRef{"job-9", 1, 3}));
  EXPECT_EQ(u[0].pid, 4242);
  EXPECT_EQ(u[0].first_seen, first);
  EXPECT_EQ(u[1].rank, (RankRef{"job-1", 3, 0}));  // an attempt the daemon never started
  EXPECT_FALSE(u[0].stopping);
  clock.AdvanceSeconds(5);
  u = TrackUnknown(u, {Proc("job-9", 1, 3, true, 4242), Proc("job-1", 3, 0)}, Knows, clock.Now());
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].first_seen, first);  // not reset by later heartbeats
  EXPECT_EQ(KeepList(u), (std::vector<RankRef>{{"job-9", 1, 3}, {"job-1", 3, 0}}));
}

TEST(UnknownProcesses, StaysUnknownWhenAJobOfTheSameIdAppearsAndIsDroppedWhenGone) {
  FakeClock clock;
  auto u = TrackUnknown({}, {Proc("job-2", 1, 0)}, Knows, clock.Now());
  ASSERT_EQ(u.size(), 1u);
  // The fresh database created its own job-2 since: still not this process's job.
  auto knows_now = [](const RankRef& r) { return r.job == "job-2"; };
  u = TrackUnknown(u, {Proc("job-2", 1, 0)}, knows_now, clock.Now());
  ASSERT_EQ(u.size(), 1u);
  u = TrackUnknown(u, {Proc("job-2", 1, 0, /*running=*/false)}, knows_now, clock.Now());  // it exited
  EXPECT_TRUE(u.empty());
}

TEST(UnknownProcesses, TheTimeoutDropsThemFromKeepExactlyWhenItPasses) {
  FakeClock clock;
  auto u = TrackUnknown({}, {Proc("job-9", 1, 0)}, Knows, clock.Now());
  clock.AdvanceSeconds(3);
  u = TrackUnknown(u, {Proc("job-9", 1, 0), Proc("job-9", 1, 1)}, Knows, clock.Now());  // seen 3 s later
  clock.AdvanceSeconds(596.9);
  EXPECT_FALSE(ExpireUnknown(&u, clock.Now(), 600));
  EXPECT_EQ(KeepList(u).size(), 2u);
  clock.AdvanceSeconds(0.1);  // 600 s after the first was seen
  EXPECT_TRUE(ExpireUnknown(&u, clock.Now(), 600));
  EXPECT_EQ(KeepList(u), (std::vector<RankRef>{{"job-9", 1, 1}}));
  EXPECT_FALSE(ExpireUnknown(&u, clock.Now(), 600));  // once
  clock.AdvanceSeconds(3);
  EXPECT_TRUE(ExpireUnknown(&u, clock.Now(), 600));
  EXPECT_TRUE(KeepList(u).empty());
  EXPECT_EQ(u.size(), 2u);  // shown as decided until their agent reports them gone
}

TEST(UnknownProcesses, ZeroTimeoutKeepsThemUntilAnOperatorDecides) {
  FakeClock clock;
  auto u = TrackUnknown({}, {Proc("job-9", 1, 0), Proc("job-9", 1, 1)}, Knows, clock.Now());
  clock.AdvanceSeconds(365 * 86400);
  EXPECT_FALSE(ExpireUnknown(&u, clock.Now(), 0));
  EXPECT_EQ(KeepList(u).size(), 2u);
  EXPECT_EQ(StopUnknown(&u), 2);
  EXPECT_TRUE(KeepList(u).empty());
  EXPECT_EQ(StopUnknown(&u), 0);
}

}  // namespace
}  // namespace shepherd
