// SDC vote over param hashes: DP=2 (replay), DP=4 (minority), late and missing hashes, ZeRO-3.
#include <gtest/gtest.h>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

TEST(SdcTest, TwoReplicasDisagreeingAreBothSuspectedAndNeedAReplay) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now(), 1));
  m->Ingest(Hash(0, clock.Now(), 100, "aa"), clock.Now());
  m->Ingest(Hash(1, clock.Now(), 100, "aa"), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  m->Ingest(Hash(0, clock.Now(), 200, "bb"), clock.Now());
  m->Ingest(Hash(1, clock.Now(), 200, "cc"), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kSdcSuspected);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({0, 1}));
  EXPECT_EQ(fs[0].nodes, std::vector<std::string>({"n0", "n1"}));
  EXPECT_EQ(fs[0].step, 200);
  EXPECT_EQ(fs[0].onset_step, 101);  // after the last agreeing check
  EXPECT_NE(fs[0].detail.find("needs_replay=true"), std::string::npos) << fs[0].detail;
  Json h = m->HealthJson(clock.Now());
  EXPECT_EQ(h["status"], "sdc_suspected");
  EXPECT_EQ(h["checks"]["sdc"]["needs_replay"], true);
  EXPECT_EQ(h["checks"]["sdc"]["last_agreed_step"], 100);

  std::vector<HealthEvidence> ev;
  for (auto& e : m->TakeEvidence())
    if (e.kind != HealthEvidence::Kind::kHealthyThrough) ev.push_back(e);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, HealthEvidence::Kind::kHashAgreed);
  EXPECT_EQ(ev[0].step, 100);
  EXPECT_EQ(ev[1].kind, HealthEvidence::Kind::kHashMismatch);
  EXPECT_EQ(ev[1].step, 200);
}

// One rank reporting param_hash for ever-new steps opened a check per step, each kept until its deadline.
// A rank holds two hash slots; a check no rank holds a hash for is dropped, so at most two stay open per
// rank, and the other ranks' checks still resolve and agree.
TEST(SdcTest, OneRanksEverNewHashStepsKeepAtMostTwoChecksOpen) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now(), 1));
  for (int64_t step = 1000; step < 6000; ++step) m->Ingest(Hash(1, clock.Now(), step, "ff"), clock.Now());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["sdc"]["open_checks"], 2);
  m->Ingest(Hash(0, clock.Now(), 5999, "ff"), clock.Now());
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  Json sdc = m->HealthJson(clock.Now())["checks"]["sdc"];
  EXPECT_EQ(sdc["last_agreed_step"], 5999) << sdc.dump();
  EXPECT_EQ(sdc["open_checks"], 1) << sdc.dump();
}

// A TP job whose data-parallel all-reduce is hand-written: the client hashes nothing, and health said
// "ok" through a run in which a bit flip went unseen. Two checks' worth of steps without a hash: unverified.
TEST(SdcTest, NoHashByTwoCheckIntervalsIsUnverifiedNotOk) {
  FakeClock clock;
  MonitorContext c = MakeContext(1, 1, 2, clock.Now(), 1);
  c.policy.sdc_check_every_steps = 10;
  auto m = MakeMonitor(c);
  auto steps_to = [&](int64_t last) {
    for (int r : {0, 1}) m->Ingest(Step(r, clock.Now(), last, 1.0), clock.Now());
  };
  steps_to(19);
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["sdc"]["status"], "ok");  // the first check may be late
  steps_to(20);
  Json sdc = m->HealthJson(clock.Now())["checks"]["sdc"];
  EXPECT_EQ(sdc["status"], "unverified") << sdc.dump();
  EXPECT_NE(sdc["reason"].get<std::string>().find("no rank has reported a parameter hash by step 20"),
            std::string::npos)
      << sdc.dump();
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());  // recorded in health only: nothing to act on
  // With hashes, the same steps are "ok".
  FakeClock clock2;
  auto hashed = MakeMonitor(c);
  for (int r : {0, 1}) {
    hashed->Ingest(Hash(r, clock2.Now(), 10, "aa"), clock2.Now());
    hashed->Ingest(Step(r, clock2.Now(), 20, 1.0), clock2.Now());
  }
  EXPECT_EQ(hashed->HealthJson(clock2.Now())["checks"]["sdc"]["status"], "ok");
  // An attempt resumed at step 40 counts its two intervals from there (it said "unverified" at step 50).
  c.resume_step = 40;
  auto resumed = MakeMonitor(c);
  for (int r : {0, 1}) resumed->Ingest(Step(r, clock.Now(), 50, 1.0), clock.Now());
  EXPECT_EQ(resumed->HealthJson(clock.Now())["checks"]["sdc"]["status"], "ok");
  for (int r : {0, 1}) resumed->Ingest(Step(r, clock.Now(), 60, 1.0), clock.Now());
  EXPECT_EQ(resumed->HealthJson(clock.Now())["checks"]["sdc"]["status"], "unverified");
}

