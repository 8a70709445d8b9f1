#include "control/agent_board.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_clock.h"

namespace shepherd {
namespace {

class AgentBoardTest : public ::testing::Test {
 protected:
  // Node n1 should run rank 0 of job-1 attempt `attempt_`.
  std::vector<RankAssignment> Desired(const std::string& node) const {
    std::vector<RankAssignment> out;
    if (node == "n1") out.push_back({{"job-1", attempt_, 0}, 0, {"train"}, {}});
    return out;
  }
  Assignments Current(const std::string& node) const { return board_.Current(node, Desired(node)); }
  // Answers the long polls the board made due, as the Controller does after each call.
  void AnswerDue() {
    board_.AnswerDue([this](const std::string& node) { return Desired(node); });
  }
  AgentBoard board_{/*node_timeout_s=*/10};
  FakeClock clock_;
  int attempt_ = 1;
};

bool KnowsAll(const RankRef&) {
  return true;
}

AgentHeartbeat Running(const std::string& job, int attempt) {
  AgentHeartbeat hb;
  hb.processes.push_back({{job, attempt, 0}, true, {}, {}, ""});
  return hb;
}

TEST_F(AgentBoardTest, ExitsAreReturnedAndFaultsOnlyOnce) {
  AgentHeartbeat hb;
  hb.processes.push_back({{"job-1", 1, 0}, false, 3, {}, ""});
  hb.gpu_faults.push_back({2, "xid_79", "fell off the bus"});
  auto out = board_.OnHeartbeat("n1", hb, clock_.Now(), KnowsAll);
  ASSERT_EQ(out.exits.size(), 1u);
  EXPECT_EQ(out.exits[0].exit_code, 3);
  ASSERT_EQ(out.new_faults.size(), 1u);
  EXPECT_TRUE(board_.OnHeartbeat("n1", hb, clock_.Now(), KnowsAll).new_faults.empty());
}

TEST_F(AgentBoardTest, SilentAgentIsLostOnceAndComesBack) {
  board_.OnHeartbeat("n1", {}, clock_.Now(), KnowsAll);
  AnswerDue();
  clock_.AdvanceSeconds(9);
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now()).empty());
  clock_.AdvanceSeconds(2);
  auto lost = board_.CheckLiveness(clock_.Now());
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, "n1");
  EXPECT_EQ(ToSeconds(lost[0].second), 11);
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now()).empty());  // once per silence
  EXPECT_TRUE(board_.OnHeartbeat("n1", {}, clock_.Now(), KnowsAll).back);
}

TEST_F(AgentBoardTest, LaunchGateHoldsRanksUntilTheOldAttemptStops) {
  board_.OnHeartbeat("n1", Running("job-1", 1), clock_.Now(), KnowsAll);
  AnswerDue();
  attempt_ = 2;
  board_.HoldLaunch("job-1", 2, {"n1"}, clock_.Now() + Seconds(30));
  EXPECT_TRUE(Current("n1").ranks.empty());
  board_.OnTick(clock_.Now());
  AnswerDue();
  EXPECT_TRUE(Current("n1").ranks.empty());  // attempt 1 still runs there
  int64_t v = board_.version("n1");
  board_.OnHeartbeat("n1", {}, clock_.Now(), KnowsAll);  // its ranks stopped
  AnswerDue();
  board_.OnTick(clock_.Now());
  AnswerDue();
  EXPECT_GT(board_.version("n1"), v);
  ASSERT_EQ(Current("n1").ranks.size(), 1u);
  EXPECT_EQ(Current("n1").ranks[0].rank.attempt, 2);
}

TEST_F(AgentBoardTest, LaunchGateOpensAtItsDeadlineWhateverRuns) {
  board_.OnHeartbeat("n1", Running("job-1", 1), clock_.Now(), KnowsAll);
  AnswerDue();
  board_.HoldLaunch("job-1", 2, {"n1"}, clock_.Now() + Seconds(30));
  clock_.AdvanceSeconds(5);
  board_.OnHeartbeat("n1", Running("job-1", 1), clock_.Now(), KnowsAll);
  AnswerDue();
  clock_.AdvanceSeconds(26);
  board_.OnTick(clock_.Now());
  AnswerDue();
  EXPECT_EQ(Current("n1").ranks.size(), 1u);
}

