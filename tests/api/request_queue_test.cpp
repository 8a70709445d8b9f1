// RequestQueue without threads: classes, bounds, and the order a drain runs tasks in. `post` collects the
// drains the queue schedules; the test runs them as the control thread would.
#include "api/request_queue.h"
#include "api/route_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace shepherd {
namespace {

class RequestQueueTest : public ::testing::Test {
 protected:
  RequestQueue Make(RequestQueueLimits limits) {
    return RequestQueue(limits, [this](std::function<void()> f) { posted_.push_back(std::move(f)); });
  }
  void RunPosted() {
    while (!posted_.empty()) {
      auto f = std::move(posted_.front());
      posted_.pop_front();
      f();
    }
  }
  std::deque<std::function<void()>> posted_;
  std::vector<std::string> ran_;
};

TEST(RequestClassTest, ReportsAndHeartbeatsArePriorityReadsAreReadsLongPollsAreWrites) {
  EXPECT_EQ(ClassOf("POST", "/v1/jobs/job-1/reports"), RequestClass::kPriority);
  EXPECT_EQ(ClassOf("POST", "/v1/nodes/n1/heartbeat"), RequestClass::kPriority);
  EXPECT_EQ(ClassOf("POST", "/v1/external/slurm/4242/reports"), RequestClass::kPriority);
  EXPECT_EQ(ClassOf("GET", "/v1/nodes"), RequestClass::kRead);
  EXPECT_EQ(ClassOf("GET", "/v1/jobs/job-1/failures"), RequestClass::kRead);
  EXPECT_EQ(ClassOf("GET", "/v1/nodes/n1/assignments"), RequestClass::kWrite);
  EXPECT_EQ(ClassOf("POST", "/v1/jobs"), RequestClass::kWrite);
  EXPECT_EQ(ClassOf("GET", "/v1/jobs/job-1/reports"), RequestClass::kRead);  // not a report post
}

TEST_F(RequestQueueTest, AFullClassRefusesOnlyItself) {
  RequestQueue q = Make({2, 1, 1});
  EXPECT_TRUE(q.Offer(RequestClass::kRead, [] {}));
  EXPECT_FALSE(q.Offer(RequestClass::kRead, [] {}));
  EXPECT_TRUE(q.Offer(RequestClass::kWrite, [] {}));
  EXPECT_FALSE(q.Offer(RequestClass::kWrite, [] {}));
  EXPECT_TRUE(q.Offer(RequestClass::kPriority, [] {}));
  EXPECT_TRUE(q.Offer(RequestClass::kPriority, [] {}));
  EXPECT_FALSE(q.Offer(RequestClass::kPriority, [] {}));
  EXPECT_EQ(posted_.size(), 1u);  // one drain scheduled, however many offers
  RunPosted();
  EXPECT_EQ(q.depth(RequestClass::kRead), 0u);
  EXPECT_TRUE(q.Offer(RequestClass::kRead, [] {}));  // room again once drained
}

TEST_F(RequestQueueTest, PriorityFirstAndReportsArrivingMidRoundJumpAhead) {
  RequestQueue q = Make({});
  q.Offer(RequestClass::kRead, [&] { ran_.push_back("read1"); });
  q.Offer(RequestClass::kWrite, [&] {
    ran_.push_back("write1");
    q.Offer(RequestClass::kPriority, [&] { ran_.push_back("report2"); });  // arrives while a write runs
  });
  q.Offer(RequestClass::kRead, [&] { ran_.push_back("read2"); });
  q.Offer(RequestClass::kPriority, [&] { ran_.push_back("report1"); });
  RunPosted();
  EXPECT_EQ(ran_, (std::vector<std::string>{"report1", "write1", "report2", "read1", "read2"}));
}

TEST_F(RequestQueueTest, ABacklogOfReportsLetsOneWriteAndOneReadThroughPerRound) {
  RequestQueue q = Make({});
  const int reports = static_cast<int>(RequestQueue::kPriorityBurst) + 10;
  for (int i = 0; i < reports; ++i) q.Offer(RequestClass::kPriority, [&] { ran_.push_back("r"); });
  for (int i = 0; i < 3; ++i) q.Offer(RequestClass::kRead, [&] { ran_.push_back("read"); });
  ASSERT_EQ(posted_.size(), 1u);
  auto first = std::move(posted_.front());
  posted_.pop_front();
  first();  // one round
  // A backlog was left after taking 256 reports, so the round took one read only; the reports still
  // waiting ran before it (between tasks, priority goes first).
  ASSERT_EQ(ran_.size(), static_cast<size_t>(reports) + 1);
  EXPECT_EQ(ran_.back(), "read");
  RunPosted();
  EXPECT_EQ(std::count(ran_.begin(), ran_.end(), "read"), 3);
  EXPECT_EQ(std::count(ran_.begin(), ran_.end(), "r"), reports);
}

TEST_F(RequestQueueTest, ARoundEndsAfterItsTimeBudgetAndTheRestKeepsItsOrder) {
  // A slow first task (longer than kRoundBudget): the round ends after it, so what else is posted to the
  // control thread (a tick, a signal) runs before the next round; nothing is lost or reordered.
  RequestQueue q = Make({});
  q.Offer(RequestClass::kPriority, [&] {
    ran_.push_back("slow");
    std::this_thread::sleep_for(RequestQueue::kRoundBudget + std::chrono::milliseconds(5));
  });
  for (int i = 0; i < 3; ++i)
    q.Offer(RequestClass::kPriority, [&, i] { ran_.push_back("r" + std::to_string(i)); });
  q.Offer(RequestClass::kWrite, [&] { ran_.push_back("write"); });
  ASSERT_EQ(posted_.size(), 1u);
  auto first = std::move(posted_.front());
  posted_.pop_front();
  first();
  EXPECT_EQ(ran_, std::vector<std::string>{"slow"});
  EXPECT_EQ(q.depth(RequestClass::kPriority), 3u);
  EXPECT_EQ(q.depth(RequestClass::kWrite), 1u);
  ASSERT_EQ(posted_.size(), 1u);  // the next round is posted behind whatever else waits
  RunPosted();
  EXPECT_EQ(ran_, (std::vector<std::string>{"slow", "r0", "r1", "r2", "write"}));
}

}  // namespace
}  // namespace shepherd
