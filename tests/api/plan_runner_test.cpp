// PlanRunner: searches run on its own thread, in order, at most `capacity` at a time; no sleeps (futures).
#include "api/plan_runner.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

namespace shepherd {
namespace {

TEST(PlanRunner, RunsTasksInOrderOnItsOwnThread) {
  PlanRunner runner(4);
  std::vector<int> order;  // written by the runner's thread only; read after the last task is done
  std::promise<std::thread::id> ran_on;
  std::promise<void> done;
  ASSERT_TRUE(runner.Run([&] {
    order.push_back(1);
    ran_on.set_value(std::this_thread::get_id());
  }));
  ASSERT_TRUE(runner.Run([&] { order.push_back(2); }));
  ASSERT_TRUE(runner.Run([&] {
    order.push_back(3);
    done.set_value();
  }));
  done.get_future().wait();
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

// A task in progress counts against the bound with the waiting ones; a refused task is dropped, not run.
TEST(PlanRunner, RefusesBeyondItsCapacityUntilATaskEnds) {
  PlanRunner runner(2);
  std::promise<void> started, release, second_done;
  std::shared_future<void> go = release.get_future().share();
  ASSERT_TRUE(runner.Run([&, go] {
    started.set_value();
    go.wait();
  }));
  started.get_future().wait();
  EXPECT_EQ(runner.pending(), 1u);
  ASSERT_TRUE(runner.Run([&] { second_done.set_value(); }));
  EXPECT_EQ(runner.pending(), 2u);
  bool refused_ran = false;
  EXPECT_FALSE(runner.Run([&] { refused_ran = true; }));
  release.set_value();
  second_done.get_future().wait();
  std::promise<void> third_done;
  EXPECT_TRUE(runner.Run([&] { third_done.set_value(); }));  // room again
  third_done.get_future().wait();
  EXPECT_FALSE(refused_ran);
}

// One identity, and all viewers together, hold at most their share of the queue; others still get in.
TEST(PlanRunner, EachShareHoldsAtMostItsLimit) {
  PlanRunner runner(16);
  std::promise<void> started, release;
  std::shared_future<void> go = release.get_future().share();
  ASSERT_TRUE(runner.Run(
      [&, go] {
        started.set_value();
        go.wait();
      },
      {{"viewer:a", 1}, {"viewers", 2}}));
  started.get_future().wait();
  EXPECT_FALSE(runner.Run([] {}, {{"viewer:a", 1}, {"viewers", 2}})) << "its own share is full";
  EXPECT_TRUE(runner.Run([] {}, {{"viewer:b", 1}, {"viewers", 2}}));
  EXPECT_FALSE(runner.Run([] {}, {{"viewer:c", 1}, {"viewers", 2}})) << "all viewers' share is full";
  EXPECT_TRUE(runner.Run([] {}, {{"submitter:sam", 4}})) << "others are not held up";
  EXPECT_EQ(runner.pending(), 3u);
  release.set_value();
  std::promise<void> next;
  ASSERT_TRUE(runner.Run([&] { next.set_value(); }));
  next.get_future().wait();  // every task before it ran and gave its share back
  std::promise<void> again;
  EXPECT_TRUE(runner.Run([&] { again.set_value(); }, {{"viewer:a", 1}, {"viewers", 2}}));
  again.get_future().wait();
}

}  // namespace
}  // namespace shepherd
