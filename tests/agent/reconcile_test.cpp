#include "agent/reconcile.h"

#include <gtest/gtest.h>

namespace shepherd::agent {
namespace {

RankAssignment Want(std::string job, int attempt, int rank, int gpu = -1) {
  return {{std::move(job), attempt, rank}, gpu, {"python3", "train.py"}, {{"RANK", std::to_string(rank)}}};
}
ActualProcess Have(std::string job, int attempt, int rank, pid_t pid,
                   ProcessPhase phase = ProcessPhase::kRunning, int gpu = -1) {
  return {{std::move(job), attempt, rank}, gpu, pid, phase};
}
std::vector<RankKey> Keys(const std::vector<RankAssignment>& v) {
  std::vector<RankKey> out;
  for (const auto& a : v) out.push_back(a.key);
  return out;
}

TEST(Reconcile, NothingDesiredNothingRunning) {
  ReconcileActions a = Reconcile({}, {});
  EXPECT_TRUE(a.start.empty());
  EXPECT_TRUE(a.stop.empty());
  EXPECT_TRUE(a.deferred.empty());
}

TEST(Reconcile, StartsDesiredRanksWithoutProcess) {
  ReconcileActions a = Reconcile({Want("j", 1, 0, 0), Want("j", 1, 1, 1)}, {Have("j", 1, 0, 100)});
  EXPECT_EQ(Keys(a.start), (std::vector<RankKey>{{"j", 1, 1}}));
  EXPECT_EQ(a.start[0].env.at("RANK"), "1");
  EXPECT_TRUE(a.stop.empty());
}

TEST(Reconcile, StopsProcessesNotDesired) {
  ReconcileActions a = Reconcile({}, {Have("j", 1, 0, 100), Have("k", 3, 2, 200)});
  ASSERT_EQ(a.stop.size(), 2u);
  EXPECT_EQ(a.stop[0].pid, 100);
  EXPECT_EQ(a.stop[0].reason, "not desired");
  EXPECT_EQ(a.stop[1].key, (RankKey{"k", 3, 2}));
}

TEST(Reconcile, StaleAttemptIsStoppedAndNewAttemptWaitsForIt) {
  std::vector<RankAssignment> desired = {Want("j", 2, 5, 1)};
  ReconcileActions a = Reconcile(desired, {Have("j", 1, 5, 100, ProcessPhase::kRunning, 1)});
  ASSERT_EQ(a.stop.size(), 1u);
  EXPECT_EQ(a.stop[0].reason, "stale attempt");
  EXPECT_TRUE(a.start.empty());
  EXPECT_EQ(a.deferred, (std::vector<RankKey>{{"j", 2, 5}}));

  // Still stopping: no second stop, still deferred.
  a = Reconcile(desired, {Have("j", 1, 5, 100, ProcessPhase::kStopping, 1)});
  EXPECT_TRUE(a.stop.empty());
  EXPECT_EQ(a.deferred.size(), 1u);

  // Gone: the new attempt starts.
  a = Reconcile(desired, {Have("j", 1, 5, 100, ProcessPhase::kExited, 1)});
  EXPECT_EQ(Keys(a.start), (std::vector<RankKey>{{"j", 2, 5}}));
  EXPECT_TRUE(a.deferred.empty());
}

TEST(Reconcile, StartWaitsForAnotherJobLeavingTheSameGpu) {
  ReconcileActions a =
      Reconcile({Want("new", 1, 0, 3)}, {Have("old", 1, 7, 100, ProcessPhase::kStopping, 3)});
  EXPECT_TRUE(a.start.empty());
  EXPECT_EQ(a.deferred.size(), 1u);
  // A different GPU does not block.
  a = Reconcile({Want("new", 1, 0, 2)}, {Have("old", 1, 7, 100, ProcessPhase::kStopping, 3)});
  EXPECT_EQ(a.start.size(), 1u);
}

TEST(Reconcile, NeverRestartsAnExitedRank) {
  ReconcileActions a = Reconcile({Want("j", 1, 0)}, {Have("j", 1, 0, 100, ProcessPhase::kExited)});
  EXPECT_TRUE(a.start.empty());
  EXPECT_TRUE(a.stop.empty());
  EXPECT_TRUE(a.deferred.empty());
}

TEST(Reconcile, FailedSpawnIsNotRetried) {
  // A spawn failure is recorded as an exited entry without a pid.
  ReconcileActions a = Reconcile({Want("j", 1, 0)}, {Have("j", 1, 0, 0, ProcessPhase::kExited)});
  EXPECT_TRUE(a.start.empty());
}

TEST(Reconcile, StoppingProcessIsNotStoppedAgainNorRestarted) {
  ReconcileActions a = Reconcile({}, {Have("j", 1, 0, 100, ProcessPhase::kStopping)});
  EXPECT_TRUE(a.stop.empty());
  // Desired again while stopping (the daemon changed its mind): let it end, do not start a twin.
  a = Reconcile({Want("j", 1, 0)}, {Have("j", 1, 0, 100, ProcessPhase::kStopping)});
  EXPECT_TRUE(a.start.empty());
  EXPECT_TRUE(a.stop.empty());
}

TEST(Reconcile, DuplicateDesiredEntriesStartOnce) {
  ReconcileActions a = Reconcile({Want("j", 1, 0), Want("j", 1, 0)}, {});
  EXPECT_EQ(a.start.size(), 1u);
}

TEST(Reconcile, IsIdempotentOnceApplied) {
  std::vector<RankAssignment> desired = {Want("j", 1, 0, 0), Want("j", 1, 1, 1)};
  std::vector<ActualProcess> actual = {Have("x", 1, 0, 50, ProcessPhase::kRunning, 5)};
  ReconcileActions a = Reconcile(desired, actual);
  ASSERT_EQ(a.start.size(), 2u);
  ASSERT_EQ(a.stop.size(), 1u);
  actual = {Have("x", 1, 0, 50, ProcessPhase::kStopping, 5), Have("j", 1, 0, 60, ProcessPhase::kRunning, 0),
            Have("j", 1, 1, 61, ProcessPhase::kRunning, 1)};
  a = Reconcile(desired, actual);
  EXPECT_TRUE(a.start.empty());
  EXPECT_TRUE(a.stop.empty());
  EXPECT_TRUE(a.deferred.empty());
}

TEST(Reconcile, KeyToString) {
  EXPECT_EQ(ToString(RankKey{"job-000001", 2, 5}), "job-000001/a2/r5");
}

}  // namespace
}  // namespace shepherd::agent

namespace shepherd::agent {
namespace {

TEST(Reconcile, KeptProcessesAreNotStoppedButStillHoldTheirGpu) {
  std::vector<RankKey> keep = {{"old", 1, 0}};
  ReconcileActions a =
      Reconcile({Want("j", 1, 0, /*gpu=*/0)},
                {Have("old", 1, 0, 100, ProcessPhase::kRunning, 0), Have("other", 1, 0, 200)}, keep);
  ASSERT_EQ(a.stop.size(), 1u);
  EXPECT_EQ(a.stop[0].pid, 200);  // not kept: stopped as before
  EXPECT_TRUE(a.start.empty());
  EXPECT_EQ(a.deferred, (std::vector<RankKey>{{"j", 1, 0}}));  // GPU 0 is the kept process's
  // Dropped from keep (an operator decided, or the timeout passed): stopped.
  a = Reconcile({}, {Have("old", 1, 0, 100)}, {});
  ASSERT_EQ(a.stop.size(), 1u);
  EXPECT_EQ(a.stop[0].pid, 100);
}

}  // namespace
}  // namespace shepherd::agent
