// Start-up safety of the database file: SQLite took a zero-length file for a new, empty database, so a
// daemon started on an operator's truncated copy came up with every job, node and credential gone.
#include "storage/db_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "storage/store.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::TempDir;
using ::testing::HasSubstr;

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A whole Shepherd database, closed (its write-ahead log checkpointed into the file).
std::string MadeDatabase(const TempDir& dir, const std::string& name) {
  const std::string db = dir.File(name);
  {
    auto store = OpenSqliteStore(db);
    EXPECT_TRUE(store.ok()) << store.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(db + "-wal") && std::filesystem::file_size(db + "-wal") > 0);
  return db;
}

TEST(DbFileTest, AnEmptyFileIsRefusedAndLeftAsItWas) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  { std::ofstream touch(db); }
  Result<std::unique_ptr<Store>> r = OpenSqliteStore(db);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("database " + db + " is an empty file (0 bytes)"));
  EXPECT_EQ(std::filesystem::file_size(db), 0u);
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
}

TEST(DbFileTest, AFileCutInsideTheHeaderIsRefused) {
  TempDir dir;
  const std::string db = MadeDatabase(dir, "s.db");
  std::filesystem::resize_file(db, 60);
  const std::string before = Bytes(db);
  Result<std::unique_ptr<Store>> r = OpenSqliteStore(db);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is truncated: 60 bytes"));
  EXPECT_EQ(Bytes(db), before);
}

TEST(DbFileTest, AFileCutMidwayIsRefusedNamingItsSizes) {
  TempDir dir;
  const std::string db = MadeDatabase(dir, "s.db");
  const auto whole = std::filesystem::file_size(db);
  ASSERT_GE(whole, 3 * 4096u) << "a Shepherd database holds several pages";
  std::filesystem::resize_file(db, 2 * 4096);
  const std::string before = Bytes(db);
  Result<std::unique_ptr<Store>> r = OpenSqliteStore(db);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("database " + db + " is truncated: its header says"));
  EXPECT_THAT(r.status().message(), HasSubstr("the file has 8192"));
  EXPECT_EQ(Bytes(db), before);
}

TEST(DbFileTest, AFileThatIsNoDatabaseIsRefused) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  { std::ofstream(db) << std::string(200, 'x'); }
  Result<std::unique_ptr<Store>> r = OpenSqliteStore(db);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is not an SQLite database"));
  EXPECT_EQ(Bytes(db), std::string(200, 'x'));
}

TEST(DbFileTest, AMissingFileIsCreatedAndAWholeOneReopens) {
  TempDir dir;
  const std::string db = MadeDatabase(dir, "s.db");
  EXPECT_TRUE(CheckDatabaseFile(db).ok());
  EXPECT_TRUE(CheckDatabaseFile(dir.File("absent.db")).ok());
  Result<std::unique_ptr<Store>> again = OpenSqliteStore(db);
  EXPECT_TRUE(again.ok()) << again.status().message();
}

}  // namespace
}  // namespace shepherd
