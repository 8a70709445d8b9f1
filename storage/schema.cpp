#include "storage/schema.h"

#include <algorithm>

#include "storage/sqlite_util.h"

namespace shepherd {

const std::vector<std::string>& SchemaMigrations() {
  // Append only. Never edit a step that has shipped: databases in the field already ran it.
  static const std::vector<std::string> kSteps = {
      // 1: one table of JSON documents; rowid keeps first-insertion order for Load.
      "CREATE TABLE records ("
      "  collection TEXT NOT NULL,"
      "  key TEXT NOT NULL,"
      "  job TEXT NOT NULL DEFAULT '',"
      "  body TEXT NOT NULL,"
      "  PRIMARY KEY (collection, key));"
      "CREATE INDEX records_by_job ON records (job);",
      // 2: records that could not be decoded, moved aside by --salvage (the original row plus why and when).
      "CREATE TABLE records_quarantine ("
      "  collection TEXT NOT NULL,"
      "  key TEXT NOT NULL,"
      "  job TEXT NOT NULL DEFAULT '',"
      "  body TEXT NOT NULL,"
      "  reason TEXT NOT NULL,"
      "  at TEXT NOT NULL);",
  };
  return kSteps;
}

Result<int> SchemaVersion(sqlite3* db) {
  Result<std::string> v = QueryText(db, "PRAGMA user_version");
  if (!v.ok()) return v.status();
  return std::stoi(*v);
}

namespace {

Status NewerSchema(const std::string& path, int version, int known) {
  return Unavailable("database " + path + " has schema version " + std::to_string(version) +
                     ", newer than this shepherdd supports (" + std::to_string(known) +
                     "); run a newer shepherdd or restore an older database");
}

}  // namespace

Status CheckIsShepherdDatabase(sqlite3* db, const std::string& path, const std::vector<std::string>& steps) {
  Result<Stmt> stmt = Prepare(
      db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY 1");
  if (!stmt.ok()) return Unavailable("cannot open database " + path + ": " + stmt.status().message());
  std::vector<std::string> tables;
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW)
    tables.push_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt->get(), 0)));
  if (rc != SQLITE_DONE) return Unavailable("cannot open database " + path + ": " + sqlite3_errmsg(db));
  Result<int> version = SchemaVersion(db);
  if (!version.ok()) return version.status();
  // Shepherd's tables come with a schema version (each migration bumps it in its own transaction): tables
  // at version 0, or without `records`, are another application's.
  if (!tables.empty() &&
      (*version == 0 || std::find(tables.begin(), tables.end(), "records") == tables.end())) {
    std::string names;
    for (std::size_t i = 0; i < tables.size() && i < 5; ++i) names += (i ? ", " : "") + tables[i];
    return Unavailable("database " + path + " is not a Shepherd database (it holds the tables " + names +
                       (tables.size() > 5 ? ", ..." : "") +
                       "); it was left as it was: give --db a new file or a Shepherd database");
  }
  const int known = static_cast<int>(steps.size());
  if (*version > known) return NewerSchema(path, *version, known);
  return Status::Ok();
}

Status Migrate(sqlite3* db, const std::string& path, const std::vector<std::string>& steps) {
  Result<int> version = SchemaVersion(db);
  if (!version.ok()) return version.status();
  const int known = static_cast<int>(steps.size());
  if (*version > known) return NewerSchema(path, *version, known);
  for (int v = *version; v < known; ++v) {
    // BEGIN IMMEDIATE so that two processes racing past the lock file (which they should not) serialise.
    Status s = Exec(db, "BEGIN IMMEDIATE");
    if (s.ok()) s = Exec(db, steps[v]);
    if (s.ok()) s = Exec(db, "PRAGMA user_version = " + std::to_string(v + 1));
    if (s.ok()) s = Exec(db, "COMMIT");
    if (!s.ok()) {
      Exec(db, "ROLLBACK");
      return Unavailable("database " + path + ": migration to schema version " + std::to_string(v + 1) +
                         " failed: " + s.message());
    }
  }
  return Status::Ok();
}

}  // namespace shepherd
