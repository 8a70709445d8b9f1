#include "storage/sqlite_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <utility>

#include "storage/db_file.h"
#include "storage/schema.h"

namespace shepherd {
namespace {

std::optional<Collection> ParseCollection(const std::string& s) {
  for (Collection c : {Collection::kNodes, Collection::kJobs, Collection::kAttempts, Collection::kCheckpoints,
                       Collection::kFindings, Collection::kMeta}) {
    if (s == ToString(c)) return c;
  }
  return std::nullopt;
}

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, i)) : std::string();
}

void BindText(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

Result<SqliteStore::Settings> Configure(sqlite3* db, const SqliteOptions& options) {
  if (sqlite3_busy_timeout(db, options.busy_timeout_ms) != SQLITE_OK) return SqliteError(db, "busy_timeout");
  for (const char* pragma : {"PRAGMA synchronous = FULL", "PRAGMA foreign_keys = ON"}) {
    if (Status s = Exec(db, pragma); !s.ok()) return s;
  }
  SqliteStore::Settings settings;
  Result<std::string> mode = QueryText(db, "PRAGMA journal_mode = WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") return Unavailable("cannot enable WAL (journal_mode is " + *mode + ")");
  settings.journal_mode = *mode;
  Result<std::string> sync = QueryText(db, "PRAGMA synchronous");
  Result<std::string> fk = QueryText(db, "PRAGMA foreign_keys");
  Result<std::string> busy = QueryText(db, "PRAGMA busy_timeout");
  if (!sync.ok()) return sync.status();
  if (!fk.ok()) return fk.status();
  if (!busy.ok()) return busy.status();
  settings.synchronous = std::atoi(sync->c_str());
  settings.foreign_keys = std::atoi(fk->c_str());
  settings.busy_timeout_ms = std::atoi(busy->c_str());
  return settings;
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteOptions options) {
  if (options.max_batches_per_commit < 1) return InvalidArgument("max_batches_per_commit must be at least 1");
  if (options.busy_timeout_ms < 0) return InvalidArgument("busy_timeout_ms must not be negative");
  if (options.lock_wait_ms < 0) return InvalidArgument("lock_wait_ms must not be negative");
  // The directory is never created: a mistyped or unmounted path must not start an empty daemon (which
  // would then show every agent's ranks as unknown).
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (std::error_code ec; !std::filesystem::is_directory(parent.empty() ? "." : parent, ec))
    return Unavailable("the directory of database " + path + " does not exist: " +
                       (parent.empty() ? std::string(".") : parent.string()) + " (create it first)");
  // A new database is created only where no file was: the lock below creates the file when it is missing,
  // and an empty or truncated one found there is refused untouched (read once the lock is held, so a
  // running daemon's writes are never mistaken for damage).
  std::error_code missing;
  const bool existed = std::filesystem::exists(path, missing);
  // The lock comes first: a second daemon must not even open (and possibly migrate) the database.
  Result<std::unique_ptr<FileLock>> lock = FileLock::Acquire(path + ".lock", path);
  if (!lock.ok()) return lock.status();
  if (existed)
    if (Status s = CheckDatabaseFile(path); !s.ok()) return s;

  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) return SqliteError(raw, "cannot open database " + path);

  auto opening_failed = [&](const Status& s) {
    return Unavailable("cannot open database " + path + ": " + s.message());
  };
  // Read only until the file is known to be ours: another application's database, a newer schema or a
  // file that is no database is refused as it was (no WAL switch, no chmod).
  if (Status s = CheckIsShepherdDatabase(db.get(), path, SchemaMigrations()); !s.ok()) return s;
  if (Status s = (*lock)->MakePrivate(path); !s.ok()) return s;
  Result<SqliteStore::Settings> settings = Configure(db.get(), options);
  if (!settings.ok()) return opening_failed(settings.status());
  if (Status s = Migrate(db.get(), path, SchemaMigrations()); !s.ok()) return s;

  Result<Stmt> upsert = Prepare(db.get(), kUpsertRecordSql);
  if (!upsert.ok()) return opening_failed(upsert.status());
  Result<Stmt> erase = Prepare(db.get(), kEraseRecordSql);
  if (!erase.ok()) return opening_failed(erase.status());

  return std::unique_ptr<Store>(new SqliteStore(path, options, std::move(db), std::move(*lock),
                                                std::move(*settings), std::move(*upsert), std::move(*erase)));
}

SqliteStore::SqliteStore(std::string path, SqliteOptions options, Db db, std::unique_ptr<FileLock> lock,
                         Settings settings, Stmt upsert, Stmt erase)
    : path_(std::move(path)),
      options_(options),
      settings_(std::move(settings)),
      lock_(std::move(lock)),
      db_(std::move(db)),
      upsert_(std::move(upsert)),
      erase_(std::move(erase)),
      writer_([this] { WriterLoop(); }) {}

SqliteStore::~SqliteStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  writer_.join();
  upsert_.reset();
  erase_.reset();
  db_.reset();  // checkpoints the WAL as the last connection closes
  lock_.reset();
}

