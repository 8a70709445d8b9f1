// ControlChannel: how the daemon's worker threads (the Slurm workers: daemon/slurm_sync_worker.h,
// daemon/slurm_launch_worker.h, daemon/slurm_job_asker.h) talk to the control thread. A worker posts a
// function there (Tell) or asks it a question and waits for the answer (Ask), bounded by a timeout and by
// Stop. Nothing a worker does blocks the control thread, and a blocked control thread never holds a worker
// past the timeout.
// Owns: the stop flag its posted functions check. Shared (std::shared_ptr) between the worker's owner, the
// worker thread and every function posted: a posted function may run after the worker is gone.
// Threading: Tell and Ask from any thread but the control thread (Ask waits for it); Stop and stopped from
// any thread. Posted functions run on the control thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "control/callbacks.h"

namespace shepherd {

// How long a worker waits for the control thread's answer before it logs and asks again (a control thread
// that long behind is stalled: the worker must not hang with it, nor act on orders it never got).
inline constexpr std::chrono::seconds kControlAnswerTimeout{120};

class ControlChannel : public std::enable_shared_from_this<ControlChannel> {
 public:
  static std::shared_ptr<ControlChannel> Create(Post post) {
    return std::shared_ptr<ControlChannel>(new ControlChannel(std::move(post)));
  }

  // Runs `f` on the control thread, unless the channel is stopped by then. `even_stopped`: run it anyway
  // (answers owed to callers that wait on the control thread, e.g. "the daemon is stopping").
  void Tell(std::function<void()> f, bool even_stopped = false) {
    post_([self = shared_from_this(), f = std::move(f), even_stopped] {
      if (even_stopped || !self->stopped()) f();
    });
  }

  // Runs `ask` on the control thread with a `reply` function (which it may call later, e.g. once a commit
  // is durable) and waits for the reply. nullopt when the channel is stopped (before or while waiting) or
  // no reply came within `timeout` (stopped() tells which); a reply that comes later is dropped.
  template <typename T>
  std::optional<T> Ask(std::function<void(std::function<void(T)> reply)> ask,
                       std::chrono::milliseconds timeout) {
    auto slot = std::make_shared<std::optional<T>>();
    Tell([self = shared_from_this(), slot, ask = std::move(ask)] {
      ask([self, slot](T answer) {
        {
          std::lock_guard lock(self->mu_);
          *slot = std::move(answer);
        }
        self->cv_.notify_all();
      });
    });
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return stopping_ || slot->has_value(); });
    if (stopping_ || !slot->has_value()) return std::nullopt;
    return std::move(*slot);
  }

  // Wakes every Ask (they return nullopt) and turns later posted functions into no-ops. Idempotent.
  void Stop() {
    stopped_ = true;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }
  bool stopped() const { return stopped_; }

 private:
  explicit ControlChannel(Post post) : post_(std::move(post)) {}

  Post post_;
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
};

}  // namespace shepherd