TEST_F(AgentBoardTest, ADueLongPollIsAnsweredByItsCallerWithTheNodesDesiredRanks) {
  std::vector<Result<Assignments>> answers;
  board_.OnHeartbeat("n1", {}, clock_.Now(), KnowsAll);
  AnswerDue();
  board_.Watch("n1", 0, clock_.Now() + Seconds(30), clock_.Now(), true,
               [&](Result<Assignments> a) { answers.push_back(std::move(a)); });  // stale version: due
  EXPECT_TRUE(board_.HasDue());
  EXPECT_TRUE(answers.empty());  // the board calls nothing back: its caller answers
  int asked = 0;
  board_.AnswerDue([&](const std::string& node) {
    ++asked;
    return Desired(node);
  });
  EXPECT_FALSE(board_.HasDue());
  EXPECT_EQ(asked, 1);
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].ok());
  ASSERT_EQ(answers[0]->ranks.size(), 1u);
  EXPECT_EQ(answers[0]->ranks[0].rank, (RankRef{"job-1", 1, 0}));
}

TEST_F(AgentBoardTest, LongPollAnsweredOnBumpOnDeadlineAndOnRelease) {
  std::vector<int64_t> answers;
  auto record = [&](Result<Assignments> a) { answers.push_back(a->version); };
  board_.OnHeartbeat("n1", {}, clock_.Now(), KnowsAll);  // heard since start: its version is 1
  AnswerDue();
  board_.Watch("n1", 1, clock_.Now() + Seconds(30), clock_.Now(), true, record);
  AnswerDue();
  EXPECT_TRUE(answers.empty());
  board_.Bump("n1");
  AnswerDue();
  ASSERT_EQ(answers, std::vector<int64_t>{2});
  board_.Watch("n1", 1, clock_.Now() + Seconds(30), clock_.Now(), true, record);  // stale version: at once
  AnswerDue();
  EXPECT_EQ(answers.size(), 2u);
  board_.Watch("n1", 2, clock_.Now() + Seconds(30), clock_.Now(), true, record);
  AnswerDue();
  clock_.AdvanceSeconds(29);
  board_.OnTick(clock_.Now());
  AnswerDue();
  EXPECT_EQ(answers.size(), 2u);
  clock_.AdvanceSeconds(1);
  board_.OnTick(clock_.Now());
  AnswerDue();
  EXPECT_EQ(answers.size(), 3u);
  board_.Watch("n1", 2, clock_.Now() + Seconds(30), clock_.Now(), true, record);
  AnswerDue();
  board_.ReleaseWaiters();
  AnswerDue();
  EXPECT_EQ(answers.size(), 4u);
}

}  // namespace
}  // namespace shepherd

namespace shepherd {
namespace {

TEST_F(AgentBoardTest, SilenceCountsOnlyWhileTheDaemonListened) {
  board_.OnHeartbeat("n1", {}, clock_.Now(), KnowsAll);
  AnswerDue();
  clock_.AdvanceSeconds(12);  // the daemon was stopped: it listens again from now
  Time listening_since = clock_.Now();
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now(), listening_since).empty());
  clock_.AdvanceSeconds(9.5);
  EXPECT_TRUE(board_.CheckLiveness(clock_.Now(), listening_since).empty());
  clock_.AdvanceSeconds(1);
  EXPECT_EQ(board_.CheckLiveness(clock_.Now(), listening_since).size(), 1u);  // silent a full window since
}

TEST_F(AgentBoardTest, VersionsCarryTheEpoch) {
  AgentBoard board(10);
  board.SetEpoch(3);
  EXPECT_EQ(board.version("n1"), 3 * AgentBoard::kEpochStride);
  board.Bump("n1");
  EXPECT_EQ(board.version("n1"), 3 * AgentBoard::kEpochStride + 1);
}

