#include "control/agent_board.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_clock.h"

namespace shepherd {
namespace {

class AgentBoardTest : public ::testing::Test {
 protected:
  // Node n1 should run rank 0 of job-1 attempt `attempt_`.
  AgentBoard board_{[this](const std::string& node) {
                      std::vector<RankAssignment> out;
                      if (node == "n1") out.push_back({{"job-1", attempt_, 0}, 0, {"train"}, {}});
                      return out;
                    },
                    /*node_timeout_s=*/10};
  FakeClock clock_;
  int attempt_ = 1;
};

AgentHeartbeat Running(const std::string& job, int attempt) {
  AgentHeartbeat hb;
  hb.processes.push_back({{job, attempt, 0}, true, {}, {}, ""});
  return hb;
}

TEST_F(AgentBoardTest, ExitsAreReturnedAndFaultsOnlyOnce) {
  AgentHeartbeat hb;
  hb.processes.push_back({{"job-1", 1, 0}, false, 3, {}, ""});
  hb.gpu_faults.push_back({2, "xid_79", "fell off the bus"});
  auto out = board_.OnHeartbeat("n1", hb, clock_.Now());
  ASSERT_EQ(out.exits.size(), 1u);
  EXPECT_EQ(out.exits[0].exit_code, 3);
  ASSERT_EQ(out.new_faults.size(), 1u);
  EXPECT_TRUE(board_.OnHeartbeat("n1", hb, clock_.Now()).new_faults.empty());
}

TEST_F(AgentBoardTest, SilentAgentIsLostOnceAndComesBack) {
  board_.OnHeartbeat("n1", {}, clock_.Now());
  clock_.AdvanceSeconds(9);
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now()).empty());
  clock_.AdvanceSeconds(2);
  auto lost = board_.CheckLiveness(clock_.Now());
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, "n1");
  EXPECT_EQ(ToSeconds(lost[0].second), 11);
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now()).empty());  // once per silence
  EXPECT_TRUE(board_.OnHeartbeat("n1", {}, clock_.Now()).back);
}

TEST_F(AgentBoardTest, LaunchGateHoldsRanksUntilTheOldAttemptStops) {
  board_.OnHeartbeat("n1", Running("job-1", 1), clock_.Now());
  attempt_ = 2;
  board_.HoldLaunch("job-1", 2, {"n1"}, clock_.Now() + Seconds(30));
  EXPECT_TRUE(board_.Current("n1").ranks.empty());
  board_.OnTick(clock_.Now());
  EXPECT_TRUE(board_.Current("n1").ranks.empty());  // attempt 1 still runs there
  int64_t v = board_.version("n1");
  board_.OnHeartbeat("n1", {}, clock_.Now());  // its ranks stopped
  board_.OnTick(clock_.Now());
  EXPECT_GT(board_.version("n1"), v);
  ASSERT_EQ(board_.Current("n1").ranks.size(), 1u);
  EXPECT_EQ(board_.Current("n1").ranks[0].rank.attempt, 2);
}

TEST_F(AgentBoardTest, LaunchGateOpensAtItsDeadlineWhateverRuns) {
  board_.OnHeartbeat("n1", Running("job-1", 1), clock_.Now());
  board_.HoldLaunch("job-1", 2, {"n1"}, clock_.Now() + Seconds(30));
  clock_.AdvanceSeconds(5);
  board_.OnHeartbeat("n1", Running("job-1", 1), clock_.Now());
  clock_.AdvanceSeconds(26);
  board_.OnTick(clock_.Now());
  EXPECT_EQ(board_.Current("n1").ranks.size(), 1u);
}

TEST_F(AgentBoardTest, LongPollAnsweredOnBumpOnDeadlineAndOnRelease) {
  std::vector<int64_t> answers;
  auto record = [&](Result<Assignments> a) { answers.push_back(a->version); };
  board_.Watch("n1", 0, clock_.Now() + Seconds(30), clock_.Now(), record);
  EXPECT_TRUE(answers.empty());
  board_.Bump("n1");
  ASSERT_EQ(answers, std::vector<int64_t>{1});
  board_.Watch("n1", 0, clock_.Now() + Seconds(30), clock_.Now(), record);  // stale version: at once
  EXPECT_EQ(answers.size(), 2u);
  board_.Watch("n1", 1, clock_.Now() + Seconds(30), clock_.Now(), record);
  clock_.AdvanceSeconds(29);
  board_.OnTick(clock_.Now());
  EXPECT_EQ(answers.size(), 2u);
  clock_.AdvanceSeconds(1);
  board_.OnTick(clock_.Now());
  EXPECT_EQ(answers.size(), 3u);
  board_.Watch("n1", 1, clock_.Now() + Seconds(30), clock_.Now(), record);
  board_.ReleaseWaiters();
  EXPECT_EQ(answers.size(), 4u);
}

}  // namespace
}  // namespace shepherd

namespace shepherd {
namespace {

TEST_F(AgentBoardTest, SilenceCountsOnlyWhileTheDaemonListened) {
  board_.OnHeartbeat("n1", {}, clock_.Now());
  clock_.AdvanceSeconds(12);  // the daemon was stopped: it listens again from now
  Time listening_since = clock_.Now();
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now(), listening_since).empty());
  clock_.AdvanceSeconds(9.5);
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now(), listening_since).empty());
  clock_.AdvanceSeconds(1);
  EXPECT_EQ(board_.CheckLiveness(clock_.Now(), listening_since).size(), 1u);  // silent a full window since
}

TEST_F(AgentBoardTest, VersionsCarryTheEpoch) {
  AgentBoard board([](const std::string&) { return std::vector<RankAssignment>{}; }, 10);
  board.SetEpoch(3);
  EXPECT_EQ(board.version("n1"), 3 * AgentBoard::kEpochStride);
  board.Bump("n1");
  EXPECT_EQ(board.version("n1"), 3 * AgentBoard::kEpochStride + 1);
}

TEST(AgentBoardLeaseTest, ALostAgentsOldRanksHoldTheGateUntilItsLeaseExpires) {
  int attempt = 1;
  AgentBoard board(
      [&](const std::string& node) {
        std::vector<RankAssignment> out;
        if (node == "spare") out.push_back({{"job-1", attempt, 0}, 0, {"train"}, {}});
        return out;
      },
      /*node_timeout_s=*/10, /*lease_s=*/15);
  FakeClock clock;
  Time last_heard = clock.Now();
  board.OnHeartbeat("n1", Running("job-1", 1), clock.Now());
  board.OnHeartbeat("spare", {}, clock.Now());
  clock.AdvanceSeconds(10);
  board.OnHeartbeat("spare", {}, clock.Now());
  ASSERT_EQ(board.CheckLiveness(clock.Now()).size(), 1u);  // n1 is lost; its ranks may still run
  attempt = 2;
  board.HoldLaunch("job-1", 2, {"spare"}, clock.Now() + Seconds(1));  // even a short stop timeout waits
  while (clock.Now() - last_heard < Seconds(15)) {
    board.OnTick(clock.Now());
    EXPECT_TRUE(board.Current("spare").ranks.empty()) << ToSeconds(clock.Now() - last_heard) << " s";
    clock.AdvanceSeconds(0.5);
  }
  board.OnTick(clock.Now());
  ASSERT_EQ(board.Current("spare").ranks.size(), 1u);
  EXPECT_EQ(board.Current("spare").ranks[0].rank.attempt, 2);
}

}  // namespace
}  // namespace shepherd
