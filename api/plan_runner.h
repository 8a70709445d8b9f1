// PlanRunner: the planner's own thread. A planner search (planner/planner.h: spec and hardware in, an
// estimate out) takes a fraction of a second for realistic jobs but up to tens of seconds for specs at the
// input limits; run on the control thread it held up every report, heartbeat and tick for that long, so an
// agent's lease ran out and a running job was fenced by one POST /v1/plan. The control thread reads what
// a search needs (Controller::HardwareFor, O(1)) and hands the search here; the search takes no lock and
// reads nothing of the controller; its answer goes to the HTTP session (Respond is thread-safe) or back to
// the control thread through the controller's post.
//
// Owns: one thread and the tasks waiting for it. Bounded: at most `capacity` tasks waiting or running, and
// at most each share's limit of them per share a task is counted in (the routes count a task under the
// caller's identity, and a viewer's also under all viewers together: docs/security.md, "Scopes"); Run()
// refuses beyond (the routes answer 429 with Retry-After), so a flood of plans costs the planner thread
// only, and one identity cannot hold every place in the queue in front of everyone's submits. Tasks run in
// the order given, one at a time, at a lower CPU priority than the control thread (nice 10, like the reader
// thread).
//
// Threading: Run() from any thread. The destructor lets the task in progress finish, drops the ones still
// waiting (at shutdown: their connections are closed) and joins the thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shepherd {

class PlanRunner {
 public:
  explicit PlanRunner(std::size_t capacity);
  ~PlanRunner();
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  // A group of tasks counted together ("viewer:grafana"), and how many of them may wait or run at once.
  struct Share {
    std::string key;
    std::size_t limit = 0;
  };
  // Queues `task`; false (the task is dropped) when `capacity` tasks are already waiting or running, or
  // a share in `shares` already holds its limit.
  bool Run(std::function<void()> task, std::vector<Share> shares = {});
  // Searches waiting or running (the /metrics gauge shepherd_planner_searches).
  std::size_t pending() const;

 private:
  void Loop();

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  struct Task {
    std::function<void()> run;
    std::vector<std::string> shares;  // the keys it is counted under
  };
  void Release(const Task& t);  // REQUIRES: mu_ held

  std::deque<Task> waiting_;                 // guarded by mu_
  std::map<std::string, std::size_t> held_;  // tasks waiting or running per share key; guarded by mu_
  bool running_ = false;                     // a task is in progress; guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;                       // last: starts after the fields above exist
};

}  // namespace shepherd
