// ControlLock: the lock that lets reads run beside the control thread.
//
// What it guards: the Controller and everything it owns (and what handlers reach through it). The
// control thread holds it exclusively while it runs one operation (a drain of the request queue, a tick,
// a store completion, a Slurm event: every function posted to it); the reader thread holds it shared
// while it runs one read route (GET lists and details, /metrics), which calls only the Controller's const
// methods. So a read waits at most for the one operation in progress, never for the queue of writes, and
// the control thread waits at most for the one read in progress, never for a read storm: the lock prefers
// writers (a waiting control thread goes before readers that arrive after it).
//
// Not recursive: code that holds it never takes it again (the control thread posts, it does not lock).
#pragma once

#include <pthread.h>

namespace shepherd {

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

  // The control thread (std::unique_lock).
  void lock() { pthread_rwlock_wrlock(&rw_); }
  void unlock() { pthread_rwlock_unlock(&rw_); }
  // The reader thread (std::shared_lock).
  void lock_shared() { pthread_rwlock_rdlock(&rw_); }
  void unlock_shared() { pthread_rwlock_unlock(&rw_); }
  bool try_lock() { return pthread_rwlock_trywrlock(&rw_) == 0; }
  bool try_lock_shared() { return pthread_rwlock_tryrdlock(&rw_) == 0; }

 private:
  pthread_rwlock_t rw_;
};

}  // namespace shepherd
