// Versioned migrations: the version is recorded, missing steps run once each in their own transaction, a
// failing step leaves the last good version, and a database from a newer shepherdd is refused.
#include "storage/schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "storage/sqlite_util.h"
#include "storage/store.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::RawDb;
using ::shepherd::testing::TempDir;
using ::testing::HasSubstr;

Db OpenMemoryDb() {
  sqlite3* raw = nullptr;
  sqlite3_open(":memory:", &raw);
  return Db(raw);
}

TEST(SchemaTest, NewDatabaseIsAtCurrentVersionWithRecordsTableAndJobIndex) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  ASSERT_TRUE(OpenSqliteStore(db).ok());
  EXPECT_EQ(kSchemaVersion, static_cast<int>(SchemaMigrations().size()));
  RawDb raw(db);
  EXPECT_EQ(raw.One("PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(raw.Column("SELECT name FROM pragma_table_info('records') ORDER BY cid"),
            (std::vector<std::string>{"collection", "key", "job", "body"}));
  EXPECT_EQ(raw.Column("SELECT name FROM pragma_index_info('records_by_job')"),
            std::vector<std::string>{"job"});
}

TEST(SchemaTest, ReopenDoesNotRerunMigrations) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  ASSERT_TRUE(OpenSqliteStore(db).ok());
  Result<std::unique_ptr<Store>> again = OpenSqliteStore(db);  // step 1 would fail: table exists
  EXPECT_TRUE(again.ok()) << again.status().message();
}

TEST(SchemaTest, DatabaseFromNewerShepherdIsRefused) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  {
    RawDb raw(dir.File("s.db"));
    ASSERT_EQ(raw.Exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1)), "");
  }
  Result<std::unique_ptr<Store>> r = OpenSqliteStore(db);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(r.status().message(),
            "database " + db + " has schema version " + std::to_string(kSchemaVersion + 1) +
                ", newer than this shepherdd supports (" + std::to_string(kSchemaVersion) +
                "); run a newer shepherdd or restore an older database");
  // Refusing released the lock: a second attempt is refused for the same reason, not as a conflict.
  EXPECT_EQ(OpenSqliteStore(db).status().code(), Code::kUnavailable);
  EXPECT_EQ(RawDb(db).One("PRAGMA user_version"), std::to_string(kSchemaVersion + 1));
  EXPECT_EQ(RawDb(db).One("PRAGMA journal_mode"), "delete");  // refused before WAL was switched on
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Another application's SQLite file given as --db by mistake was taken over: Shepherd's tables were added
// beside its own, it was switched to WAL and made 0600. It is refused now, byte for byte as it was.
TEST(SchemaTest, AnotherApplicationsDatabaseIsRefusedAndLeftAsItWas) {
  TempDir dir;
  for (const auto& [user_version, table] : {std::pair{0, "users"}, {7, "users"}, {0, "records"}}) {
    const std::string db = dir.File(std::string("app") + table + std::to_string(user_version) + ".db");
    {
      RawDb raw(db);
      ASSERT_EQ(raw.Exec(std::string("CREATE TABLE ") + table + " (id INTEGER PRIMARY KEY, name TEXT); " +
                         "INSERT INTO " + table +
                         " (name) VALUES ('ada'); PRAGMA user_version = " + std::to_string(user_version)),
                "");
    }
    ASSERT_EQ(chmod(db.c_str(), 0644), 0);
    const std::string before = Bytes(db);
    Result<std::unique_ptr<Store>> r = OpenSqliteStore(db);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kUnavailable);
    EXPECT_THAT(r.status().message(),
                HasSubstr(std::string("is not a Shepherd database (it holds the tables ") + table + ")"));
    EXPECT_EQ(Bytes(db), before) << "user_version " << user_version;
    struct stat st {};
    ASSERT_EQ(stat(db.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  }
}

TEST(SchemaTest, MigrateRunsOnlyMissingSteps) {
  Db db = OpenMemoryDb();
  ASSERT_TRUE(Migrate(db.get(), ":memory:", {"CREATE TABLE a (x)"}).ok());
  EXPECT_EQ(*SchemaVersion(db.get()), 1);
  Status s = Migrate(db.get(), ":memory:", {"CREATE TABLE a (x)", "CREATE TABLE b (y)"});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(*SchemaVersion(db.get()), 2);
}

TEST(SchemaTest, FailingStepIsRolledBackAndKeepsPreviousVersion) {
  Db db = OpenMemoryDb();
  Status s = Migrate(db.get(), "/x/s.db",
                     {"CREATE TABLE a (x)", "CREATE TABLE c (z); INSERT INTO missing VALUES (1)"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("database /x/s.db: migration to schema version 2 failed"));
  EXPECT_THAT(s.message(), HasSubstr("no such table: missing"));
  EXPECT_EQ(*SchemaVersion(db.get()), 1);
  EXPECT_EQ(*QueryText(db.get(), "SELECT count(*) FROM sqlite_master WHERE name = 'c'"), "0");
}

}  // namespace
}  // namespace shepherd
