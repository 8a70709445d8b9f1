// Hang watchdog through JobMonitor: root culprits, communication faults, no-progress hangs, and the
// false positives a watchdog must not raise.
#include <gtest/gtest.h>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

TEST(HangTest, RootCulpritIsTheRankStuckOutsideCollectivesNotTheWaiters) {
  // TP=2, DP=4, PP=1 (rank = tp + 2·dp), two GPUs per node: rank 6 lives on n3.
  FakeClock clock;
  auto m = Training(MakeContext(/*tp=*/2, /*pp=*/1, /*dp=*/4, clock.Now(), /*gpus_per_node=*/2));
  for (int r = 0; r < 8; ++r) {  // everyone passes tp#1 and dp#1
    m->Ingest(InCollective(r, clock.Now(), "tp", 1, 5), clock.Now());
    m->Ingest(InCollective(r, clock.Now(), "dp", 1, 5), clock.Now());
  }
  auto state = [&](Time now) {
    for (int r : {0, 2, 4}) m->Ingest(InCollective(r, now, "dp", 2, 5), now);  // wait for 6
    for (int r : {1, 3, 5}) m->Ingest(InCollective(r, now, "dp", 2, 5), now);  // wait for 7
    m->Ingest(InCollective(7, now, "tp", 2, 5), now);                          // waits for 6
    m->Ingest(Heartbeat(6, now, 5), now);  // alive, in CPU code, in no collective
  };
  state(clock.Now());  // since = now for every collective; later heartbeats keep it
  auto early = RunTicks(*m, clock, 55, state);
  EXPECT_TRUE(early.empty());

  auto findings = RunTicks(*m, clock, 10, state);  // 65 s open > 60 s timeout
  auto hangs = OfKind(findings, FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({6}));
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n3"}));
  EXPECT_NE(hangs[0].detail.find("rank 6 (heartbeating but inside no collective"), std::string::npos)
      << hangs[0].detail;
  EXPECT_TRUE(hangs[0].silent_ranks.empty());  // busy in its own code, not stopped
  EXPECT_EQ(hangs[0].attempt, 1);
  EXPECT_EQ(hangs[0].job, "job-1");

  Json h = m->HealthJson(clock.Now());
  EXPECT_EQ(h["status"], "hung");
  EXPECT_EQ(h["checks"]["hang"]["culprits"].size(), 1u);
  EXPECT_EQ(h["checks"]["hang"]["culprits"][0]["rank"], 6);
  EXPECT_EQ(h["checks"]["hang"]["waiting_ranks"], 7);
  EXPECT_EQ(h["suspects"]["ranks"], Json::array({6}));
  EXPECT_EQ(h["suspects"]["nodes"], Json::array({"n3"}));

  // Once per incident: the hang persists, no new finding.
  EXPECT_TRUE(OfKind(RunTicks(*m, clock, 30, state), FindingKind::kHang).empty());
}

TEST(HangTest, ASilentMemberInsideTheStuckCollectiveIsTheCulpritNotTheNetwork) {
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 1, clock.Now(), /*gpus_per_node=*/1));  // ranks 0,1 on n0,n1
  // Both ranks enter tp#3; rank 1 said it was saving a checkpoint (so its heartbeat allowance is 10x) and
  // then went silent: SIGSTOPped. Rank 0 keeps heartbeating from inside the collective.
  Report last = InCollective(1, clock.Now(), "tp", 3, 7);
  last.phase = Phase::kCheckpointSave;
  m->Ingest(last, clock.Now());
  m->Ingest(InCollective(0, clock.Now(), "tp", 3, 7), clock.Now());
  auto hangs =
      OfKind(RunTicks(*m, clock, 65, [&](Time now) { m->Ingest(InCollective(0, now, "tp", 3, 7), now); }),
             FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({1}));
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n1"}));
  EXPECT_NE(hangs[0].detail.find("silent"), std::string::npos) << hangs[0].detail;
  EXPECT_EQ(hangs[0].silent_ranks, std::vector<int>({1}));
  EXPECT_TRUE(
      OfKind(m->Evaluate(clock.Now()), FindingKind::kHeartbeatLost).empty());  // still inside its allowance
}