TEST(AgentBoardLeaseTest, ALostAgentsOldRanksHoldTheGateUntilItsLeaseExpires) {
  int attempt = 1;
  auto desired = [&](const std::string& node) {
    std::vector<RankAssignment> out;
    if (node == "spare") out.push_back({{"job-1", attempt, 0}, 0, {"train"}, {}});
    return out;
  };
  AgentBoard board(/*node_timeout_s=*/10, /*lease_s=*/15);
  FakeClock clock;
  Time last_heard = clock.Now();
  board.OnHeartbeat("n1", Running("job-1", 1), clock.Now(), KnowsAll);
  board.OnHeartbeat("spare", {}, clock.Now(), KnowsAll);
  clock.AdvanceSeconds(10);
  board.OnHeartbeat("spare", {}, clock.Now(), KnowsAll);
  ASSERT_EQ(board.CheckLiveness(clock.Now()).size(), 1u);  // n1 is lost; its ranks may still run
  attempt = 2;
  board.HoldLaunch("job-1", 2, {"spare"}, clock.Now() + Seconds(1));  // even a short stop timeout waits
  while (clock.Now() - last_heard < Seconds(15)) {
    board.OnTick(clock.Now());
    EXPECT_TRUE(board.Current("spare", desired("spare")).ranks.empty())
        << ToSeconds(clock.Now() - last_heard) << " s";
    clock.AdvanceSeconds(0.5);
  }
  board.OnTick(clock.Now());
  ASSERT_EQ(board.Current("spare", desired("spare")).ranks.size(), 1u);
  EXPECT_EQ(board.Current("spare", desired("spare")).ranks[0].rank.attempt, 2);
}

// Replicas: a follower may have renewed n1's lease from a view up to renewal_s old that still assigned it
// attempt 1, so the spare's ranks wait for (attempt 2 durable) + renewal_s + lease_s, not the lease the
// leader itself last granted.
TEST(AgentBoardLeaseTest, WithReplicasALostAgentsOldRanksHoldTheGateARenewalBoundPastTheNewAttempt) {
  int attempt = 1;
  constexpr double kLease = 15, kRenewal = 1;
  auto desired = [&](const std::string& node) {
    std::vector<RankAssignment> out;
    if (node == "spare") out.push_back({{"job-1", attempt, 0}, 0, {"train"}, {}});
    return out;
  };
  AgentBoard board(
      /*node_timeout_s=*/10, kLease, /*unknown_timeout_s=*/0, kRenewal);
  FakeClock clock;
  board.OnHeartbeat("n1", Running("job-1", 1), clock.Now(), KnowsAll);
  board.OnHeartbeat("spare", {}, clock.Now(), KnowsAll);
  clock.AdvanceSeconds(10);
  board.OnHeartbeat("spare", {}, clock.Now(), KnowsAll);
  ASSERT_EQ(board.CheckLiveness(clock.Now()).size(), 1u);  // n1 lost 10 s after its last heartbeat
  attempt = 2;
  board.HoldLaunch("job-1", 2, {"spare"}, clock.Now() + Seconds(1));
  board.HoldUntilSaved("job-1", 2, {"spare"});
  clock.AdvanceSeconds(0.25);  // the batch recording attempt 2 commits
  const Time durable = clock.Now();
  board.Saved("job-1", 2, durable);
  // Not at last heartbeat + lease (15 s): at durable + 1 + 15 = 26.25 s after it.
  while (clock.Now() < durable + Seconds(kRenewal + kLease)) {
    board.OnTick(clock.Now());
    ASSERT_TRUE(board.Current("spare", desired("spare")).ranks.empty())
        << ToSeconds(clock.Now() - durable) << " s after";
    clock.AdvanceSeconds(0.25);
  }
  board.OnTick(clock.Now());
  ASSERT_EQ(board.Current("spare", desired("spare")).ranks.size(), 1u);
  EXPECT_EQ(board.Current("spare", desired("spare")).ranks[0].rank.attempt, 2);
}

