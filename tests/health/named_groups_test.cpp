// Waits in named groups (torch's new_group: HSDP's shard groups, Megatron's model-parallel group), whose
// members the ranks send with their collective reports: the hang watchdog follows them like an axis group.
#include <gtest/gtest.h>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// A `started` collective report of group `name` with its members, as the Python client sends it.
Report Started(int rank, Time t, const char* name, int64_t seq, std::vector<int> members) {
  Report r = InCollective(rank, t, name, seq, 5);
  r.kind = ReportKind::kCollective;
  r.collective->since.reset();
  r.collective->members = std::move(members);
  return r;
}

// TP 2 x DP 2, one GPU per node (rank r on node n<r>); "g-012" is ranks {0, 1, 2}: no axis line.
std::unique_ptr<JobMonitor> FourRanks(FakeClock& clock) {
  return Training(MakeContext(/*tp=*/2, /*pp=*/1, /*dp=*/2, clock.Now(), /*gpus_per_node=*/1));
}

TEST(NamedGroupTest, AWaitInANamedGroupEndsAtTheMemberThatNeverEnteredIt) {
  FakeClock clock;
  auto m = FourRanks(clock);
  for (int r : {0, 1})
    ASSERT_TRUE(m->Ingest(Started(r, clock.Now(), "g-012", 0, {0, 1, 2}), clock.Now()).status.ok());
  auto state = [&](Time now) {
    for (int r : {0, 1}) m->Ingest(InCollective(r, now, "g-012", 0, 5), now);  // heartbeats: no members
    m->Ingest(Heartbeat(2, now, 5), now);                                      // alive, in its own code
    m->Ingest(Heartbeat(3, now, 5), now);  // not in the group: nobody waits for it
  };
  auto hangs = OfKind(RunTicks(*m, clock, 65, state), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({2}));
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n2"}));
  EXPECT_NE(hangs[0].detail.find("collective g-012#0 open"), std::string::npos) << hangs[0].detail;
  EXPECT_NE(hangs[0].detail.find("rank 2 (heartbeating but inside no collective"), std::string::npos)
      << hangs[0].detail;
  Json h = m->HealthJson(clock.Now());
  EXPECT_EQ(h["checks"]["hang"]["collective"]["group"], "g-012");
}

