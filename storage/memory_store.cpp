// NewMemoryStore(): the Store contract in memory. Batches apply atomically under one mutex; `done` runs on
// the caller's thread after the lock is released, so it may call Write again.
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "storage/store.h"

namespace shepherd {
namespace {

class MemoryStore final : public Store {
 public:
  Result<Snapshot> Load() override {
    std::lock_guard<std::mutex> lock(mu_);
    Snapshot snapshot;
    snapshot.records.reserve(by_order_.size());
    for (const auto& [seq, record] : by_order_) snapshot.records.push_back(record);
    return snapshot;
  }

  void Write(WriteBatch batch, std::function<void(Status)> done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (WriteBatch::Op& op : batch.ops) Apply(op);
    }
    if (done) done(Status::Ok());
  }

  void Flush() override {}  // every Write has completed by the time it returns

  Status Quarantine(const Record& r, const std::string&) override {
    WriteBatch::Op op{true, r};
    std::lock_guard<std::mutex> lock(mu_);
    Apply(op);
    return Status::Ok();
  }

 private:
  // Like the SQLite rowid: a replaced record keeps its place; an erased then re-put record goes last.
  void Apply(WriteBatch::Op& op) {
    auto key = std::make_pair(op.record.collection, op.record.key);
    auto it = seq_by_key_.find(key);
    if (op.erase) {
      if (it == seq_by_key_.end()) return;
      by_order_.erase(it->second);
      seq_by_key_.erase(it);
    } else if (it != seq_by_key_.end()) {
      by_order_[it->second] = std::move(op.record);
    } else {
      seq_by_key_.emplace(std::move(key), next_seq_);
      by_order_.emplace(next_seq_++, std::move(op.record));
    }
  }

  std::mutex mu_;
  uint64_t next_seq_ = 0;                                              // guarded by mu_
  std::map<std::pair<Collection, std::string>, uint64_t> seq_by_key_;  // guarded by mu_
  std::map<uint64_t, Record> by_order_;                                // guarded by mu_
};

}  // namespace

std::unique_ptr<Store> NewMemoryStore() {
  return std::make_unique<MemoryStore>();
}

}  // namespace shepherd
