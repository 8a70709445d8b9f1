// The storage schema and its versioned migrations. Internal to storage/ (and its tests).
//
// The schema version is PRAGMA user_version. Step i (0-based) of the migration list takes a database from
// version i to i+1; each step runs in its own transaction together with the version bump, so a crash or a
// failing step leaves the database at the last complete version.
#pragma once

#include <sqlite3.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace shepherd {

// The migrations this build knows, oldest first. kSchemaVersion == SchemaMigrations().size().
const std::vector<std::string>& SchemaMigrations();
inline constexpr int kSchemaVersion = 2;

// Whether `db` may be opened as a Shepherd database, read only (nothing in the file changes): kUnavailable
// naming `path` when it is not a database at all, holds tables but not Shepherd's `records` or at schema
// version 0 (another application's database), or has a schema version newer than steps.size().
Status CheckIsShepherdDatabase(sqlite3* db, const std::string& path, const std::vector<std::string>& steps);

// Brings `db` up to steps.size(). Returns kUnavailable naming `path` if the database is newer than
// steps.size() (written by a newer shepherdd) or a step fails.
// REQUIRES: no transaction open on `db`.
Status Migrate(sqlite3* db, const std::string& path, const std::vector<std::string>& steps);

// The write path's statements (storage/sqlite_store.cpp). Each touches one row through the primary key
// (collection, key): never a scan, whatever the table holds (tests/storage/query_plan_test.cpp checks it
// with EXPLAIN QUERY PLAN).
inline constexpr const char* kUpsertRecordSql =
    "INSERT INTO records (collection, key, job, body) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (collection, key) DO UPDATE SET job = excluded.job, body = excluded.body";
inline constexpr const char* kEraseRecordSql = "DELETE FROM records WHERE collection = ?1 AND key = ?2";

// PRAGMA user_version of `db`.
Result<int> SchemaVersion(sqlite3* db);

}  // namespace shepherd