TEST(SdcTest, ReplicasThatNeverAgreedWithoutAMajorityAreUnverifiedNotSuspected) {
  // A sharded optimizer hashed as if replicated: the two replicas differ at every check. Recovery records
  // it only; health said "sdc_suspected" naming both ranks through a healthy run.
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 2, clock.Now(), 1));
  m->Ingest(Hash(0, clock.Now(), 100, "aa"), clock.Now());
  m->Ingest(Hash(1, clock.Now(), 100, "bb"), clock.Now());
  ASSERT_EQ(m->Evaluate(clock.Now()).size(), 1u);  // the finding is still recorded
  Json h = m->HealthJson(clock.Now());
  EXPECT_NE(h["status"], "sdc_suspected") << h.dump();
  EXPECT_EQ(h["checks"]["sdc"]["status"], "unverified");
  EXPECT_EQ(h["suspects"]["ranks"], Json::array()) << h.dump();
  // Once a check of this job agreed (in an earlier attempt too), a disagreement is suspected again.
  FakeClock clock2;
  MonitorContext c = MakeContext(1, 1, 2, clock2.Now(), 1);
  c.hashes_agreed = true;
  auto later = MakeMonitor(c);
  later->Ingest(Hash(0, clock2.Now(), 100, "aa"), clock2.Now());
  later->Ingest(Hash(1, clock2.Now(), 100, "bb"), clock2.Now());
  later->Evaluate(clock2.Now());
  EXPECT_EQ(later->HealthJson(clock2.Now())["status"], "sdc_suspected");
  EXPECT_EQ(later->HealthJson(clock2.Now())["checks"]["sdc"]["status"], "suspected");
}

TEST(SdcTest, FourReplicasNameTheMinorityOnceUntilItClears) {
  FakeClock clock;
  // TP=2, DP=4: replica sets {0,2,4,6} (tp 0) and {1,3,5,7} (tp 1).
  auto m = MakeMonitor(MakeContext(2, 1, 4, clock.Now(), 2));
  auto check = [&](int64_t step, int odd_rank) {
    for (int r = 0; r < 8; ++r)
      m->Ingest(Hash(r, clock.Now(), step, r == odd_rank ? "0bad" : (r % 2 ? "11" : "22")), clock.Now());
    return m->Evaluate(clock.Now());
  };
  auto fs = check(100, 5);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({5}));
  EXPECT_EQ(fs[0].nodes, std::vector<std::string>({"n2"}));
  EXPECT_EQ(fs[0].detail.find("needs_replay"), std::string::npos) << fs[0].detail;
  EXPECT_NE(fs[0].detail.find("majority hash held by ranks 1,3,7"), std::string::npos) << fs[0].detail;
  EXPECT_FALSE(fs[0].onset_step);       // no earlier agreeing check
  EXPECT_TRUE(check(200, 5).empty());   // same incident
  EXPECT_TRUE(check(300, -1).empty());  // agrees again: cleared
  EXPECT_EQ(check(400, 5).size(), 1u);  // reopened
}