TEST(HangTest, EveryMemberInsideTheStuckCollectiveIsACommunicationFault) {
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 1, clock.Now(), /*gpus_per_node=*/1));  // ranks 0,1 on n0,n1
  auto stuck = [&](Time now) {
    for (int r : {0, 1}) m->Ingest(InCollective(r, now, "tp", 3, 7), now);
  };
  stuck(clock.Now());
  auto hangs = OfKind(RunTicks(*m, clock, 65, stuck), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_TRUE(hangs[0].ranks.empty());  // no rank is at fault: the nodes are suspected
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n0", "n1"}));
  EXPECT_NE(hangs[0].detail.find("communication fault"), std::string::npos) << hangs[0].detail;
  Json h = m->HealthJson(clock.Now());
  EXPECT_EQ(h["checks"]["hang"]["communication_faults"][0]["ranks"], Json::array({0, 1}));

  // The collective completes: incident cleared. It reopens with a new finding only after that.
  auto done = [&](Time now) {
    for (int r : {0, 1}) m->Ingest(Heartbeat(r, now, 8), now);
  };
  EXPECT_TRUE(RunTicks(*m, clock, 10, done).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["hang"]["status"], "ok");
  auto stuck_again = [&](Time now) {
    for (int r : {0, 1}) m->Ingest(InCollective(r, now, "tp", 4, 8), now);
  };
  stuck_again(clock.Now());
  EXPECT_EQ(OfKind(RunTicks(*m, clock, 65, stuck_again), FindingKind::kHang).size(), 1u);
}

// A pipeline deadlock in the code: stage 0 skipped its send and waits in recv for the gradient, stage 1
// waits in recv for the activation. Both are "inside pp#665", but nothing is in flight between two
// receivers: it was a communication fault, and each attempt cordoned one more healthy node. Now both are
// named as heartbeating culprits (restarted without blame; the reproducible rule ends a repeat).
// A send facing its recv that never completes is still a communication fault.
TEST(HangTest, PointToPointOpsFacingOneWayAreACodeDeadlockNotACommunicationFault) {
  auto p2p = [](int rank, Time now, const char* op) {
    Report r = InCollective(rank, now, "pp", 665, 128);
    r.collective->op = op;
    return r;
  };
  for (const char* op : {"recv", "send", "irecv"}) {
    FakeClock clock;
    auto m = Training(MakeContext(1, 2, 1, clock.Now(), /*gpus_per_node=*/1));  // stages 0,1 on n0,n1
    auto stuck = [&](Time now) {
      for (int r : {0, 1}) m->Ingest(p2p(r, now, op), now);
    };
    stuck(clock.Now());
    auto hangs = OfKind(RunTicks(*m, clock, 65, stuck), FindingKind::kHang);
    ASSERT_EQ(hangs.size(), 1u) << op;
    EXPECT_EQ(hangs[0].ranks, std::vector<int>({0, 1})) << op;
    EXPECT_EQ(hangs[0].detail.find("communication fault"), std::string::npos) << hangs[0].detail;
    EXPECT_NE(hangs[0].detail.find("point-to-point deadlock in the job's code"), std::string::npos)
        << hangs[0].detail;
  }
  FakeClock clock;
  auto m = Training(MakeContext(1, 2, 1, clock.Now(), /*gpus_per_node=*/1));
  auto transfer = [&](Time now) {
    m->Ingest(p2p(0, now, "isend"), now);
    m->Ingest(p2p(1, now, "recv"), now);
  };
  transfer(clock.Now());
  auto hangs = OfKind(RunTicks(*m, clock, 65, transfer), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_TRUE(hangs[0].ranks.empty());
  EXPECT_NE(hangs[0].detail.find("communication fault"), std::string::npos) << hangs[0].detail;
}

// Rank 0's last report still shows tp#3, which rank 1 has completed and left (a report that predates rank
// 0's own completion, as when a long barrier ends between two heartbeats): no communication fault. If rank
// 1 then waits for rank 0 in tp#4 past the timeout, rank 0 is the culprit.
TEST(HangTest, AMemberStillInsideACollectiveItsPeersCompletedIsNoCommunicationFault) {
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 1, clock.Now(), /*gpus_per_node=*/1));
  const Time since = clock.Now();
  for (int r : {0, 1}) m->Ingest(InCollective(r, since, "tp", 3, 7), since);
  int64_t step1 = 8;  // rank 1 trains on (job-level progress)
  auto completed_by_1 = [&](Time now) {
    Report r0 = InCollective(0, now, "tp", 3, 7);
    r0.collective->since = since;
    m->Ingest(r0, now);
    m->Ingest(Heartbeat(1, now, step1++), now);
  };
  auto all = RunTicks(*m, clock, 65, completed_by_1);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["hang"]["status"], "ok");

  const Time since4 = clock.Now();
  auto one_waits = [&](Time now) {
    Report r0 = InCollective(0, now, "tp", 3, 7);
    r0.collective->since = since;
    m->Ingest(r0, now);
    Report r1 = InCollective(1, now, "tp", 4, step1);
    r1.collective->since = since4;
    m->Ingest(r1, now);
  };
  auto hangs = OfKind(RunTicks(*m, clock, 65, one_waits), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({0}));
  EXPECT_NE(hangs[0].detail.find("which its peers completed"), std::string::npos) << hangs[0].detail;
}

