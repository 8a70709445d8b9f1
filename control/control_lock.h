// ControlLock: the lock that lets reads run beside the control thread, and kControl, the capability the
// compiler's thread-safety analysis (core/thread_annotations.h) knows it by.
//
// What it guards: the Controller and everything it owns (and what handlers reach through it). The
// control thread holds it exclusively while it runs one operation (a drain of the request queue, a tick,
// a store completion, a Slurm event: every function posted to it; ControlHold); the reader thread holds it
// shared while it runs one read route (GET lists and details, /metrics; ControlReadHold), which calls only
// the Controller's const methods. So a read waits at most for the one operation in progress, never for the
// queue of writes, and the control thread waits at most for the one read in progress, never for a read
// storm: the lock prefers writers (a waiting control thread goes before readers that arrive after it).
//
// Not recursive: code that holds it never takes it again (the control thread posts, it does not lock).
//
// The analysis: state the control thread owns is GUARDED_BY(kControl); owners' mutators REQUIRES(kControl),
// their const methods REQUIRES_SHARED(kControl). A process has one ControlLock (the daemon's), so every
// ControlLock acquires the one kControl. Code that is handed control state without a lock in sight (the
// Controller's methods, reached through std::function from the daemon's loop, and its callbacks) states
// where it runs with ControlThread: Assert() (the control thread: kControl exclusive) or AssertShared()
// (the control thread, or a thread holding a ControlReadHold: kControl shared). Both check the thread in
// debug builds (NDEBUG off) and abort, printing the caller's address, when it is wrong.
#pragma once

#include <pthread.h>

#include <thread>

#include "core/thread_annotations.h"

namespace shepherd {

// The capability "control state": held exclusively by the control thread while it runs an operation,
// shared by the reader thread while it runs a read route. It has no state; only the analysis sees it.
class CAPABILITY("control state") ControlCapability {};
inline ControlCapability kControl;

class ControlLock {
 public:
  ControlLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&rw_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~ControlLock() { pthread_rwlock_destroy(&rw_); }
  ControlLock(const ControlLock&) = delete;
  ControlLock& operator=(const ControlLock&) = delete;

  // The control thread (ControlHold). The analysis takes these as given (it cannot see into pthreads).
  void lock() ACQUIRE(kControl) NO_THREAD_SAFETY_ANALYSIS { pthread_rwlock_wrlock(&rw_); }
  void unlock() RELEASE(kControl) NO_THREAD_SAFETY_ANALYSIS { pthread_rwlock_unlock(&rw_); }
  // The reader thread (ControlReadHold).
  void lock_shared() ACQUIRE_SHARED(kControl) NO_THREAD_SAFETY_ANALYSIS {
    pthread_rwlock_rdlock(&rw_);
    ++reads_held_here_;
  }
  void unlock_shared() RELEASE_SHARED(kControl) NO_THREAD_SAFETY_ANALYSIS {
    --reads_held_here_;
    pthread_rwlock_unlock(&rw_);
  }
  bool try_lock() TRY_ACQUIRE(true, kControl) NO_THREAD_SAFETY_ANALYSIS {
    return pthread_rwlock_trywrlock(&rw_) == 0;
  }
  bool try_lock_shared() TRY_ACQUIRE_SHARED(true, kControl) NO_THREAD_SAFETY_ANALYSIS {
    if (pthread_rwlock_tryrdlock(&rw_) != 0) return false;
    ++reads_held_here_;
    return true;
  }
  // Whether the calling thread holds a ControlLock shared (ControlThread::AssertShared's check).
  static bool ReadHeldHere() { return reads_held_here_ > 0; }

 private:
  pthread_rwlock_t rw_;
  static inline thread_local int reads_held_here_ = 0;
};

// Holds the lock exclusively for its lifetime: one operation of the control thread.
class SCOPED_CAPABILITY ControlHold {
 public:
  explicit ControlHold(ControlLock& lock) ACQUIRE(kControl) : lock_(lock) { lock_.lock(); }
  ~ControlHold() RELEASE() { lock_.unlock(); }
  ControlHold(const ControlHold&) = delete;
  ControlHold& operator=(const ControlHold&) = delete;

 private:
  ControlLock& lock_;
};

// Holds the lock shared for its lifetime: one read route on the reader thread.
class SCOPED_CAPABILITY ControlReadHold {
 public:
  explicit ControlReadHold(ControlLock& lock) ACQUIRE_SHARED(kControl) : lock_(lock) { lock_.lock_shared(); }
  ~ControlReadHold() RELEASE() { lock_.unlock_shared(); }
  ControlReadHold(const ControlReadHold&) = delete;
  ControlReadHold& operator=(const ControlReadHold&) = delete;

 private:
  ControlLock& lock_;
};

// The control thread of one Controller: the thread that constructed it (the daemon's loop thread; a unit
// test's own thread). Control-thread code asserts it at its top.
class ControlThread {
 public:
  ControlThread() : id_(std::this_thread::get_id()) {}
  // Whether the calling thread is the control thread (checked in every build).
  bool IsCurrent() const { return std::this_thread::get_id() == id_; }
  // A mutator: the caller is the control thread. Debug builds abort otherwise.
  void Assert() const ASSERT_CAPABILITY(kControl);
  // A read: the caller is the control thread or holds a ControlReadHold. Debug builds abort otherwise.
  void AssertShared() const ASSERT_SHARED_CAPABILITY(kControl);

 private:
  std::thread::id id_;
};

}  // namespace shepherd