// Two ranks of one node that corrupt alike (a bad driver or firmware on n0) must not outvote the healthy
// node: DP 3 with two GPUs per node puts ranks 0 and 1 on n0 and rank 2 on n1. By ranks "bad" holds a
// majority; by nodes it holds one of two, so no verdict names a node: all suspected, a replay decides
// (which sets nodes aside until the mismatch stops, job_health.h). With DP 4 (n0: 0, 1; n1: 2, 3) a
// corrupt rank 3 is still named: the other hash holds both nodes.
TEST(SdcTest, RanksOfOneNodeDoNotOutvoteAnotherNode) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 3, clock.Now(), 2));
  for (int r = 0; r < 3; ++r) m->Ingest(Hash(r, clock.Now(), 100, r < 2 ? "0bad" : "600d"), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({0, 1, 2}));
  EXPECT_EQ(fs[0].nodes, std::vector<std::string>({"n0", "n1"}));
  EXPECT_NE(fs[0].detail.find("needs_replay=true"), std::string::npos) << fs[0].detail;

  auto four = MakeMonitor(MakeContext(1, 1, 4, clock.Now(), 2));
  for (int r = 0; r < 4; ++r) four->Ingest(Hash(r, clock.Now(), 100, r == 3 ? "0bad" : "600d"), clock.Now());
  fs = four->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({3}));
  EXPECT_EQ(fs[0].nodes, std::vector<std::string>({"n1"}));
  EXPECT_EQ(fs[0].detail.find("needs_replay"), std::string::npos) << fs[0].detail;
}

// Three replicas, no two hashes equal, after checks that agreed (ZeroRedundancyOptimizer hashed before its
// parameter sync, post-local SGD between averages): one corrupt node would leave two agreeing. Verdict
// no_agreement, nobody suspected, the check unverified; recovery records it (recovery_test.cpp).
TEST(SdcTest, ThreeReplicasOfWhichNoTwoAgreeAreNotReplicatedState) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 3, clock.Now(), 1));
  for (int r = 0; r < 3; ++r) m->Ingest(Hash(r, clock.Now(), 100, "aa"), clock.Now());
  ASSERT_TRUE(m->Evaluate(clock.Now()).empty());  // agreed
  for (int r = 0; r < 3; ++r)
    m->Ingest(Hash(r, clock.Now(), 200, r == 0 ? "aa" : r == 1 ? "bb" : "cc"), clock.Now());
  auto fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].sdc_verdict, SdcVerdict::kNoAgreement);
  EXPECT_NE(fs[0].detail.find("no two replicas agree"), std::string::npos) << fs[0].detail;
  Json h = m->HealthJson(clock.Now());
  EXPECT_NE(h["status"], "sdc_suspected") << h.dump();
  EXPECT_EQ(h["checks"]["sdc"]["status"], "unverified");
  EXPECT_EQ(h["suspects"]["ranks"], Json::array()) << h.dump();
  // Two of three agreeing is still a majority naming the odd one out.
  for (int r = 0; r < 3; ++r) m->Ingest(Hash(r, clock.Now(), 300, "aa"), clock.Now());
  ASSERT_TRUE(m->Evaluate(clock.Now()).empty());
  for (int r = 0; r < 3; ++r) m->Ingest(Hash(r, clock.Now(), 400, r == 2 ? "cc" : "aa"), clock.Now());
  fs = m->Evaluate(clock.Now());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].sdc_verdict, SdcVerdict::kMajority);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({2}));
}

bool NoSdc(const std::vector<Finding>& fs) {
  for (const auto& f : fs)
    if (f.kind == FindingKind::kSdcSuspected) return false;
  return true;
}

