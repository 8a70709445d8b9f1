#include "api/request_queue.h"

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
  if (method == "POST" && path.substr(0, 9) == "/v1/jobs/" && EndsWith(path, "/reports"))
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
    // While reports and heartbeats are backlogged, one write and one read per round keep them from
    // starving without taking the time ingestion needs; the rest wait (and are refused once full).
    const bool backlog = !queues_[static_cast<int>(RequestClass::kPriority)].empty();
    take(RequestClass::kWrite, backlog ? 1 : kOtherBurst);
    take(RequestClass::kRead, backlog ? 1 : kOtherBurst);
  }
  for (std::size_t i = 0; i < round.size(); ++i) {
    round[i]();
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
      for (Task& t : urgent) t();
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
