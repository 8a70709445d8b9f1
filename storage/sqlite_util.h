// Small RAII and error helpers over the SQLite C API. Internal to storage/.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>

#include "core/status.h"

namespace shepherd {

struct StmtDeleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

struct DbDeleter {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Db = std::unique_ptr<sqlite3, DbDeleter>;

// "<what>: <sqlite's message for db>".
inline Status SqliteError(sqlite3* db, const std::string& what) {
  return Unavailable(what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

// Runs one or more statements that return no rows of interest.
inline Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    return Unavailable("sqlite: " + msg + " (in: " + sql + ")");
  }
  return Status::Ok();
}

inline Result<Stmt> Prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
    return SqliteError(db, "prepare '" + sql + "'");
  }
  return Stmt(s);
}

// The first column of the first row of `sql` as text (empty when no row).
inline Result<std::string> QueryText(sqlite3* db, const std::string& sql) {
  Result<Stmt> stmt = Prepare(db, sql);
  if (!stmt.ok()) return stmt.status();
  int rc = sqlite3_step(stmt->get());
  if (rc == SQLITE_DONE) return std::string();
  if (rc != SQLITE_ROW) return SqliteError(db, "query '" + sql + "'");
  const unsigned char* text = sqlite3_column_text(stmt->get(), 0);
  return std::string(text ? reinterpret_cast<const char*>(text) : "");
}

}  // namespace shepherd