// Three replicas, one hash missing at the deadline, the two present disagreeing: the missing one would
// decide, so no verdict (no replay, no cordon). Of four replicas, two agreeing against a third is no
// majority of the set either: the fourth could make it a 2-2 split.
TEST(SdcTest, AnIncompleteCheckWithoutAMajorityOfTheSetGivesNoVerdict) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 3, clock.Now(), 1));
  m->Ingest(Hash(0, clock.Now(), 100, "aa"), clock.Now());
  m->Ingest(Hash(1, clock.Now(), 100, "bb"), clock.Now());
  clock.AdvanceSeconds(61);  // past the deadline: rank 2's hash never came
  EXPECT_TRUE(NoSdc(m->Evaluate(clock.Now())));
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["sdc"]["suspected_ranks"], Json::array());

  FakeClock clock4;
  auto four = MakeMonitor(MakeContext(1, 1, 4, clock4.Now(), 1));
  four->Ingest(Hash(0, clock4.Now(), 100, "aa"), clock4.Now());
  four->Ingest(Hash(1, clock4.Now(), 100, "aa"), clock4.Now());
  four->Ingest(Hash(2, clock4.Now(), 100, "cc"), clock4.Now());
  clock4.AdvanceSeconds(61);
  EXPECT_TRUE(NoSdc(four->Evaluate(clock4.Now())));  // 2 of 4 is no majority: rank 3 could hold "cc"
  four->Ingest(Hash(0, clock4.Now(), 200, "aa"), clock4.Now());
  four->Ingest(Hash(1, clock4.Now(), 200, "aa"), clock4.Now());
  four->Ingest(Hash(3, clock4.Now(), 200, "aa"), clock4.Now());
  four->Ingest(Hash(2, clock4.Now(), 200, "cc"), clock4.Now());
  std::vector<Finding> fs;
  for (Finding& f : four->Evaluate(clock4.Now()))
    if (f.kind == FindingKind::kSdcSuspected) fs.push_back(f);
  ASSERT_EQ(fs.size(), 1u);  // complete, 3 of 4 agree: the odd one is named
  EXPECT_EQ(fs[0].ranks, std::vector<int>({2}));
  EXPECT_EQ(fs[0].sdc_verdict, SdcVerdict::kMajority);
}

TEST(SdcTest, LateHashIsMissingEvidenceNotAnSdc) {
  FakeClock clock;
  auto m = MakeMonitor(MakeContext(1, 1, 4, clock.Now(), 1));
  for (int r = 0; r < 3; ++r) m->Ingest(Hash(r, clock.Now(), 100, "ab"), clock.Now());
  clock.AdvanceSeconds(59);
  EXPECT_TRUE(NoSdc(m->Evaluate(clock.Now())));
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["sdc"]["open_checks"], 1);
  clock.AdvanceSeconds(2);  // past the 60 s deadline
  EXPECT_TRUE(NoSdc(m->Evaluate(clock.Now())));
  Json sdc = m->HealthJson(clock.Now())["checks"]["sdc"];
  EXPECT_EQ(sdc["status"], "ok");
  EXPECT_EQ(sdc["last_check"]["complete"], false);
  EXPECT_EQ(sdc["last_check"]["missing_ranks"], Json::array({3}));
  EXPECT_TRUE(sdc["last_agreed_step"].is_null());             // an incomplete check is not an agreement
  m->Ingest(Hash(3, clock.Now(), 100, "ffff"), clock.Now());  // arrives late, differs: ignored
  EXPECT_TRUE(NoSdc(m->Evaluate(clock.Now())));
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["sdc"]["late_hashes"], 1);
  for (const auto& e : m->TakeEvidence()) {
    EXPECT_NE(e.kind, HealthEvidence::Kind::kHashAgreed);
    EXPECT_NE(e.kind, HealthEvidence::Kind::kHashMismatch);
  }
}

