#include "storage/schema.h"

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

Status Migrate(sqlite3* db, const std::string& path, const std::vector<std::string>& steps) {
  Result<int> version = SchemaVersion(db);
  if (!version.ok()) return version.status();
  const int known = static_cast<int>(steps.size());
  if (*version > known) {
    return Unavailable("database " + path + " has schema version " + std::to_string(*version) +
                       ", newer than this shepherdd supports (" + std::to_string(known) +
                       "); run a newer shepherdd or restore an older database");
  }
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