// A new leader counts every attached agent's lease from its start, renewal_s longer with replicas.
TEST(AgentBoardLeaseTest, WithReplicasARestoredAgentsLeaseIncludesTheRenewalBound) {
  int attempt = 1;
  auto desired = [&](const std::string& node) {
    std::vector<RankAssignment> out;
    if (node == "spare") out.push_back({{"job-1", attempt, 0}, 0, {"train"}, {}});
    return out;
  };
  AgentBoard board(
      /*node_timeout_s=*/10, /*lease_s=*/15, /*unknown_timeout_s=*/0, /*renewal_s=*/2);
  FakeClock clock;
  const Time start = clock.Now();
  board.Restore("n1", start);
  board.OnHeartbeat("spare", {}, clock.Now(), KnowsAll);
  clock.AdvanceSeconds(10);
  board.OnHeartbeat("spare", {}, clock.Now(), KnowsAll);
  ASSERT_EQ(board.CheckLiveness(clock.Now()).size(), 1u);
  attempt = 2;
  board.HoldLaunch("job-1", 2, {"spare"}, clock.Now() + Seconds(1));
  while (clock.Now() < start + Seconds(17)) {
    board.OnTick(clock.Now());
    ASSERT_TRUE(board.Current("spare", desired("spare")).ranks.empty()) << ToSeconds(clock.Now() - start) << " s";
    clock.AdvanceSeconds(0.5);
  }
  board.OnTick(clock.Now());
  EXPECT_EQ(board.Current("spare", desired("spare")).ranks.size(), 1u);
}

}  // namespace
}  // namespace shepherd

namespace shepherd {
namespace {

// Unknown processes: a daemon with no record of what a node runs (a new or emptied database).
class AgentBoardUnknownTest : public ::testing::Test {
 protected:
  // The daemon knows nothing; it wants nothing on n1. Unknown processes are kept 60 s.
  AgentBoard board_{/*node_timeout_s=*/10, /*lease_s=*/15, /*unknown_timeout_s=*/60};
  // It wants nothing anywhere; answers the long polls the board made due, as the Controller does.
  void AnswerDue() {
    board_.AnswerDue([](const std::string&) { return std::vector<RankAssignment>{}; });
  }
  Assignments Current(const std::string& node) const { return board_.Current(node, {}); }
  FakeClock clock_;
  std::vector<Result<Assignments>> answers_;
  Done<Assignments> Record() {
    return [this](Result<Assignments> a) { answers_.push_back(std::move(a)); };
  }
  static bool KnowsNothing(const RankRef&) { return false; }
  static AgentHeartbeat Running2() {
    AgentHeartbeat hb = Running("job-000001", 1);
    hb.processes.push_back({{"job-000001", 1, 1}, true, {}, {}, "", "", {}, 4243});
    return hb;
  }
};

TEST_F(AgentBoardUnknownTest, NoAnswerBeforeTheNodesFirstHeartbeatThenOneThatKeepsItsProcesses) {
  board_.Watch("n1", 0, clock_.Now(), clock_.Now(), true, Record());  // wait=0, before any heartbeat
  AnswerDue();
  board_.Bump("n1");  // a change meanwhile: still held
  AnswerDue();
  board_.OnTick(clock_.Now());
  AnswerDue();
  EXPECT_TRUE(answers_.empty());
  board_.OnHeartbeat("n1", Running2(), clock_.Now(), KnowsNothing);
  AnswerDue();
  ASSERT_EQ(answers_.size(), 1u);
  ASSERT_TRUE(answers_[0].ok());
  EXPECT_TRUE(answers_[0]->ranks.empty());
  EXPECT_EQ(answers_[0]->keep, (std::vector<RankRef>{{"job-000001", 1, 0}, {"job-000001", 1, 1}}));
  ASSERT_EQ(board_.Unknown("n1").size(), 2u);
  EXPECT_EQ(board_.Unknown("n1")[1].pid, 4243);
}

TEST_F(AgentBoardUnknownTest, AnAgentThatNeverHeartbeatsGets503AfterTheNodeTimeout) {
  board_.Watch("n1", 0, clock_.Now(), clock_.Now(), true, Record());
  AnswerDue();
  clock_.AdvanceSeconds(9.9);
  board_.OnTick(clock_.Now());
  AnswerDue();
  EXPECT_TRUE(answers_.empty());
  clock_.AdvanceSeconds(0.1);
  board_.OnTick(clock_.Now());
  AnswerDue();
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status().code(), Code::kUnavailable);
}

TEST_F(AgentBoardUnknownTest, KnownProcessesAreNotKept) {
  board_.OnHeartbeat("n1", Running2(), clock_.Now(), KnowsAll);
  AnswerDue();
  EXPECT_TRUE(board_.Unknown("n1").empty());
  board_.Watch("n1", 0, clock_.Now(), clock_.Now(), /*can_keep=*/false, Record());
  AnswerDue();
  ASSERT_EQ(answers_.size(), 1u);
  ASSERT_TRUE(answers_[0].ok());  // nothing to keep: an old agent is answered as always
  EXPECT_TRUE(answers_[0]->keep.empty());
}

TEST_F(AgentBoardUnknownTest, AnOldAgentGets503WhileAnyAreUndecided) {
  board_.OnHeartbeat("n1", Running2(), clock_.Now(), KnowsNothing);
  AnswerDue();
  board_.Watch("n1", 0, clock_.Now(), clock_.Now(), /*can_keep=*/false, Record());
  AnswerDue();
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status().code(), Code::kUnavailable);
  EXPECT_NE(answers_[0].status().message().find("keep=1"), std::string::npos);
  EXPECT_EQ(board_.StopUnknownProcesses("n1"), 2);
  AnswerDue();
  board_.Watch("n1", 0, clock_.Now(), clock_.Now(), /*can_keep=*/false, Record());
  AnswerDue();
  ASSERT_TRUE(answers_.at(1).ok());  // decided: the answer without them stops them
  EXPECT_TRUE(answers_[1]->keep.empty());
}