TEST(SdcTest, PlainZero3SkipsAndSaysWhyHybridShardingComparesAcrossReplicaGroups) {
  FakeClock clock;
  auto plain = MakeMonitor(MakeContext(1, 1, 4, clock.Now(), 1, /*zero_stage=*/3));
  for (int r = 0; r < 4; ++r) plain->Ingest(Hash(r, clock.Now(), 100, r ? "aa" : "bb"), clock.Now());
  EXPECT_TRUE(plain->Evaluate(clock.Now()).empty());
  Json sdc = plain->HealthJson(clock.Now())["checks"]["sdc"];
  EXPECT_EQ(sdc["status"], "skipped");
  EXPECT_NE(sdc["reason"].get<std::string>().find("ZeRO-3"), std::string::npos);

  // HSDP (RankLayout only: no job spec asks for it yet), shard groups of 2 along dp=4:
  // shard 0 = dp {0,2}, shard 1 = dp {1,3}.
  MonitorContext c = MakeContext(1, 1, 4, clock.Now(), 1, 3);
  auto hsdp = RankLayout::Build(c.plan, c.placement, /*hybrid_shard_size=*/2);
  ASSERT_TRUE(hsdp.ok()) << hsdp.status().message();
  EXPECT_EQ(hsdp->replica_set_count(), 2);
  EXPECT_EQ(hsdp->ReplicaSet(0), std::vector<int>({0, 2}));
  EXPECT_EQ(hsdp->ReplicaSet(1), std::vector<int>({1, 3}));
}

// Expert parallelism: data-parallel rank d holds the routed experts of expert-parallel rank d % ep, so a
// replica set is the ranks with equal d % ep. Comparing across all of dp would flag healthy ranks (their
// experts differ) as corrupted.
TEST(SdcTest, ExpertParallelReplicaSetsHoldTheSameExperts) {
  FakeClock clock;
  MonitorContext c = MakeContext(/*tp=*/2, /*pp=*/1, /*dp=*/4, clock.Now());
  c.plan.ep = 2;  // ranks: tp fastest, rank = t + 2·d
  auto l = RankLayout::Build(c.plan, c.placement, /*hybrid_shard_size=*/0);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->replica_set_count(), 4);                   // (tp 0, 1) × (d % 2 = 0, 1)
  EXPECT_EQ(l->ReplicaSet(0), std::vector<int>({0, 4}));  // tp 0, d 0 and 2
  EXPECT_EQ(l->ReplicaSet(1), std::vector<int>({2, 6}));  // tp 0, d 1 and 3
  EXPECT_EQ(l->ReplicaSet(2), std::vector<int>({1, 5}));
  EXPECT_EQ(l->ReplicaSet(3), std::vector<int>({3, 7}));

  c.plan.ep = 4;  // every data-parallel rank holds different experts: nothing to compare
  auto none = RankLayout::Build(c.plan, c.placement, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->replica_set_count(), 0);
  EXPECT_NE(none->replica_sets_reason().find("holds different routed experts"), std::string::npos);
}

// Expert tensor parallel 1 under tp 2 (Megatron-Core's expert grid: etp fastest, then ep, over the ranks of
// a stage): rank r = t + 2·d holds expert shard r % ep. With ep 2 that is t, the TP index: the two TP ranks
// split the experts, and every data-parallel rank of one TP index holds the same ones. With ep 4 it is
// t + 2·(d % 2): replicas are d and d + 2.
TEST(SdcTest, ExpertTensorParallelOneFoldsTheExpertsOverTheTpRanks) {
  FakeClock clock;
  MonitorContext c = MakeContext(/*tp=*/2, /*pp=*/1, /*dp=*/4, clock.Now());
  c.plan.etp = 1;
  c.plan.ep = 2;
  auto whole = RankLayout::Build(c.plan, c.placement, 0);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_EQ(whole->replica_set_count(), 2);
  EXPECT_EQ(whole->ReplicaSet(0), std::vector<int>({0, 2, 4, 6}));
  EXPECT_EQ(whole->ReplicaSet(1), std::vector<int>({1, 3, 5, 7}));

  c.plan.ep = 4;
  auto halves = RankLayout::Build(c.plan, c.placement, 0);
  ASSERT_TRUE(halves.ok()) << halves.status().message();
  ASSERT_EQ(halves->replica_set_count(), 4);
  EXPECT_EQ(halves->ReplicaSet(0), std::vector<int>({0, 4}));
  EXPECT_EQ(halves->ReplicaSet(1), std::vector<int>({2, 6}));
  EXPECT_EQ(halves->ReplicaSet(2), std::vector<int>({1, 5}));
  EXPECT_EQ(halves->ReplicaSet(3), std::vector<int>({3, 7}));

  c.plan.ep = 8;  // all eight ranks hold different experts
  auto none = RankLayout::Build(c.plan, c.placement, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->replica_set_count(), 0);
}