Result<Snapshot> SqliteStore::Load() {
  Result<Stmt> stmt = Prepare(db_.get(), "SELECT collection, key, job, body FROM records ORDER BY rowid");
  if (!stmt.ok()) return stmt.status();
  Snapshot snapshot;
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    std::string name = ColumnText(stmt->get(), 0);
    std::optional<Collection> c = ParseCollection(name);
    if (!c) return Internal("database " + path_ + " holds records of unknown collection '" + name + "'");
    snapshot.records.push_back(
        Record{*c, ColumnText(stmt->get(), 1), ColumnText(stmt->get(), 2), ColumnText(stmt->get(), 3)});
  }
  if (rc != SQLITE_DONE) return SqliteError(db_.get(), "load " + path_);
  return snapshot;
}

Status SqliteStore::Quarantine(const Record& r, const std::string& reason) {
  sqlite3* db = db_.get();
  if (Status s = Exec(db, "BEGIN IMMEDIATE"); !s.ok()) return s;
  Status s;
  for (const char* sql : {"INSERT INTO records_quarantine (collection, key, job, body, reason, at) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                          "DELETE FROM records WHERE collection = ?1 AND key = ?2"}) {
    Result<Stmt> stmt = Prepare(db, sql);
    if (!stmt.ok()) {
      s = stmt.status();
      break;
    }
    BindText(stmt->get(), 1, ToString(r.collection));
    BindText(stmt->get(), 2, r.key);
    if (sqlite3_bind_parameter_count(stmt->get()) > 2) {
      BindText(stmt->get(), 3, r.job);
      BindText(stmt->get(), 4, r.body);
      BindText(stmt->get(), 5, reason);
    }
    if (sqlite3_step(stmt->get()) != SQLITE_DONE) {
      s = SqliteError(db, std::string("quarantine ") + ToString(r.collection) + "/" + r.key);
      break;
    }
  }
  if (s.ok()) s = Exec(db, "COMMIT");
  if (!s.ok()) Exec(db, "ROLLBACK");
  return s;
}

void SqliteStore::Write(WriteBatch batch, std::function<void(Status)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Pending{std::move(batch), std::move(done)});
    ++submitted_;
  }
  work_cv_.notify_one();
}

void SqliteStore::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = submitted_;
  flush_cv_.wait(lock, [&] { return finished_ >= target; });
}

SqliteStore::Stats SqliteStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void SqliteStore::WriterLoop() {
  for (;;) {
    std::deque<Pending> group;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      const size_t n = std::min(queue_.size(), static_cast<size_t>(options_.max_batches_per_commit));
      group.insert(group.end(), std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
    }
    // A failed store touches the database no more: the batches fail with the original error.
    const bool was_ok = failure_.ok();
    Status result = was_ok ? Commit(group) : Status::Ok();
    if (was_ok && !result.ok()) {
      failure_ = Unavailable("storage failed: " + result.message());
    }
    Status outcome =
        failure_.ok() ? Status::Ok()
        : was_ok      ? failure_
                 : Unavailable("storage is failed since an earlier write error (" + failure_.message() + ")");
    for (Pending& p : group) {
      if (p.done) p.done(outcome);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (outcome.ok()) {
        ++stats_.commits;
        stats_.batches_committed += group.size();
      } else {
        stats_.batches_failed += group.size();
      }
      finished_ += group.size();
    }
    flush_cv_.notify_all();
  }
}

Status SqliteStore::Begin() {
  const auto start = std::chrono::steady_clock::now();
  bool waited = false;
  for (;;) {
    Status s = Exec(db_.get(), "BEGIN IMMEDIATE");  // sqlite itself retries for busy_timeout_ms first
    const bool busy = !s.ok() && (sqlite3_errcode(db_.get()) & 0xff) == SQLITE_BUSY;
    const auto waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
            .count();
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
    }
    if (!busy || waited_ms >= options_.lock_wait_ms || stopping) {
      if (waited && s.ok()) spdlog::info("storage: {} is writable again after {} ms", path_, waited_ms);
      return s;
    }
    if (!waited)
      spdlog::warn(
          "storage: another connection holds the write lock on {} (a sqlite3 shell in a transaction? "
          "a tool writing?): writes wait for it, at most {} s, then the daemon stops",
          path_, options_.lock_wait_ms / 1000);
    waited = true;
  }
}

Status SqliteStore::Commit(const std::deque<Pending>& group) {
  if (Status s = Begin(); !s.ok()) return s;
  for (const Pending& p : group) {
    for (const WriteBatch::Op& op : p.batch.ops) {
      if (Status s = Apply(op); !s.ok()) {
        Exec(db_.get(), "ROLLBACK");
        return s;
      }
    }
  }
  if (Status s = Exec(db_.get(), "COMMIT"); !s.ok()) {
    // A failed COMMIT may leave the transaction open; a ROLLBACK on an autocommit connection is harmless.
    Exec(db_.get(), "ROLLBACK");
    return s;
  }
  return Status::Ok();
}

Status SqliteStore::Apply(const WriteBatch::Op& op) {
  sqlite3_stmt* s = op.erase ? erase_.get() : upsert_.get();
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  BindText(s, 1, ToString(op.record.collection));
  BindText(s, 2, op.record.key);
  if (!op.erase) {
    BindText(s, 3, op.record.job);
    BindText(s, 4, op.record.body);
  }
  Status result;
  if (sqlite3_step(s) != SQLITE_DONE) {  // read the message before reset can replace it
    result = SqliteError(db_.get(), std::string(op.erase ? "erase " : "put ") +
                                        ToString(op.record.collection) + "/" + op.record.key);
  }
  sqlite3_reset(s);
  return result;
}

}  // namespace shepherd
