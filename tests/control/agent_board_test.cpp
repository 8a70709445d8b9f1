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
