// ControlThread and ControlLock's per-thread read count: what the debug builds' thread assertions check.
#include "control/control_lock.h"

#include <gtest/gtest.h>

#include <thread>

namespace shepherd {
namespace {

TEST(ControlThreadTest, TheConstructingThreadIsTheControlThread) {
  ControlThread control;
  EXPECT_TRUE(control.IsCurrent());
  bool elsewhere = true;
  std::thread([&] { elsewhere = control.IsCurrent(); }).join();
  EXPECT_FALSE(elsewhere);
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