// Rank 1 has waited in tp#3 since t0; rank 0 (done saving) enters it at t0 + 58 s. At t0 + 65 s rank 1's
// wait is past the 60 s timeout but the collective only now has every member: completing, not stuck. If it
// then stays stuck past the timeout for rank 0 too, it is a communication fault.
TEST(HangTest, ALongOpenCollectiveWhoseLastMemberJustArrivedIsNotACommunicationFault) {
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 1, clock.Now(), /*gpus_per_node=*/1));
  const Time t0 = clock.Now();
  const Time late = t0 + Seconds(58);
  auto beat = [&](Time now) {
    Report r1 = InCollective(1, now, "tp", 3, 7);
    r1.collective->since = t0;
    m->Ingest(r1, now);
    Report r0 = now >= late ? InCollective(0, now, "tp", 3, 7) : Heartbeat(0, now, 7);
    if (now >= late) r0.collective->since = late;
    m->Ingest(r0, now);
  };
  beat(t0);
  auto all = RunTicks(*m, clock, 65, beat);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  auto hangs = OfKind(RunTicks(*m, clock, 60, beat), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_TRUE(hangs[0].ranks.empty());
  EXPECT_NE(hangs[0].detail.find("communication fault"), std::string::npos) << hangs[0].detail;
}

TEST(HangTest, SlowButProgressingCollectivesAreNotAHang) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  int elapsed = 0;
  // Each dp collective takes 50 s (< 60 s timeout); seq advances, no step is ever reported.
  auto slow = [&](Time now) {
    elapsed += 5;
    for (int r : {0, 1}) m->Ingest(InCollective(r, now, "dp", elapsed / 50, -1), now);
  };
  auto findings = RunTicks(*m, clock, 400, slow);
  EXPECT_TRUE(findings.empty()) << ToString(findings[0].kind) << ": " << findings[0].detail;
}

TEST(HangTest, DeadRankAtTheEndOfTheChainIsTheCulprit) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now(), 1));  // rank 1 on n1
  m->Ingest(Heartbeat(1, clock.Now(), 3), clock.Now());
  auto waiting = [&](Time now) { m->Ingest(InCollective(0, now, "dp", 1, 3), now); };
  waiting(clock.Now());
  auto findings = RunTicks(*m, clock, 65, waiting);
  auto lost = OfKind(findings, FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({1}));
  auto hangs = OfKind(findings, FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({1}));
  EXPECT_NE(hangs[0].detail.find("no heartbeat"), std::string::npos) << hangs[0].detail;
  EXPECT_EQ(hangs[0].silent_ranks, std::vector<int>({1}));
}

TEST(HangTest, NoStepProgressOutsideCollectivesIsAHangNamingTheLaggingRanks) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 4, clock.Now(), 1));
  auto beat = [&](Time now) {
    for (int r = 0; r < 4; ++r) m->Ingest(Heartbeat(r, now, r == 3 ? 9 : 10), now);
  };
  beat(clock.Now());  // job step 10 reached now; nothing moves afterwards
  EXPECT_TRUE(RunTicks(*m, clock, 60, beat).empty());
  auto hangs = OfKind(RunTicks(*m, clock, 5, beat), FindingKind::kHang);  // 65 s idle
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({3}));
  EXPECT_NE(hangs[0].detail.find("no step progress"), std::string::npos);
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["hang"]["kind"], "no_progress");
}

