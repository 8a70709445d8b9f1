// RequestQueue: the bounded, prioritised hand-off of HTTP requests from the I/O thread to the thread that
// runs them. The daemon has two: the control thread's (priority and write) and the reader thread's (read;
// api/front_door.h). Three classes, each with its own bound (each route's is in the route table,
// api/route_table.h):
//   kPriority - rank reports and agent heartbeats (what liveness is judged from): always served first;
//   kWrite    - every other request that is not a plain read (submit, register, patch, long polls, ...);
//   kRead     - GET/HEAD reads (lists, details, /metrics).
// A request that finds its class full is refused at once (the caller answers 429 with Retry-After), so a
// read storm or a burst of submissions can delay only its own class, never ingestion.
//
// Threading: Offer() is called on the I/O thread (thread-safe: a mutex guards the deques only, never held
// while a task runs). Drain() runs on the consuming thread: the queue posts it there through `post` whenever
// work is waiting and no drain is scheduled. One drain runs every waiting priority task (up to
// kPriorityBurst), then up to kOtherBurst writes and kOtherBurst reads. While priority tasks are still
// waiting (a backlog), writes and reads get one each per round and none while they took more than
// kOtherShare of the control thread's recent time (measured per task, decayed per round): a backlog of
// reports is not made worse by reads. A round ends early once it has run for kRoundBudget (the tasks not run
// go back to the front of their queues, in order), and a drain posts itself again when work remains, so
// store completions, ticks and signals queued on the control thread get their turn between rounds and no
// round holds the control thread much longer than kRoundBudget plus one task.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

namespace shepherd {

enum class RequestClass { kPriority = 0, kWrite = 1, kRead = 2 };
const char* ToString(RequestClass c);

struct RequestQueueLimits {
  std::size_t priority = 65536;
  std::size_t write = 4096;
  std::size_t read = 1024;
};

class RequestQueue {
 public:
  using Task = std::function<void()>;
  using Post = std::function<void(std::function<void()>)>;

  // `post` schedules a function on the control thread (e.g. asio::post onto its io_context).
  RequestQueue(RequestQueueLimits limits, Post post) : limits_(limits), post_(std::move(post)) {}

  // Queues `task`; false (task dropped) when its class is at its bound. Thread-safe.
  bool Offer(RequestClass c, Task task);
  // Tasks waiting in class `c`. Thread-safe.
  std::size_t depth(RequestClass c) const;

  // Runs one round (see above). Called by the posted drain; public for tests.
  void Drain();

  static constexpr std::size_t kPriorityBurst = 256;
  static constexpr std::size_t kOtherBurst = 8;
  static constexpr double kOtherShare = 0.1;
  static constexpr double kDecay = 0.9;
  static constexpr std::chrono::milliseconds kRoundBudget{20};

 private:
  std::size_t Limit(RequestClass c) const;

  const RequestQueueLimits limits_;
  const Post post_;
  mutable std::mutex mu_;
  std::array<std::deque<Task>, 3> queues_;  // by RequestClass
  bool drain_scheduled_ = false;
  // Control thread only (Drain): recent seconds spent on priority tasks and on the others.
  double priority_s_ = 0;
  double other_s_ = 0;
};

}  // namespace shepherd
