// Durable records. The store keeps typed collections of JSON documents keyed by id; the controller decides
// what they mean (core/json.h encodes the domain records). Everything is loaded once at start-up; after that
// the controller's memory is the read path and the store is written through one writer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace shepherd {

enum class Collection { kNodes, kJobs, kAttempts, kCheckpoints, kFindings, kMeta };
const char* ToString(Collection c);

struct Record {
  Collection collection = Collection::kMeta;
  std::string key;   // unique within the collection
  std::string job;   // owning job id, empty when none (lets a job's records be found and deleted)
  std::string body;  // JSON document
};

// One atomic unit: all of its operations commit together or none do.
struct WriteBatch {
  struct Op {
    bool erase = false;  // erase: delete record.collection/record.key; else insert-or-replace record
    Record record;
  };
  std::vector<Op> ops;
  void Put(Record r) { ops.push_back({false, std::move(r)}); }
  void Erase(Collection c, std::string key) { ops.push_back({true, Record{c, std::move(key), {}, {}}}); }
  bool empty() const { return ops.empty(); }
};

// Every record, per collection in insertion order of first write (rowid order).
struct Snapshot {
  std::vector<Record> records;
};

class Store {
 public:
  virtual ~Store() = default;

  // Every durable record. Called at start-up before the first Write; not concurrently with Write.
  virtual Result<Snapshot> Load() = 0;

  // Moves a record that cannot be decoded out of its collection, durably, into the quarantine (SQLite:
  // table records_quarantine, with `reason` and the time), so start-up can go on without it (--salvage).
  // Start-up only: after Load, before the first Write.
  virtual Status Quarantine(const Record& r, const std::string& reason) = 0;

  // Queues `batch`. Batches commit in submission order; several queued batches may share one COMMIT (group
  // commit). `done` runs exactly once, on the store's writer thread, after the COMMIT that holds the batch
  // (ok) or after it failed (the batch is then not durable, nor is any batch submitted after a failure:
  // a failed store stays failed). `done` must not block; post its work elsewhere.
  // Thread-safe.
  virtual void Write(WriteBatch batch, std::function<void(Status)> done) = 0;

  // Blocks until every batch queued before the call has been committed or failed. Thread-safe.
  // REQUIRES: not called from inside a `done` callback (it would wait for itself).
  virtual void Flush() = 0;
};

struct SqliteOptions {
  int busy_timeout_ms = 5000;
  int max_batches_per_commit = 1024;  // group-commit bound
  // How long a commit waits out another connection's write lock (an operator's sqlite3 shell in a
  // transaction, a tool writing) before the store fails: the writer thread waits, the daemon goes on
  // watching and answering, and what needs a durable write waits for it.
  int lock_wait_ms = 120000;
};

// Opens (creating the file if needed; its directory must exist) the SQLite database at `path`, takes an
// exclusive lock on it for the life of the returned store (a second process on the same path gets kConflict
// with a message naming the path), applies schema migrations, and starts the writer thread.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteOptions options = {});

// A store in memory with the same contract; `done` runs synchronously inside Write. For tests and
// benchmarks of the pure modules and the controller.
std::unique_ptr<Store> NewMemoryStore();

}  // namespace shepherd
