// Helpers for storage tests: a temporary directory, synchronous writes, and a second, independent SQLite
// connection to inspect or tamper with a database behind the store's back.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "storage/store.h"

namespace shepherd::testing {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "shepherd-storage-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline Record Rec(Collection c, std::string key, std::string body, std::string job = "") {
  return Record{c, std::move(key), std::move(job), std::move(body)};
}

inline WriteBatch PutBatch(std::vector<Record> records) {
  WriteBatch b;
  for (Record& r : records) b.Put(std::move(r));
  return b;
}

// Writes `batch` and waits for its done.
inline Status WriteSync(Store& store, WriteBatch batch) {
  std::promise<Status> p;
  std::future<Status> f = p.get_future();
  store.Write(std::move(batch), [&p](Status s) { p.set_value(std::move(s)); });
  return f.get();
}

// "collection/key=body" for each record, in order: compact expectations.
inline std::vector<std::string> Describe(const Snapshot& s) {
  std::vector<std::string> out;
  for (const Record& r : s.records)
    out.push_back(std::string(ToString(r.collection)) + "/" + r.key + "=" + r.body);
  return out;
}

// An independent connection to a database file (what another process would see).
class RawDb {
 public:
  explicit RawDb(const std::string& path, bool read_only = false) {
    sqlite3_open_v2(path.c_str(), &db_,
                    read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  // Runs `sql`; returns sqlite's error message, or empty on success.
  std::string Exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK) return {};
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return msg.empty() ? "error" : msg;
  }
  // The first column of every row, as text ("<error: ...>" on failure).
  std::vector<std::string> Column(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      return {"<error: " + std::string(sqlite3_errmsg(db_)) + ">"};
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(s, 0);
      out.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    if (rc != SQLITE_DONE) out.push_back("<error: " + std::string(sqlite3_errmsg(db_)) + ">");
    sqlite3_finalize(s);
    return out;
  }
  std::string One(const std::string& sql) {
    std::vector<std::string> c = Column(sql);
    return c.empty() ? "<no rows>" : c[0];
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace shepherd::testing
