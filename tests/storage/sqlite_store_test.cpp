// SqliteStore on a real database file: durability across reopen, upsert order, erase, atomic batches, the
// failed state, and the connection settings.
#include "storage/sqlite_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>

#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::Describe;
using ::shepherd::testing::PutBatch;
using ::shepherd::testing::RawDb;
using ::shepherd::testing::Rec;
using ::shepherd::testing::TempDir;
using ::shepherd::testing::WriteSync;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::unique_ptr<Store> Open(const std::string& path, SqliteOptions options = {}) {
  Result<std::unique_ptr<Store>> r = OpenSqliteStore(path, options);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : nullptr;
}

Snapshot LoadOrDie(Store& store) {
  Result<Snapshot> s = store.Load();
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : Snapshot{};
}

TEST(SqliteStoreTest, PutSurvivesCloseAndReopen) {
  TempDir dir;
  const std::string db = dir.File("shepherd.db");
  {
    auto store = Open(db);
    ASSERT_NE(store, nullptr);
    EXPECT_THAT(LoadOrDie(*store).records, IsEmpty());
    ASSERT_TRUE(
        WriteSync(*store, PutBatch({Rec(Collection::kNodes, "n1", R"({"gpus":8})"),
                                    Rec(Collection::kJobs, "j1", R"({"name":"llama \"405B\" ✓"})", "j1"),
                                    Rec(Collection::kCheckpoints, "j1/100", "{}", "j1")}))
            .ok());
  }
  auto store = Open(db);
  ASSERT_NE(store, nullptr);
  Snapshot s = LoadOrDie(*store);
  ASSERT_EQ(s.records.size(), 3u);
  EXPECT_EQ(s.records[0].collection, Collection::kNodes);
  EXPECT_EQ(s.records[0].key, "n1");
  EXPECT_EQ(s.records[0].job, "");
  EXPECT_EQ(s.records[0].body, R"({"gpus":8})");
  EXPECT_EQ(s.records[1].collection, Collection::kJobs);
  EXPECT_EQ(s.records[1].job, "j1");
  EXPECT_EQ(s.records[1].body, R"({"name":"llama \"405B\" ✓"})");
  EXPECT_EQ(s.records[2].collection, Collection::kCheckpoints);
  EXPECT_EQ(s.records[2].key, "j1/100");
}

TEST(SqliteStoreTest, UpsertKeepsFirstInsertionOrderAndReplacesBodyAndJob) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  {
    auto store = Open(db);
    ASSERT_TRUE(
        WriteSync(*store, PutBatch({Rec(Collection::kJobs, "a", "1"), Rec(Collection::kJobs, "b", "1"),
                                    Rec(Collection::kJobs, "c", "1")}))
            .ok());
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "b", "2", "owner")})).ok());
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "a", "3")})).ok());
  }
  auto store = Open(db);
  Snapshot s = LoadOrDie(*store);
  EXPECT_THAT(Describe(s), ElementsAre("jobs/a=3", "jobs/b=2", "jobs/c=1"));
  EXPECT_EQ(s.records[1].job, "owner");
}

TEST(SqliteStoreTest, EraseRemovesOnlyThatCollectionsKeyAndReputGoesLast) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  {
    auto store = Open(db);
    ASSERT_TRUE(
        WriteSync(*store, PutBatch({Rec(Collection::kNodes, "x", "n"), Rec(Collection::kJobs, "x", "j"),
                                    Rec(Collection::kMeta, "m", "1")}))
            .ok());
    WriteBatch erase;
    erase.Erase(Collection::kNodes, "x");
    erase.Erase(Collection::kNodes, "never-written");  // erasing a missing key is not an error
    ASSERT_TRUE(WriteSync(*store, std::move(erase)).ok());
    WriteBatch erase_then_put;
    erase_then_put.Erase(Collection::kJobs, "x");
    erase_then_put.Put(Rec(Collection::kJobs, "x", "j2"));
    ASSERT_TRUE(WriteSync(*store, std::move(erase_then_put)).ok());
  }
  auto store = Open(db);
  EXPECT_THAT(Describe(LoadOrDie(*store)), ElementsAre("meta/m=1", "jobs/x=j2"));
}

