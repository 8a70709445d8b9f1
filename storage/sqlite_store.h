// The SQLite Store. Most code needs only storage/store.h and OpenSqliteStore(); this header exposes the
// concrete class for tests and diagnostics (statistics, the settings in effect).
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "storage/file_lock.h"
#include "storage/sqlite_util.h"
#include "storage/store.h"

namespace shepherd {

// Thread-safety: Write, Flush and stats() from any thread; Load per Store's contract. Flush must not be
// called from a `done` callback (it would wait for the writer thread that is running the callback).
class SqliteStore final : public Store {
 public:
  struct Stats {
    uint64_t commits = 0;            // successful COMMITs (each holds one or more batches)
    uint64_t batches_committed = 0;  // batches whose done got ok
    uint64_t batches_failed = 0;     // batches whose done got an error
  };
  // Values read back from the connection after opening, to show what is in effect.
  struct Settings {
    std::string journal_mode;  // "wal"
    int synchronous = -1;      // 2 == FULL
    int foreign_keys = -1;     // 1 == ON
    int busy_timeout_ms = -1;
  };

  // Use OpenSqliteStore(). Takes ownership of an open, migrated connection and the database's lock.
  SqliteStore(std::string path, SqliteOptions options, Db db, std::unique_ptr<FileLock> lock,
              Settings settings, Stmt upsert, Stmt erase);
  // Commits or fails everything queued, stops the writer, closes the database, then releases the lock.
  // REQUIRES: no Write or Flush concurrent with or after destruction.
  ~SqliteStore() override;

  Result<Snapshot> Load() override;
  Status Quarantine(const Record& r, const std::string& reason) override;
  void Write(WriteBatch batch, std::function<void(Status)> done) override;
  void Flush() override;

  Stats stats() const;
  const Settings& settings() const { return settings_; }
  const std::string& path() const { return path_; }

 private:
  struct Pending {
    WriteBatch batch;
    std::function<void(Status)> done;
  };

  void WriterLoop();
  // Applies `group` in one transaction. On error the transaction is rolled back.
  Status Commit(const std::deque<Pending>& group);
  // BEGIN IMMEDIATE, retried while another connection holds the write lock (busy) for up to
  // options_.lock_wait_ms; a busy BEGIN has changed nothing. Logs the wait once and its end.
  Status Begin();
  Status Apply(const WriteBatch::Op& op);

  const std::string path_;
  const SqliteOptions options_;
  const Settings settings_;
  std::unique_ptr<FileLock> lock_;  // declared before db_ so that it is released after the close
  // Owned by the writer thread once it starts (and by Load before the first Write).
  Db db_;
  Stmt upsert_;
  Stmt erase_;
  Status failure_;  // writer thread only: the error that failed the store, ok while healthy

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // writer waits: queue non-empty or stopping
  std::condition_variable flush_cv_;  // Flush waits: finished_ caught up
  std::deque<Pending> queue_;         // guarded by mu_
  uint64_t submitted_ = 0;            // guarded by mu_: batches ever queued
  uint64_t finished_ = 0;             // guarded by mu_: batches whose done has returned
  bool stopping_ = false;             // guarded by mu_
  Stats stats_;                       // guarded by mu_

  std::thread writer_;  // last: starts after every member above is constructed
};

}  // namespace shepherd
