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
  }
  wake_.notify_one();
  thread_.join();
}

bool PlanRunner::Run(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || waiting_.size() + (running_ ? 1 : 0) >= capacity_) return false;
    waiting_.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
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
    std::function<void()> task = std::move(waiting_.front());
    waiting_.pop_front();
    running_ = true;
    lock.unlock();
    task();
    task = nullptr;  // what the task captured (a Respond, a continuation) is released off the lock too
    lock.lock();
    running_ = false;
  }
}

}  // namespace shepherd
