// ControlThread and ControlLock's per-thread read count: what the debug builds' thread assertions check.
#include "control/control_lock.h"

#include <gtest/gtest.h>

#include <thread>

namespace shepherd {
bool ControlThreadChecks();  // control/control_lock.cpp: whether this build's assertions check

namespace {

TEST(ControlThreadTest, TheConstructingThreadIsTheControlThread) {
  ControlThread control;
  EXPECT_TRUE(control.IsCurrent());
  bool elsewhere = true;
  std::thread([&] { elsewhere = control.IsCurrent(); }).join();
  EXPECT_FALSE(elsewhere);
}

// Where the checks are built in (debug builds, the ThreadSanitizer leg): a mutator's assertion off the
// control thread aborts naming the mistake; a read's passes on a thread holding the shared lock.
TEST(ControlThreadTest, AssertionsOffTheControlThreadAbortWhereChecked) {
  if (!ControlThreadChecks()) GTEST_SKIP() << "the control library is built without its thread checks";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ControlThread control;
  control.Assert();
  control.AssertShared();
  EXPECT_DEATH(std::thread([&] { control.Assert(); }).join(), "control state changed off the control thread");
  EXPECT_DEATH(std::thread([&] { control.AssertShared(); }).join(), "read off the control thread");
  ControlLock lock;
  std::thread([&] {
    ControlReadHold hold(lock);
    control.AssertShared();
  }).join();
}

TEST(ControlLockTest, AReadHoldIsSeenOnItsOwnThreadOnly) {
  ControlLock lock;
  EXPECT_FALSE(ControlLock::ReadHeldHere());
  {
    ControlReadHold hold(lock);
    EXPECT_TRUE(ControlLock::ReadHeldHere());
    bool other_thread_sees = true;
    std::thread([&] { other_thread_sees = ControlLock::ReadHeldHere(); }).join();
    EXPECT_FALSE(other_thread_sees);
  }
  EXPECT_FALSE(ControlLock::ReadHeldHere());
  ASSERT_TRUE(lock.try_lock_shared());
  EXPECT_TRUE(ControlLock::ReadHeldHere());
  lock.unlock_shared();
  EXPECT_FALSE(ControlLock::ReadHeldHere());
}

TEST(ControlLockTest, TheControlThreadsHoldExcludesReaders) {
  ControlLock lock;
  {
    ControlHold hold(lock);
    bool reader_got_it = true;
    std::thread([&] {
      reader_got_it = lock.try_lock_shared();
      if (reader_got_it) lock.unlock_shared();
    }).join();
    EXPECT_FALSE(reader_got_it);
  }
  bool reader_got_it = false;
  std::thread([&] {
    reader_got_it = lock.try_lock_shared();
    if (reader_got_it) lock.unlock_shared();
  }).join();
  EXPECT_TRUE(reader_got_it);
}

}  // namespace
}  // namespace shepherd