TEST(NamedGroupTest, EveryMemberInsideANamedGroupIsACommunicationFaultOnItsNodes) {
  FakeClock clock;
  auto m = FourRanks(clock);
  for (int r : {0, 1, 2}) m->Ingest(Started(r, clock.Now(), "g-012", 7, {0, 1, 2}), clock.Now());
  auto state = [&](Time now) {
    for (int r : {0, 1, 2}) m->Ingest(InCollective(r, now, "g-012", 7, 5), now);
    m->Ingest(Heartbeat(3, now, 5), now);
  };
  auto hangs = OfKind(RunTicks(*m, clock, 65, state), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_TRUE(hangs[0].ranks.empty());  // no rank at fault: the stuck group's nodes
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n0", "n1", "n2"}));
  EXPECT_NE(hangs[0].detail.find("every member of g-012 group {0,1,2} entered g-012#7: communication fault"),
            std::string::npos)
      << hangs[0].detail;
  Json f = m->HealthJson(clock.Now())["checks"]["hang"]["communication_faults"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["group"], "g-012");
  EXPECT_EQ(f[0]["ranks"], Json::array({0, 1, 2}));
}

TEST(NamedGroupTest, OneNameCanStandForSeveralDisjointGroups) {
  // Two expert-parallel groups both called "ep": {0, 1} and {2, 3}. Rank 0 waits in its ep#5 for rank 1;
  // ranks 2 and 3 completed their ep#5 and wait in ep#6 for nobody past the timeout yet.
  FakeClock clock;
  auto m = FourRanks(clock);
  m->Ingest(Started(0, clock.Now(), "ep", 5, {0, 1}), clock.Now());
  for (int r : {2, 3}) m->Ingest(Started(r, clock.Now(), "ep", 5, {2, 3}), clock.Now());
  auto state = [&](Time now) {
    m->Ingest(InCollective(0, now, "ep", 5, 5), now);
    m->Ingest(Heartbeat(1, now, 5), now);
    for (int r : {2, 3}) m->Ingest(Heartbeat(r, now, 5), now);
  };
  auto hangs = OfKind(RunTicks(*m, clock, 65, state), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({1}));
}

TEST(NamedGroupTest, AWaitForAMemberSavingACheckpointIsNoHangWithinTheAllowance) {
  FakeClock clock;
  auto m = FourRanks(clock);
  for (int r : {0, 1}) m->Ingest(Started(r, clock.Now(), "g-012", 3, {0, 1, 2}), clock.Now());
  auto state = [&](Time now) {
    for (int r : {0, 1}) m->Ingest(InCollective(r, now, "g-012", 3, 5), now);
    Report saver = Heartbeat(2, now, 5);
    saver.phase = Phase::kCheckpointSave;
    m->Ingest(saver, now);
    m->Ingest(Heartbeat(3, now, 5), now);
  };
  auto all = RunTicks(*m, clock, 300, state);
  EXPECT_TRUE(all.empty()) << ToString(all[0].kind) << ": " << all[0].detail;
}

TEST(NamedGroupTest, CompletedCollectivesOfANamedGroupAreNoHang) {
  FakeClock clock;
  auto m = FourRanks(clock);
  int64_t seq = 0;
  auto state = [&](Time now) {
    for (int r : {0, 1, 2}) {
      m->Ingest(Started(r, now, "g-012", seq, {0, 1, 2}), now);
      Report done = Started(r, now, "g-012", seq, {0, 1, 2});
      done.collective_state = CollectiveState::kCompleted;
      m->Ingest(done, now);
    }
    m->Ingest(Heartbeat(3, now, 5), now);
    ++seq;
  };
  EXPECT_TRUE(RunTicks(*m, clock, 300, state).empty());
}

TEST(NamedGroupTest, MembersOutsideTheJobOrInAnotherGroupOfTheNameAreRejected) {
  FakeClock clock;
  auto m = FourRanks(clock);
  IngestResult bad = m->Ingest(Started(0, clock.Now(), "g-x", 0, {0, 4}), clock.Now());
  EXPECT_EQ(bad.status.code(), Code::kInvalidContent);
  EXPECT_EQ(bad.status.fields().at(0).field, "members");
  ASSERT_TRUE(m->Ingest(Started(0, clock.Now(), "ep", 0, {0, 1}), clock.Now()).status.ok());
  IngestResult overlap = m->Ingest(Started(2, clock.Now(), "ep", 0, {1, 2}), clock.Now());
  EXPECT_EQ(overlap.status.code(), Code::kInvalidContent);
  EXPECT_NE(overlap.status.message().find("rank 1 is already in another group named \"ep\""),
            std::string::npos)
      << overlap.status.message();
  // The same members again (every report of the group may carry them) are fine.
  EXPECT_TRUE(m->Ingest(Started(1, clock.Now(), "ep", 0, {0, 1}), clock.Now()).status.ok());
  // A member naming other members for its own group contradicts the group it is known in: refused, as
  // the same group sent by a rank not yet known is (a tester's rank 1 sent [1, 2] and was answered 202).
  for (std::vector<int> other : {std::vector<int>{1, 2}, std::vector<int>{0, 1, 2, 3}}) {
    IngestResult changed = m->Ingest(Started(1, clock.Now(), "ep", 1, other), clock.Now());
    EXPECT_EQ(changed.status.code(), Code::kInvalidContent);
    EXPECT_EQ(changed.status.fields().at(0).field, "members");
  }
}

TEST(NamedGroupTest, TheTableIsBoundedAndAGroupBeyondItStaysUnknown) {
  NamedGroups g(/*world_size=*/1);  // room for kEntriesPerRank member entries
  for (int i = 0; i < NamedGroups::kEntriesPerRank; ++i) {
    Result<uint32_t> id = g.Learn("g-" + std::to_string(i), 0, {0});
    ASSERT_TRUE(id.ok());
    EXPECT_NE(*id, 0u);
  }
  Result<uint32_t> full = g.Learn("g-last", 0, {0});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(*full, 0u);
  EXPECT_EQ(g.Find("g-last", 0), 0u);
  EXPECT_NE(g.Find("g-3", 0), 0u);
}

}  // namespace
}  // namespace shepherd