TEST(HangTest, LongCheckpointSaveIsNeitherAHangNorAHeartbeatLoss) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  for (int r = 0; r < 2; ++r) {
    Report hb = Heartbeat(r, clock.Now(), 100);
    hb.phase = Phase::kCheckpointSave;
    m->Ingest(hb, clock.Now());
  }
  // The ranks heartbeat every 50 s (beyond the 10 s timeout, within the 10x = 100 s allowance) for
  // 500 s with no step (beyond the 60 s hang timeout, within the 600 s allowance).
  std::vector<Finding> all;
  for (int t = 0; t < 500; t += 50) {
    clock.AdvanceSeconds(50);
    for (int r = 0; r < 2; ++r) {
      Report hb = Heartbeat(r, clock.Now(), 100);
      hb.phase = Phase::kCheckpointSave;
      m->Ingest(hb, clock.Now());
    }
    for (auto& f : m->Evaluate(clock.Now())) all.push_back(f);
  }
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
}

// Rank 0 saves a checkpoint alone (heartbeats in `phase`, inside no collective) while rank 1 waits for it
// at a barrier: `save_s` long; then, for `walk_s`, rank 0 heartbeats in phase train, still inside no
// collective (renaming its file, on a loaded machine) before it would enter the barrier.
std::vector<Finding> SaveWhilePeerWaitsAtBarrier(int save_s, Phase phase, int walk_s = 0) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  const Time start = clock.Now();
  auto beat = [&](Phase p) {
    return [&, p](Time now) {
      Report saver = Heartbeat(0, now, 100);
      saver.phase = p;
      m->Ingest(saver, now);
      Report waiter = InCollective(1, now, "dp", 7, 100);
      waiter.collective->since = start;
      m->Ingest(waiter, now);
    };
  };
  beat(phase)(start);
  auto all = RunTicks(*m, clock, save_s, beat(phase));
  auto walk = RunTicks(*m, clock, walk_s, beat(Phase::kTrain));
  all.insert(all.end(), walk.begin(), walk.end());
  return all;
}

TEST(HangTest, PeerWaitingAtABarrierForALongCheckpointSaveIsNoHang) {
  // 300 s: past the 60 s hang timeout, within the 10 x 60 s phase allowance.
  auto all = SaveWhilePeerWaitsAtBarrier(300, Phase::kCheckpointSave);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  all = SaveWhilePeerWaitsAtBarrier(300, Phase::kEval);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
}

TEST(HangTest, TheSaverIsNotAHangWhileItWalksToTheBarrierAfterItsSave) {
  // A 90 s save (past the 60 s timeout) then 30 s to the barrier: the collective has been open 120 s, but
  // the saver was busy until a timeout ago.
  auto all = SaveWhilePeerWaitsAtBarrier(90, Phase::kCheckpointSave, 30);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  // Not entering the barrier for a hang timeout after the save: a hang naming the saver.
  auto hangs = OfKind(SaveWhilePeerWaitsAtBarrier(90, Phase::kCheckpointSave, 70), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({0}));
}

// TP 2 × DP 2: rank 3 saves alone while ranks 0-2 wait in a barrier of the group `group` (the Python
// client names a job-wide group "world" when the job has more than one axis; other names are unknown
// groups). Returns the findings of `seconds` of it.
std::vector<Finding> SaveWhilePeersWaitInGroup(const char* group, int seconds, Phase phase) {
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 2, clock.Now()));
  const Time start = clock.Now();
  auto beat = [&](Time now) {
    Report saver = Heartbeat(3, now, 100);
    saver.phase = phase;
    m->Ingest(saver, now);
    for (int r = 0; r < 3; ++r) {
      Report waiter = InCollective(r, now, group, 20, 100);
      waiter.collective->since = start;
      m->Ingest(waiter, now);
    }
  };
  beat(start);
  return RunTicks(*m, clock, seconds, beat);
}

TEST(HangTest, PeersWaitingInAWorldBarrierForASaverAreNoHangAndTheSaverIsTheCulprit) {
  // Within the save allowance: nothing (before, the waiters were named: the world group was unknown).
  auto all = SaveWhilePeersWaitInGroup("world", 300, Phase::kCheckpointSave);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  // The same wait for a rank that is not saving: a hang naming that rank, not the waiters.
  auto hangs = OfKind(SaveWhilePeersWaitInGroup("world", 70, Phase::kTrain), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({3}));
  EXPECT_NE(hangs[0].detail.find("world#20"), std::string::npos) << hangs[0].detail;
}

