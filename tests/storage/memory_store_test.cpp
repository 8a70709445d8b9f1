// NewMemoryStore(): the Store contract without a disk; `done` runs synchronously inside Write.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "storage/store.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::Describe;
using ::shepherd::testing::PutBatch;
using ::shepherd::testing::Rec;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(MemoryStoreTest, StartsEmpty) {
  auto store = NewMemoryStore();
  Result<Snapshot> s = store->Load();
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(s->records, IsEmpty());
}

TEST(MemoryStoreTest, DoneRunsInsideWriteOnTheCallersThread) {
  auto store = NewMemoryStore();
  bool called = false;
  std::thread::id where;
  store->Write(PutBatch({Rec(Collection::kNodes, "n1", "{}", "j")}), [&](Status s) {
    EXPECT_TRUE(s.ok());
    called = true;
    where = std::this_thread::get_id();
  });
  EXPECT_TRUE(called);
  EXPECT_EQ(where, std::this_thread::get_id());
  store->Flush();
  Result<Snapshot> snapshot = store->Load();
  ASSERT_EQ(snapshot->records.size(), 1u);
  EXPECT_EQ(snapshot->records[0].job, "j");
}

TEST(MemoryStoreTest, UpsertKeepsFirstInsertionOrderEraseAndReputGoesLast) {
  auto store = NewMemoryStore();
  store->Write(PutBatch({Rec(Collection::kJobs, "a", "1"), Rec(Collection::kNodes, "a", "n"),
                         Rec(Collection::kJobs, "b", "1"), Rec(Collection::kJobs, "c", "1")}),
               nullptr);
  store->Write(PutBatch({Rec(Collection::kJobs, "a", "2")}), nullptr);
  WriteBatch batch;
  batch.Erase(Collection::kJobs, "b");
  batch.Erase(Collection::kJobs, "never-written");
  batch.Erase(Collection::kNodes, "a");
  batch.Put(Rec(Collection::kNodes, "a", "n2"));
  store->Write(std::move(batch), nullptr);
  EXPECT_THAT(Describe(*store->Load()), ElementsAre("jobs/a=2", "jobs/c=1", "nodes/a=n2"));
}

TEST(MemoryStoreTest, DoneMayWriteAgain) {
  auto store = NewMemoryStore();
  store->Write(PutBatch({Rec(Collection::kJobs, "first", "{}")}),
               [&](Status) { store->Write(PutBatch({Rec(Collection::kJobs, "second", "{}")}), nullptr); });
  EXPECT_THAT(Describe(*store->Load()), ElementsAre("jobs/first={}", "jobs/second={}"));
}

}  // namespace
}  // namespace shepherd