// The vote itself at tp 2, etp 1, ep 4: every rank's hash is that of its expert shard r % 4, so ranks 0 and
// 2 (different experts) disagree while healthy. The monitor stays quiet; when rank 6 then departs from its
// shard-mate 2 the finding names it (and its peer: two replicas cannot tell which is wrong).
TEST(SdcTest, ExpertTensorParallelOneHealthyShardsStayQuietAndACorruptRankIsNamed) {
  FakeClock clock;
  MonitorContext c = MakeContext(/*tp=*/2, /*pp=*/1, /*dp=*/4, clock.Now());
  c.plan.etp = 1;
  c.plan.ep = 4;
  auto m = MakeMonitor(c);
  auto check = [&](int64_t step, int bad_rank) {
    for (int r = 0; r < 8; ++r)
      m->Ingest(Hash(r, clock.Now(), step, r == bad_rank ? "bad" : "shard" + std::to_string(r % 4)),
                clock.Now());
    return m->Evaluate(clock.Now());
  };
  EXPECT_TRUE(check(100, -1).empty());
  EXPECT_TRUE(check(200, -1).empty());
  auto fs = check(300, 6);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].kind, FindingKind::kSdcSuspected);
  EXPECT_EQ(fs[0].ranks, std::vector<int>({2, 6}));
}

// Context parallelism: rank = tp + TP·(cp + CP·dp). TP 2, CP 2, DP 2 → 8 ranks. CP peers hold the same
// parameters (gradients are reduced over dp·cp), so a replica set spans the dp·cp ranks of one tp: tp 0 →
// ranks 0 (cp 0, dp 0), 2 (cp 1, dp 0), 4 (cp 0, dp 1), 6 (cp 1, dp 1).
TEST(SdcTest, ContextParallelPeersAreReplicasAndFormTheirOwnGroup) {
  Plan plan{.tp = 2, .pp = 1, .dp = 2, .zero_stage = 1, .cp = 2};
  Placement placement;
  for (int r = 0; r < 8; ++r) {
    RankSlot s{.rank = r, .node = "n" + std::to_string(r / 4), .gpu = r % 4};
    SetRankCoords(plan, &s);
    placement.ranks.push_back(s);
  }
  auto l = RankLayout::Build(plan, placement, 0);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->cp(6), 1);
  EXPECT_EQ(l->dp(6), 1);
  EXPECT_EQ(l->GroupMembers(5, GroupKind::kCp), std::vector<int>({5, 7}));  // tp 1, dp 1
  EXPECT_EQ(l->GroupMembers(5, GroupKind::kDp), std::vector<int>({1, 5}));  // tp 1, cp 0
  EXPECT_EQ(l->GroupMembers(5, GroupKind::kTp), std::vector<int>({4, 5}));
  EXPECT_EQ(GroupKindFromName("cp"), GroupKind::kCp);
  ASSERT_EQ(l->replica_set_count(), 2);
  EXPECT_EQ(l->ReplicaSet(0), std::vector<int>({0, 2, 4, 6}));
  EXPECT_EQ(l->ReplicaSet(1), std::vector<int>({1, 3, 5, 7}));

  plan.ep = 2;  // experts split over j = cp + CP·dp by j % 2: the cp peers hold different experts
  auto ep = RankLayout::Build(plan, placement, 0);
  ASSERT_TRUE(ep.ok());
  ASSERT_EQ(ep->replica_set_count(), 4);
  EXPECT_EQ(ep->ReplicaSet(0), std::vector<int>({0, 4}));  // tp 0, j 0 and 2 (cp 0)
  EXPECT_EQ(ep->ReplicaSet(1), std::vector<int>({2, 6}));  // tp 0, j 1 and 3 (cp 1)
}

}  // namespace
}  // namespace shepherd
