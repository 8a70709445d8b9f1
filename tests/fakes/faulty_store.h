// A Store wrapper that injects write failures, for testing how callers handle a failing store (the
// error-injecting Env idea from LevelDB). Header-only; link shepherd_fakes and shepherd_storage.
//
// A failed write calls `done` with kUnavailable "injected fault" synchronously on the caller's thread and
// never reaches the inner store; a held write waits until ReleaseHeld. Other writes, Load and Flush pass
// through. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "storage/store.h"

namespace shepherd {

class FaultyStore final : public Store {
 public:
  explicit FaultyStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

  // The next `n` writes fail (added to any already pending).
  void FailNextWrites(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ += n;
  }
  // Every write from now on fails, until Heal().
  void FailAllWrites() {
    std::lock_guard<std::mutex> lock(mu_);
    fail_all_ = true;
  }
  // Writes from now on wait, their `done` not called (a stalled disk, another connection's write lock),
  // until ReleaseHeld hands them to the inner store in order.
  void HoldWrites() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
  }
  void ReleaseHeld() {
    std::vector<std::pair<WriteBatch, std::function<void(Status)>>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = false;
      held.swap(held_);
    }
    for (auto& [batch, done] : held) inner_->Write(std::move(batch), std::move(done));
  }
  // Cancels pending and permanent faults.
  void Heal() {
    std::lock_guard<std::mutex> lock(mu_);
    fail_all_ = false;
    fail_next_ = 0;
  }

  int64_t writes_seen() const { return Get(&Counters::seen); }      // every Write call
  int64_t writes_failed() const { return Get(&Counters::failed); }  // failed by injection
  int64_t writes_passed() const { return Get(&Counters::passed); }  // handed to the inner store

  Store& inner() { return *inner_; }

  Result<Snapshot> Load() override { return inner_->Load(); }
  Status Quarantine(const Record& r, const std::string& reason) override {
    return inner_->Quarantine(r, reason);
  }

  void Write(WriteBatch batch, std::function<void(Status)> done) override {
    bool fail = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.seen;
      if (fail_all_) {
        fail = true;
      } else if (fail_next_ > 0) {
        --fail_next_;
        fail = true;
      }
      ++(fail ? counters_.failed : counters_.passed);
    }
    if (fail) {
      if (done) done(Unavailable("injected fault"));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (hold_) {
        held_.emplace_back(std::move(batch), std::move(done));
        return;
      }
    }
    inner_->Write(std::move(batch), std::move(done));
  }

  void Flush() override { inner_->Flush(); }

 private:
  bool hold_ = false;
  std::vector<std::pair<WriteBatch, std::function<void(Status)>>> held_;
  struct Counters {
    int64_t seen = 0;
    int64_t failed = 0;
    int64_t passed = 0;
  };
  int64_t Get(int64_t Counters::*field) const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_.*field;
  }

  std::unique_ptr<Store> inner_;
  mutable std::mutex mu_;
  int fail_next_ = 0;      // guarded by mu_
  bool fail_all_ = false;  // guarded by mu_
  Counters counters_;      // guarded by mu_
};

}  // namespace shepherd
