#include "api/request_queue.h"

#include <chrono>
#include <utility>

namespace shepherd {
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
  std::vector<std::pair<RequestClass, Task>> round;
  std::size_t round_priority = 0;
  {
    std::lock_guard lock(mu_);
    auto take = [&](RequestClass c, std::size_t n) {
      auto& q = queues_[static_cast<int>(c)];
      for (; n > 0 && !q.empty(); --n) {
        round.emplace_back(c, std::move(q.front()));
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
  const auto round_start = std::chrono::steady_clock::now();
  auto over_budget = [&] { return std::chrono::steady_clock::now() - round_start > kRoundBudget; };
  // Tasks not run when the round ends early go back to the front of their queues, in their order.
  auto give_back = [this](std::vector<std::pair<RequestClass, Task>>::iterator from,
                          std::vector<std::pair<RequestClass, Task>>::iterator to) {
    std::lock_guard lock(mu_);
    for (auto it = to; it != from;) {
      --it;
      queues_[static_cast<int>(it->first)].push_front(std::move(it->second));
    }
  };
  const std::size_t priority_tasks = round_priority;
  for (std::size_t i = 0; i < round.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    round[i].second();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (i < priority_tasks ? priority_s_ : other_s_) += took;
    if (i + 1 < round.size() && over_budget()) {
      give_back(round.begin() + static_cast<std::ptrdiff_t>(i + 1), round.end());
      break;
    }
    // Reports and heartbeats that arrived while a write or read ran go before the rest of the round.
    if (i + 1 < round.size() && depth(RequestClass::kPriority) > 0) {
      std::vector<std::pair<RequestClass, Task>> urgent;
      {
        std::lock_guard lock(mu_);
        auto& q = queues_[static_cast<int>(RequestClass::kPriority)];
        for (std::size_t n = 0; n < kPriorityBurst && !q.empty(); ++n) {
          urgent.emplace_back(RequestClass::kPriority, std::move(q.front()));
          q.pop_front();
        }
      }
      const auto t0 = std::chrono::steady_clock::now();
      bool ended = false;
      for (std::size_t k = 0; k < urgent.size() && !ended; ++k) {
        urgent[k].second();
        if (over_budget()) {
          // The round's own tasks are older: they go in front of the urgent ones.
          give_back(urgent.begin() + static_cast<std::ptrdiff_t>(k + 1), urgent.end());
          give_back(round.begin() + static_cast<std::ptrdiff_t>(i + 1), round.end());
          ended = true;
        }
      }
      priority_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (ended) break;
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