// 4,096 ranks wait in a world barrier for rank 17, which never arrives: the chain ends at rank 17 (each
// waiter's world edges are found from one sorted index, not from all 4,095 peers).
TEST(HangTest, AWorldBarrierOfManyRanksNamesTheOneThatNeverArrived) {
  FakeClock clock;
  auto m = Training(MakeContext(8, 1, 512, clock.Now()));
  const Time start = clock.Now();
  auto beat = [&](Time now) {
    for (int r = 0; r < 4096; ++r) {
      if (r == 17) {
        m->Ingest(Heartbeat(r, now, 100), now);
        continue;
      }
      Report waiter = InCollective(r, now, "world", 5, 100);
      waiter.collective->since = start;
      m->Ingest(waiter, now);
    }
  };
  beat(start);
  auto hangs = OfKind(RunTicks(*m, clock, 70, beat), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({17}));
}

TEST(HangTest, AWaitInAnUnknownGroupWhileSomeRankSavesIsNoHang) {
  auto all = SaveWhilePeersWaitInGroup("g-3f2a", 300, Phase::kCheckpointSave);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  // Nobody saving: the hang is found (its chain cannot be followed; the waiters are named, as before).
  EXPECT_EQ(OfKind(SaveWhilePeersWaitInGroup("g-3f2a", 70, Phase::kTrain), FindingKind::kHang).size(), 1u);
}

TEST(HangTest, ASaveThatNeverEndsStillNamesTheSaverOnceTheAllowanceIsSpent) {
  auto hangs = OfKind(SaveWhilePeerWaitsAtBarrier(700, Phase::kCheckpointSave), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({0}));
  // Without the phase the same wait is a hang at the timeout.
  hangs = OfKind(SaveWhilePeerWaitsAtBarrier(100, Phase::kTrain), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({0}));
}

// An evaluation pause: the ranks heartbeat every 5 s (within the 10 s timeout) with no step for 300 s,
// beyond the 60 s hang timeout and within the 10 x 60 = 600 s eval allowance.
std::vector<Finding> EvalPause(std::optional<Phase> phase, double progress_timeout_s = 1800) {
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 2, clock.Now());
  c.policy.progress_timeout_s = progress_timeout_s;
  auto m = Training(c);
  auto beat = [&](Time now) {
    for (int r = 0; r < 2; ++r) {
      Report hb = Heartbeat(r, now, 100);
      if (phase) hb.phase = *phase;
      m->Ingest(hb, now);
    }
  };
  beat(clock.Now());
  std::vector<Finding> all;
  for (int t = 0; t < 300; t += 5) {
    clock.AdvanceSeconds(5);
    beat(clock.Now());
    for (auto& f : m->Evaluate(clock.Now())) all.push_back(f);
  }
  return all;
}

TEST(HangTest, EvaluationPauseWithPhaseEvalIsNoHang) {
  auto all = EvalPause(Phase::kEval);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
}

TEST(HangTest, TheSamePauseWithoutThePhaseIsAHangOnlyAfterTheProgressTimeout) {
  // Every rank at one step, heartbeating, in no collective: an evaluation of a module the client does not
  // see (an EMA copy) or an export looks the same as a stall. Before, it was a hang after the 60 s hang
  // timeout and healthy jobs restarted at every such evaluation.
  for (std::optional<Phase> phase : {std::optional<Phase>{}, std::optional<Phase>{Phase::kTrain}}) {
    EXPECT_TRUE(OfKind(EvalPause(phase), FindingKind::kHang).empty());  // 300 s < the 1800 s default
    auto hangs = OfKind(EvalPause(phase, /*progress_timeout_s=*/200), FindingKind::kHang);
    ASSERT_EQ(hangs.size(), 1u);
    EXPECT_NE(hangs[0].detail.find("no step progress"), std::string::npos);
    EXPECT_NE(hangs[0].detail.find("every live rank is at the same step"), std::string::npos);
  }
}

TEST(HangTest, NoStepProgressAfterARankFinishedIsNoHang) {
  // Rank 1 finished its loop; rank 0 exports for far longer than any timeout. Before, a "job-wide hang"
  // restarted the finished job at every attempt.
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 2, clock.Now());
  c.policy.progress_timeout_s = 200;
  auto m = Training(c);
  m->Ingest(Finished(1, clock.Now(), 100), clock.Now());
  auto exporting = [&](Time now) { m->Ingest(Heartbeat(0, now, 100), now); };
  exporting(clock.Now());
  auto all = RunTicks(*m, clock, 600, exporting);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
}

