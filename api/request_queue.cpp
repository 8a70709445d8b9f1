#include "api/request_queue.h"

#include <chrono>
#include <utility>

namespace shepherd {
namespace {

bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

const char* ToString(RequestClass c) {
  switch (c) {
    case RequestClass::kPriority:
      return "priority";
    case RequestClass::kWrite:
      return "write";
    case RequestClass::kRead:
      return "read";
  }
  return "?";
}

RequestClass ClassOf(std::string_view method, std::string_view path) {
  if (method == "POST" && (path.starts_with("/v1/jobs/") || path.starts_with("/v1/external/slurm/")) &&
      EndsWith(path, "/reports"))
    return RequestClass::kPriority;
  if (method == "POST" && path.substr(0, 10) == "/v1/nodes/" && EndsWith(path, "/heartbeat"))
    return RequestClass::kPriority;
  if ((method == "GET" || method == "HEAD") && !EndsWith(path, "/assignments")) return RequestClass::kRead;
  return RequestClass::kWrite;
}

std::size_t RequestQueue::Limit(RequestClass c) const {
  switch (c) {
    case RequestClass::kPriority:
      return limits_.priority;
    case RequestClass::kWrite:
      return limits_.write;
    case RequestClass::kRead:
      return limits_.read;
  }
  return 0;
}

bool RequestQueue::Offer(RequestClass c, Task task) {
  bool schedule = false;
  {
    std::lock_guard lock(mu_);
    auto& q = queues_[static_cast<int>(c)];
    if (q.size() >= Limit(c)) return false;
    q.push_back(std::move(task));
    schedule = !drain_scheduled_;
    drain_scheduled_ = true;
  }
  if (schedule) post_([this] { Drain(); });
  return true;
}

std::size_t RequestQueue::depth(RequestClass c) const {
  std::lock_guard lock(mu_);
  return queues_[static_cast<int>(c)].size();
}

void RequestQueue::Drain() {
  // Take the round's tasks under the lock, run them without it.
  std::vector<Task> round;
  std::size_t round_priority = 0;
  {
    std::lock_guard lock(mu_);
    auto take = [&](RequestClass c, std::size_t n) {
      auto& q = queues_[static_cast<int>(c)];
      for (; n > 0 && !q.empty(); --n) {
        round.push_back(std::move(q.front()));
        q.pop_front();
      }
    };
    take(RequestClass::kPriority, kPriorityBurst);
    round_priority = round.size();
    // While reports and heartbeats are backlogged, writes and reads get at most kOtherShare of the
    // control thread's recent time (one of each per round, and none while over that share); the rest wait
    // (and are refused once their queue is full). Without a backlog they get kOtherBurst each per round.
    const bool backlog = !queues_[static_cast<int>(RequestClass::kPriority)].empty();
    const bool over_share = other_s_ > kOtherShare * (priority_s_ + other_s_);
    const std::size_t others = !backlog ? kOtherBurst : over_share ? 0 : 1;
    take(RequestClass::kWrite, others);
    take(RequestClass::kRead, others);
    priority_s_ *= kDecay;
    other_s_ *= kDecay;
  }
  const std::size_t priority_tasks = round_priority;
  for (std::size_t i = 0; i < round.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    round[i]();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (i < priority_tasks ? priority_s_ : other_s_) += took;
    // Reports and heartbeats that arrived while a write or read ran go before the rest of the round.
    if (i + 1 < round.size() && depth(RequestClass::kPriority) > 0) {
      std::vector<Task> urgent;
      {
        std::lock_guard lock(mu_);
        auto& q = queues_[static_cast<int>(RequestClass::kPriority)];
        for (std::size_t n = 0; n < kPriorityBurst && !q.empty(); ++n) {
          urgent.push_back(std::move(q.front()));
          q.pop_front();
        }
      }
      const auto t0 = std::chrono::steady_clock::now();
      for (Task& t : urgent) t();
      priority_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  bool again = false;
  {
    std::lock_guard lock(mu_);
    for (const auto& q : queues_) again = again || !q.empty();
    drain_scheduled_ = again;
  }
  if (again) post_([this] { Drain(); });
}

}  // namespace shepherd
