// ControlChannel (daemon/control_channel.h): a worker thread asks a control thread (here a real thread
// running what is posted to it, in order) and waits, bounded by a timeout and by Stop.
#include "daemon/control_channel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace shepherd {
namespace {

using namespace std::chrono_literals;

// A control thread: runs posted functions one at a time, in order, until destroyed.
class ControlThread {
 public:
  ControlThread() : thread_([this] { Run(); }) {}
  ~ControlThread() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Post post() {
    return [this](std::function<void()> f) {
      {
        std::lock_guard lock(mu_);
        queue_.push_back(std::move(f));
      }
      cv_.notify_all();
    };
  }
  std::thread::id id() const { return thread_.get_id(); }
  // Runs `f` on the control thread and waits for it: everything posted before has run by then.
  void Flush() {
    std::promise<void> ran;
    post()([&] { ran.set_value(); });
    ran.get_future().wait();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
        if (queue_.empty()) return;
        f = std::move(queue_.front());
        queue_.pop_front();
      }
      f();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool done_ = false;
  std::thread thread_;  // last: started once the rest exists
};

TEST(ControlChannelTest, AskReturnsWhatTheControlThreadAnswered) {
  ControlThread control;
  auto channel = ControlChannel::Create(control.post());
  std::thread::id asked_on;
  std::optional<int> answer = channel->Ask<int>(
      [&](std::function<void(int)> reply) {
        asked_on = std::this_thread::get_id();
        reply(41 + 1);
      },
      600s);
  ASSERT_TRUE(answer);
  EXPECT_EQ(*answer, 42);
  EXPECT_EQ(asked_on, control.id());
}

TEST(ControlChannelTest, AReplyGivenLaterOnTheControlThreadIsWaitedFor) {
  ControlThread control;
  auto channel = ControlChannel::Create(control.post());
  Post post = control.post();
  // As SyncSlurm answers once its commit is durable: the reply comes from a later posted function.
  std::optional<std::string> answer = channel->Ask<std::string>(
      [post](std::function<void(std::string)> reply) { post([reply] { reply("durable"); }); }, 600s);
  ASSERT_TRUE(answer);
  EXPECT_EQ(*answer, "durable");
}

TEST(ControlChannelTest, NoReplyWithinTheTimeoutIsNulloptAndNotStopped) {
  ControlThread control;
  auto channel = ControlChannel::Create(control.post());
  std::function<void(int)> kept;  // the control thread never replies (until after the timeout)
  const auto start = std::chrono::steady_clock::now();
  std::optional<int> answer = channel->Ask<int>([&](std::function<void(int)> reply) { kept = reply; }, 50ms);
  EXPECT_FALSE(answer);
  EXPECT_FALSE(channel->stopped());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  // A late reply goes nowhere (and is harmless).
  control.post()([&] { kept(7); });
  control.Flush();
}

TEST(ControlChannelTest, StopWakesAWaitingAskAndLaterPostsDoNotRun) {
  ControlThread control;
  auto channel = ControlChannel::Create(control.post());
  auto waiting = std::async(std::launch::async, [&] {
    return channel->Ask<int>([](std::function<void(int)>) {}, 600s);  // never answered
  });
  channel->Stop();
  ASSERT_EQ(waiting.wait_for(60s), std::future_status::ready);  // not the 600 s timeout
  EXPECT_FALSE(waiting.get());
  EXPECT_TRUE(channel->stopped());

  bool ran = false, owed_ran = false;
  channel->Tell([&] { ran = true; });
  channel->Tell([&] { owed_ran = true; }, /*even_stopped=*/true);
  control.Flush();
  EXPECT_FALSE(ran);
  EXPECT_TRUE(owed_ran);
  EXPECT_FALSE(channel->Ask<int>([](std::function<void(int)> reply) { reply(1); }, 600s));
}

TEST(ControlChannelTest, APostedFunctionThatRunsAfterStopDoesNothing) {
  ControlThread control;
  auto channel = ControlChannel::Create(control.post());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  control.post()([released] { released.wait(); });  // the control thread is busy
  bool ran = false;
  channel->Tell([&] { ran = true; });  // queued behind it
  channel->Stop();
  release.set_value();
  control.Flush();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace shepherd