TEST(HangTest, EvalPhaseDoesNotExcuseSilence) {
  // Phase eval, then silence: heartbeats are still required (timeout 10 s, not 10 x 10 s).
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  for (int r = 0; r < 2; ++r) {
    Report hb = Heartbeat(r, clock.Now(), 100);
    hb.phase = Phase::kEval;
    m->Ingest(hb, clock.Now());
  }
  clock.AdvanceSeconds(5);
  Report hb = Heartbeat(0, clock.Now(), 100);
  hb.phase = Phase::kEval;
  m->Ingest(hb, clock.Now());
  clock.AdvanceSeconds(6);  // rank 1 silent for 11 s > 10 s, while rank 0 goes on
  m->Ingest(hb, clock.Now());
  auto lost = OfKind(m->Evaluate(clock.Now()), FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({1}));
}

// Startup (job_monitor.h): grace 120 s, hang timeout 60 s. Ranks report the step they are on, so a rank
// that heartbeats "step 1" from its start has completed nothing: a first step that compiles, loads data or
// warms up is judged only once the grace and a timeout are spent (180 s), and a hang after a first completed
// step at the timeout alone.
TEST(StartupTest, ALongFirstStepIsNoHangUntilTheGraceAndATimeoutAreSpent) {
  // Every rank on step 1 is job-wide: judged at the progress timeout (here the hang timeout's 60 s, as a
  // site that wants it; the default 1800 s leaves a long first compile alone).
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 4, clock.Now());
  c.policy.progress_timeout_s = 60;
  auto m = MakeMonitor(c);
  auto on_step_1 = [&](Time now) {
    for (int r = 0; r < 4; ++r) m->Ingest(Heartbeat(r, now, 1), now);
  };
  on_step_1(clock.Now());
  auto all = RunTicks(*m, clock, 175, on_step_1);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  // The first step never ends: a hang once 180 s have passed.
  auto hangs = OfKind(RunTicks(*m, clock, 10, on_step_1), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_NE(hangs[0].detail.find("no step progress"), std::string::npos) << hangs[0].detail;
}

TEST(StartupTest, PeersWaitingInTheFirstCollectiveForASlowRankAreNoHangWithinTheGrace) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 4, clock.Now(), 1));  // rank 3 on n3
  const Time since = clock.Now();
  auto compiling = [&](Time now) {
    for (int r = 0; r < 3; ++r) {
      Report waiting = InCollective(r, now, "dp", 1, 1);
      waiting.collective->since = since;
      m->Ingest(waiting, now);
    }
    m->Ingest(Heartbeat(3, now, 1), now);  // alive, in no collective: still compiling its first step
  };
  compiling(since);
  auto all = RunTicks(*m, clock, 175, compiling);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
  auto hangs = OfKind(RunTicks(*m, clock, 10, compiling), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({3}));
}

TEST(StartupTest, AfterAFirstCompletedStepTheTimeoutAloneApplies) {
  // Job-wide stalls: a progress timeout of 60 s, as the hang timeout (the grace is what is tested here).
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 4, clock.Now());
  c.policy.progress_timeout_s = 60;
  auto m = MakeMonitor(c);
  clock.AdvanceSeconds(10);
  for (int r = 0; r < 4; ++r) m->Ingest(Step(r, clock.Now(), 1, 2.5), clock.Now());
  auto on_step_2 = [&](Time now) {
    for (int r = 0; r < 4; ++r) m->Ingest(Heartbeat(r, now, 2), now);
  };
  on_step_2(clock.Now());
  EXPECT_TRUE(RunTicks(*m, clock, 60, on_step_2).empty());
  auto hangs = OfKind(RunTicks(*m, clock, 5, on_step_2), FindingKind::kHang);  // 65 s without a step
  ASSERT_EQ(hangs.size(), 1u);
  // The same when the job step rises in heartbeats without step reports: step 2 is on once step 1 is done.
  FakeClock clock2;
  MonitorContext c2 = MakeContext(1, 1, 4, clock2.Now());
  c2.policy.progress_timeout_s = 60;
  auto m2 = MakeMonitor(c2);
  for (int r = 0; r < 4; ++r) m2->Ingest(Heartbeat(r, clock2.Now(), 1), clock2.Now());
  clock2.AdvanceSeconds(10);
  auto beat2 = [&](Time now) {
    for (int r = 0; r < 4; ++r) m2->Ingest(Heartbeat(r, now, 2), now);
  };
  beat2(clock2.Now());
  EXPECT_TRUE(RunTicks(*m2, clock2, 60, beat2).empty());
  EXPECT_EQ(OfKind(RunTicks(*m2, clock2, 5, beat2), FindingKind::kHang).size(), 1u);
}

}  // namespace
}  // namespace shepherd
