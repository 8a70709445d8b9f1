// PlanRunner: the planner's own thread. A planner search (scheduler/planner.h: spec and hardware in, an
// estimate out) takes a fraction of a second for realistic jobs but up to tens of seconds for specs at the
// input limits; run on the control thread it held up every report, heartbeat and tick for that long, so an
// agent's lease ran out and a running job was fenced by one POST /v1/plan. The control thread reads what
// a search needs (Controller::HardwareFor, O(1)) and hands the search here; the search takes no lock and
// reads nothing of the controller; its answer goes to the HTTP session (Respond is thread-safe) or back to
// the control thread through the controller's post.
//
// Owns: one thread and the tasks waiting for it. Bounded: at most `capacity` tasks waiting or running;
// Run() refuses beyond (the routes answer 429 with Retry-After), so a flood of plans costs the planner
// thread only. Tasks run in the order given, one at a time, at a lower CPU priority than the control
// thread (nice 10, like the reader thread).
//
// Threading: Run() from any thread. The destructor lets the task in progress finish, drops the ones still
// waiting (at shutdown: their connections are closed) and joins the thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace shepherd {

class PlanRunner {
 public:
  explicit PlanRunner(std::size_t capacity);
  ~PlanRunner();
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  // Queues `task`; false (the task is dropped) when `capacity` tasks are already waiting or running.
  bool Run(std::function<void()> task);
  // Searches waiting or running (the /metrics gauge shepherd_planner_searches).
  std::size_t pending() const;

 private:
  void Loop();

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> waiting_;  // guarded by mu_
  bool running_ = false;                       // a task is in progress; guarded by mu_
  bool stopping_ = false;                      // guarded by mu_
  std::thread thread_;                         // last: starts after the fields above exist
};

}  // namespace shepherd
