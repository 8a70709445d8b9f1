#include "api/plan_runner.h"

#include <sys/resource.h>
#include <unistd.h>

namespace shepherd {

namespace {
constexpr int kPlannerNice = 10;  // below the control thread, as the reader thread
}  // namespace

PlanRunner::PlanRunner(std::size_t capacity) : capacity_(capacity), thread_([this] { Loop(); }) {}

PlanRunner::~PlanRunner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    waiting_.clear();
    held_.clear();
  }
  wake_.notify_one();
  thread_.join();
}

bool PlanRunner::Run(std::function<void()> task, std::vector<Share> shares) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || waiting_.size() + (running_ ? 1 : 0) >= capacity_) return false;
    for (const Share& s : shares)
      if (auto it = held_.find(s.key); it != held_.end() && it->second >= s.limit) return false;
    Task t{std::move(task), {}};
    for (Share& s : shares) {
      ++held_[s.key];
      t.shares.push_back(std::move(s.key));
    }
    waiting_.push_back(std::move(t));
  }
  wake_.notify_one();
  return true;
}

void PlanRunner::Release(const Task& t) {
  for (const std::string& key : t.shares)
    if (auto it = held_.find(key); it != held_.end() && --it->second == 0) held_.erase(it);
}

std::size_t PlanRunner::pending() const {
  std::lock_guard lock(mu_);
  return waiting_.size() + (running_ ? 1 : 0);
}

void PlanRunner::Loop() {
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kPlannerNice);  // failure is harmless
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
    if (stopping_) return;
    Task task = std::move(waiting_.front());
    waiting_.pop_front();
    running_ = true;
    lock.unlock();
    task.run();
    task.run = nullptr;  // what the task captured (a Respond, a continuation) is released off the lock too
    lock.lock();
    running_ = false;
    Release(task);
  }
}

}  // namespace shepherd