// A trigger added behind the store's back makes any put of key "bad" fail mid-batch.
void InstallFailingTrigger(const std::string& db) {
  RawDb raw(db);
  ASSERT_EQ(raw.Exec("CREATE TRIGGER fail_bad BEFORE INSERT ON records WHEN NEW.key = 'bad' "
                     "BEGIN SELECT RAISE(ABORT, 'boom'); END;"),
            "");
}

TEST(SqliteStoreTest, FailingBatchLeavesNoneOfItsOps) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  {
    auto store = Open(db);
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "x", "1")})).ok());
    InstallFailingTrigger(db);
    WriteBatch batch;
    batch.Put(Rec(Collection::kJobs, "y", "1"));
    batch.Erase(Collection::kJobs, "x");
    batch.Put(Rec(Collection::kJobs, "bad", "1"));
    Status s = WriteSync(*store, std::move(batch));
    EXPECT_EQ(s.code(), Code::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("boom"));
    EXPECT_THAT(s.message(), HasSubstr("jobs/bad"));
  }
  auto store = Open(db);
  EXPECT_THAT(Describe(LoadOrDie(*store)), ElementsAre("jobs/x=1"));
}

TEST(SqliteStoreTest, FailedStoreStaysFailedAndWritesNothingMore) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  {
    auto store = Open(db);
    InstallFailingTrigger(db);
    EXPECT_EQ(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "bad", "1")})).code(), Code::kUnavailable);
    ASSERT_EQ(RawDb(db).Exec("DROP TRIGGER fail_bad"), "");  // the cause is gone; the store stays failed
    std::atomic<int> calls{0};
    Status later;
    store->Write(PutBatch({Rec(Collection::kJobs, "z", "1")}), [&](Status s) {
      later = s;
      ++calls;
    });
    store->Flush();
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(later.code(), Code::kUnavailable);
    EXPECT_THAT(later.message(), HasSubstr("boom"));
    auto* sqlite = dynamic_cast<SqliteStore*>(store.get());
    ASSERT_NE(sqlite, nullptr);
    EXPECT_EQ(sqlite->stats().batches_failed, 2u);
    EXPECT_EQ(sqlite->stats().batches_committed, 0u);
  }
  auto store = Open(db);
  EXPECT_THAT(LoadOrDie(*store).records, IsEmpty());
}

TEST(SqliteStoreTest, DoneRunsOnlyAfterCommitIsVisibleToAnotherConnection) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  auto store = Open(db);
  std::promise<std::string> seen;
  store->Write(PutBatch({Rec(Collection::kFindings, "f1", "hang")}), [&](Status s) {
    RawDb reader(db, /*read_only=*/true);
    seen.set_value(s.ok()
                       ? reader.One("SELECT body FROM records WHERE collection = 'findings' AND key = 'f1'")
                       : s.message());
  });
  EXPECT_EQ(seen.get_future().get(), "hang");
}

TEST(SqliteStoreTest, WalFullSyncForeignKeysAndBusyTimeoutAreInEffect) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  auto store = Open(db, SqliteOptions{.busy_timeout_ms = 1234});
  auto* sqlite = dynamic_cast<SqliteStore*>(store.get());
  ASSERT_NE(sqlite, nullptr);
  EXPECT_EQ(sqlite->settings().journal_mode, "wal");
  EXPECT_EQ(sqlite->settings().synchronous, 2);  // FULL
  EXPECT_EQ(sqlite->settings().foreign_keys, 1);
  EXPECT_EQ(sqlite->settings().busy_timeout_ms, 1234);
  EXPECT_EQ(RawDb(db).One("PRAGMA journal_mode"), "wal");  // persistent in the file
  ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kMeta, "k", "v")})).ok());
  EXPECT_TRUE(std::filesystem::exists(db + "-wal"));
}

// Another process in a write transaction (an operator's sqlite3 shell, a tool writing) is waited out: it
// failed the store after busy_timeout (5 s), which stopped the daemon and every agent fenced its ranks.
TEST(SqliteStoreTest, AnotherConnectionsWriteLockIsWaitedOutNotAFailure) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  auto store = Open(db, SqliteOptions{.busy_timeout_ms = 20, .lock_wait_ms = 600000});
  ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "a", "1")})).ok());
  RawDb other(db);
  ASSERT_EQ(other.Exec("BEGIN EXCLUSIVE"), "");
  std::promise<Status> done;
  store->Write(PutBatch({Rec(Collection::kJobs, "b", "2")}), [&](Status s) { done.set_value(s); });
  std::future<Status> result = done.get_future();
  // Well past busy_timeout: still waiting, not failed (done cannot run while the lock is held).
  EXPECT_EQ(result.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  ASSERT_EQ(other.Exec("COMMIT"), "");
  Status s = result.get();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "c", "3")})).code(), Code::kOk);
  EXPECT_EQ(Describe(LoadOrDie(*store)), (std::vector<std::string>{"jobs/a=1", "jobs/b=2", "jobs/c=3"}));
}

