// Group commit: batches queued while the writer is busy share one COMMIT, bounded by
// max_batches_per_commit, and still complete in submission order. The writer is held deterministically by
// a first batch whose `done` waits for the test (a callback that blocks on purpose).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/sqlite_store.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::PutBatch;
using ::shepherd::testing::Rec;
using ::shepherd::testing::TempDir;

// Queues a batch whose done blocks the writer thread until Release(); returns once the writer is blocked,
// so every batch written afterwards is queued behind it.
class WriterGate {
 public:
  explicit WriterGate(Store& store) {
    auto entered = std::make_shared<std::promise<void>>();
    std::future<void> entered_future = entered->get_future();
    store.Write(PutBatch({Rec(Collection::kMeta, "gate", "{}")}), [this, entered](Status s) {
      status_ = s;
      entered->set_value();
      release_future_.wait();
    });
    entered_future.wait();
  }
  void Release() { release_.set_value(); }
  const Status& status() const { return status_; }

 private:
  std::promise<void> release_;
  std::shared_future<void> release_future_ = release_.get_future().share();
  Status status_;
};

TEST(GroupCommitTest, ConcurrentWritersAllCommitDurablyInOrderSharingCommits) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  constexpr int kThreads = 8;
  constexpr int kBatchesPerThread = 50;
  std::vector<std::vector<int>> completed(kThreads);  // per thread: batch indexes in done order
  std::atomic<int> failures{0};
  {
    Result<std::unique_ptr<Store>> opened = OpenSqliteStore(db);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    Store& store = **opened;
    WriterGate gate(store);
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t] {
        for (int i = 0; i < kBatchesPerThread; ++i) {
          std::string key = std::to_string(t) + "-" + std::to_string(i);
          store.Write(PutBatch({Rec(Collection::kJobs, key, "a"), Rec(Collection::kAttempts, key, "b")}),
                      [&, t, i](Status s) {
                        if (!s.ok()) ++failures;
                        completed[t].push_back(i);  // done runs on the one writer thread
                      });
        }
      });
    }
    for (std::thread& w : writers) w.join();
    gate.Release();
    store.Flush();
    EXPECT_TRUE(gate.status().ok());
    SqliteStore::Stats stats = dynamic_cast<SqliteStore&>(store).stats();
    EXPECT_EQ(stats.batches_committed, 1u + kThreads * kBatchesPerThread);
    EXPECT_EQ(stats.batches_failed, 0u);
    EXPECT_EQ(stats.commits, 2u);  // the gate alone, then all 400 queued behind it
  }
  EXPECT_EQ(failures.load(), 0);
  std::vector<int> in_order(kBatchesPerThread);
  for (int i = 0; i < kBatchesPerThread; ++i) in_order[i] = i;
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(completed[t], in_order) << "thread " << t;

  Result<std::unique_ptr<Store>> reopened = OpenSqliteStore(db);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  Result<Snapshot> snapshot = (*reopened)->Load();
  ASSERT_TRUE(snapshot.ok());
  ASSERT_EQ(snapshot->records.size(), 1u + 2 * kThreads * kBatchesPerThread);
  std::vector<int> next(kThreads, 0);  // each thread's jobs records appear in its submission order
  for (const Record& r : snapshot->records) {
    if (r.collection != Collection::kJobs) continue;
    int t = std::stoi(r.key.substr(0, r.key.find('-')));
    EXPECT_EQ(r.key, std::to_string(t) + "-" + std::to_string(next[t]));
    ++next[t];
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kBatchesPerThread);
}

TEST(GroupCommitTest, MaxBatchesPerCommitBoundsEachCommit) {
  TempDir dir;
  Result<std::unique_ptr<Store>> opened = OpenSqliteStore(dir.File("s.db"), {.max_batches_per_commit = 10});
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Store& store = **opened;
  WriterGate gate(store);
  for (int i = 0; i < 95; ++i)
    store.Write(PutBatch({Rec(Collection::kJobs, std::to_string(i), "{}")}), nullptr);
  gate.Release();
  store.Flush();
  SqliteStore::Stats stats = dynamic_cast<SqliteStore&>(store).stats();
  EXPECT_EQ(stats.batches_committed, 96u);
  EXPECT_EQ(stats.commits, 11u);  // gate + 9 groups of 10 + one of 5
}

TEST(GroupCommitTest, FailureFailsTheWholeGroupAndEverythingAfter) {
  TempDir dir;
  const std::string db = dir.File("s.db");
  std::vector<Code> codes;  // written only by the writer thread, read after Flush
  {
    Result<std::unique_ptr<Store>> opened = OpenSqliteStore(db);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    Store& store = **opened;
    ASSERT_EQ(testing::RawDb(db).Exec("CREATE TRIGGER fail_bad BEFORE INSERT ON records WHEN NEW.key = 'bad' "
                                      "BEGIN SELECT RAISE(ABORT, 'boom'); END;"),
              "");
    WriterGate gate(store);
    for (const char* key : {"good1", "bad", "good2"}) {
      store.Write(PutBatch({Rec(Collection::kJobs, key, "{}")}),
                  [&](Status s) { codes.push_back(s.code()); });
    }
    gate.Release();
    store.Flush();
    store.Write(PutBatch({Rec(Collection::kJobs, "after", "{}")}),
                [&](Status s) { codes.push_back(s.code()); });
    store.Flush();
    EXPECT_TRUE(gate.status().ok());
  }
  EXPECT_EQ(codes, (std::vector<Code>{Code::kUnavailable, Code::kUnavailable, Code::kUnavailable,
                                      Code::kUnavailable}));
  testing::RawDb raw(db);
  EXPECT_EQ(raw.Column("SELECT key FROM records ORDER BY rowid"), std::vector<std::string>{"gate"});
}

TEST(GroupCommitTest, FlushReturnsOnlyAfterEverythingQueuedBeforeIt) {
  TempDir dir;
  Result<std::unique_ptr<Store>> opened = OpenSqliteStore(dir.File("s.db"));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Store& store = **opened;
  std::atomic<int> done{0};
  WriterGate gate(store);
  for (int i = 0; i < 5; ++i) {
    store.Write(PutBatch({Rec(Collection::kJobs, std::to_string(i), "{}")}), [&](Status) { ++done; });
  }
  int done_at_flush_return = -1;
  std::thread flusher([&] {
    store.Flush();
    done_at_flush_return = done.load();
  });
  gate.Release();
  flusher.join();
  EXPECT_EQ(done_at_flush_return, 5);
}

}  // namespace
}  // namespace shepherd
