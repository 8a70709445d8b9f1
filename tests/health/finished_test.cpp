// Ranks that report `finished`: their silence is neither a lost heartbeat nor a stopped hang culprit, and
// the attempt is over once every rank finished.
#include <gtest/gtest.h>

#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

TEST(FinishedTest, RanksThatFinishedAtDifferentTimesAreNeverLost) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 3, clock.Now(), 1));
  for (int r = 0; r < 3; ++r) m->Ingest(Step(r, clock.Now(), 100, 2.0), clock.Now());
  m->Ingest(Finished(0, clock.Now(), 100), clock.Now());
  EXPECT_FALSE(m->AllFinished());
  std::vector<Finding> all;
  for (int t = 0; t < 120; t += 5) {  // ranks 1 and 2 tidy up for a while, rank 1 finishes at 60 s
    clock.AdvanceSeconds(5);
    if (t < 60) m->Ingest(Heartbeat(1, clock.Now(), 100), clock.Now());
    if (t == 60) m->Ingest(Finished(1, clock.Now(), 100), clock.Now());
    m->Ingest(Heartbeat(2, clock.Now(), 100), clock.Now());
    for (Finding& f : m->Evaluate(clock.Now())) all.push_back(f);
  }
  EXPECT_TRUE(OfKind(all, FindingKind::kHeartbeatLost).empty());
  Json hb = m->HealthJson(clock.Now())["checks"]["heartbeat"];
  EXPECT_EQ(hb["ranks_finished"], 2);
  EXPECT_EQ(hb["lost_count"], 0);
  EXPECT_EQ(hb["status"], "ok");
  m->Ingest(Finished(2, clock.Now(), 100), clock.Now());
  EXPECT_TRUE(m->AllFinished());
  clock.AdvanceSeconds(600);  // all silent for ten minutes: nothing to find
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
}

TEST(FinishedTest, TheSameSilenceWithoutTheReportIsALoss) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now(), 1));
  for (int r = 0; r < 2; ++r) m->Ingest(Step(r, clock.Now(), 100, 2.0), clock.Now());
  m->Ingest(Finished(0, clock.Now(), 100), clock.Now());
  clock.AdvanceSeconds(11);
  auto lost = OfKind(m->Evaluate(clock.Now()), FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({1}));
  EXPECT_FALSE(m->AllFinished());
}

TEST(FinishedTest, LaterHeartbeatsOfAFinishedRankChangeNothing) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now(), 1));
  m->Ingest(Finished(0, clock.Now(), 100), clock.Now());
  m->Ingest(Finished(0, clock.Now(), 100), clock.Now());  // a retried report counts once
  EXPECT_FALSE(m->AllFinished());
  // The helper heartbeats through the interpreter's exit, inside no collective; a stale page may say one.
  m->Ingest(InCollective(0, clock.Now(), "dp", 7, 100), clock.Now());
  m->Ingest(Finished(1, clock.Now(), 100), clock.Now());
  EXPECT_TRUE(m->AllFinished());
  clock.AdvanceSeconds(300);
  EXPECT_TRUE(m->Evaluate(clock.Now()).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["hang"]["status"], "ok");
}

TEST(FinishedTest, PeersWaitingForAFinishedRankNameItButNotAsStopped) {
  // A real bug in the script (one rank left the loop early while the others still reduce): a hang whose
  // culprit ended by choice. Its node is not suspect: the culprit is not in silent_ranks.
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now(), 1));
  for (int r = 0; r < 2; ++r) m->Ingest(Step(r, clock.Now(), 50, 2.0), clock.Now());
  m->Ingest(Finished(1, clock.Now(), 50), clock.Now());
  std::vector<Finding> all;
  for (int t = 0; t < 70; t += 5) {
    clock.AdvanceSeconds(5);
    m->Ingest(InCollective(0, clock.Now() - Seconds(t + 5), "dp", 51, 51), clock.Now());
    for (Finding& f : m->Evaluate(clock.Now())) all.push_back(f);
  }
  EXPECT_TRUE(OfKind(all, FindingKind::kHeartbeatLost).empty());
  auto hangs = OfKind(all, FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({1}));
  EXPECT_TRUE(hangs[0].silent_ranks.empty());
  EXPECT_NE(hangs[0].detail.find("reported finished (step 50)"), std::string::npos) << hangs[0].detail;
}

}  // namespace
}  // namespace shepherd