TEST(SqliteStoreTest, AWriteLockHeldPastTheWaitFailsTheStore) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  auto store = Open(db, SqliteOptions{.busy_timeout_ms = 10, .lock_wait_ms = 50});
  RawDb other(db);
  ASSERT_EQ(other.Exec("BEGIN EXCLUSIVE"), "");
  Status s = WriteSync(*store, PutBatch({Rec(Collection::kJobs, "b", "2")}));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("locked"));
  ASSERT_EQ(other.Exec("ROLLBACK"), "");
}

TEST(SqliteStoreTest, DestructorCommitsEverythingQueued) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  std::atomic<int> ok{0};
  {
    auto store = Open(db);
    for (int i = 0; i < 100; ++i) {
      store->Write(PutBatch({Rec(Collection::kAttempts, std::to_string(i), "{}")}), [&](Status s) {
        if (s.ok()) ++ok;
      });
    }
    store->Write(PutBatch({Rec(Collection::kAttempts, "no-callback", "{}")}), nullptr);
  }
  EXPECT_EQ(ok.load(), 100);
  auto store = Open(db);
  EXPECT_EQ(LoadOrDie(*store).records.size(), 101u);
}

TEST(SqliteStoreTest, RefusesAMissingDirectoryNamingItAndCreatesNothing) {
  TempDir dir;
  const std::string db = dir.File("a/b/c/s.db");
  auto store = OpenSqliteStore(db);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kUnavailable);
  EXPECT_NE(store.status().message().find(dir.File("a/b/c")), std::string::npos) << store.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir.File("a")));
  EXPECT_TRUE(Open(dir.File("s.db")) != nullptr);  // a new file in an existing directory is created
}

TEST(SqliteStoreTest, QuarantineMovesARecordAsideDurably) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  {
    auto store = Open(db);
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "job-1", "{broken"),
                                            Rec(Collection::kJobs, "job-2", "{}")}))
                    .ok());
    ASSERT_TRUE(store->Quarantine(Rec(Collection::kJobs, "job-1", "{broken"), "not JSON").ok());
  }
  auto store = Open(db);
  auto snap = LoadOrDie(*store);
  ASSERT_EQ(snap.records.size(), 1u);
  EXPECT_EQ(snap.records[0].key, "job-2");
  store.reset();
  RawDb raw(db);
  EXPECT_EQ(
      raw.One("SELECT collection || '/' || key || ' ' || body || ' ' || reason FROM records_quarantine"),
      "jobs/job-1 {broken not JSON");
}

TEST(SqliteStoreTest, RejectsInvalidOptions) {
  TempDir dir;
  EXPECT_EQ(OpenSqliteStore(dir.File("s.db"), SqliteOptions{.max_batches_per_commit = 0}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(OpenSqliteStore(dir.File("s.db"), SqliteOptions{.busy_timeout_ms = -1}).status().code(),
            Code::kInvalidArgument);
}

TEST(SqliteStoreTest, UnopenablePathIsUnavailable) {
  TempDir dir;
  std::filesystem::create_directory(dir.File("dir.db"));  // a directory where the database should be
  Result<std::unique_ptr<Store>> r = OpenSqliteStore(dir.File("dir.db"));
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr(dir.File("dir.db")));
}

TEST(CollectionTest, ToStringNamesEveryCollection) {
  EXPECT_STREQ(ToString(Collection::kNodes), "nodes");
  EXPECT_STREQ(ToString(Collection::kJobs), "jobs");
  EXPECT_STREQ(ToString(Collection::kAttempts), "attempts");
  EXPECT_STREQ(ToString(Collection::kCheckpoints), "checkpoints");
  EXPECT_STREQ(ToString(Collection::kFindings), "findings");
  EXPECT_STREQ(ToString(Collection::kMeta), "meta");
}

}  // namespace
}  // namespace shepherd