TEST_F(AgentBoardUnknownTest, TheTimeoutDropsThemFromKeepAndWakesTheLongPoll) {
  board_.OnHeartbeat("n1", Running2(), clock_.Now(), KnowsNothing);
  AnswerDue();
  const int64_t v = board_.version("n1");
  board_.Watch("n1", v, clock_.Now() + Seconds(300), clock_.Now(), true, Record());
  AnswerDue();
  for (int i = 0; i < 59; ++i) {
    clock_.AdvanceSeconds(1);
    board_.OnHeartbeat("n1", Running2(), clock_.Now(), KnowsNothing);
    AnswerDue();
    board_.OnTick(clock_.Now());
    AnswerDue();
  }
  EXPECT_TRUE(answers_.empty());
  EXPECT_EQ(Current("n1").keep.size(), 2u);
  clock_.AdvanceSeconds(1);
  board_.OnTick(clock_.Now());
  AnswerDue();
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_GT(answers_[0]->version, v);
  EXPECT_TRUE(answers_[0]->keep.empty());
  EXPECT_TRUE(board_.Unknown("n1")[0].stopping);
  board_.OnHeartbeat("n1", {}, clock_.Now(), KnowsNothing);  // the agent stopped them
  AnswerDue();
  EXPECT_TRUE(board_.Unknown("n1").empty());
}

TEST_F(AgentBoardUnknownTest, AnOperatorsStopWakesTheLongPoll) {
  board_.OnHeartbeat("n1", Running2(), clock_.Now(), KnowsNothing);
  AnswerDue();
  board_.Watch("n1", board_.version("n1"), clock_.Now() + Seconds(30), clock_.Now(), true, Record());
  AnswerDue();
  EXPECT_EQ(board_.StopUnknownProcesses("n2"), 0);  // never heard: nothing to decide
  EXPECT_TRUE(answers_.empty());
  EXPECT_EQ(board_.StopUnknownProcesses("n1"), 2);
  AnswerDue();
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_TRUE(answers_[0]->keep.empty());
}

TEST_F(AgentBoardUnknownTest, AfterARestartWithItsRecordsTheAgentIsStillHeardFirst) {
  board_.Restore("n1", clock_.Now());  // attached before the restart
  board_.Watch("n1", 0, clock_.Now(), clock_.Now(), true, Record());
  AnswerDue();
  EXPECT_TRUE(answers_.empty());
  board_.OnHeartbeat("n1", Running2(), clock_.Now(), KnowsAll);
  AnswerDue();
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_TRUE(answers_[0]->keep.empty());
}

}  // namespace
}  // namespace shepherd
