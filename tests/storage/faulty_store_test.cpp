// FaultyStore: injected failures never reach the inner store; everything else passes through.
#include "tests/fakes/faulty_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::Describe;
using ::shepherd::testing::PutBatch;
using ::shepherd::testing::Rec;
using ::shepherd::testing::TempDir;
using ::shepherd::testing::WriteSync;
using ::testing::ElementsAre;

Status Put(Store& store, const std::string& key) {
  return WriteSync(store, PutBatch({Rec(Collection::kJobs, key, "{}")}));
}

TEST(FaultyStoreTest, PassesThroughWhenHealthy) {
  FaultyStore store(NewMemoryStore());
  EXPECT_TRUE(Put(store, "a").ok());
  EXPECT_EQ(store.writes_seen(), 1);
  EXPECT_EQ(store.writes_passed(), 1);
  EXPECT_EQ(store.writes_failed(), 0);
  EXPECT_THAT(Describe(*store.Load()), ElementsAre("jobs/a={}"));
}

TEST(FaultyStoreTest, FailNextWritesFailsExactlyThatManyAndNothingReachesInner) {
  FaultyStore store(NewMemoryStore());
  store.FailNextWrites(2);
  Status first = Put(store, "a");
  EXPECT_EQ(first.code(), Code::kUnavailable);
  EXPECT_EQ(first.message(), "injected fault");
  EXPECT_EQ(Put(store, "b").code(), Code::kUnavailable);
  EXPECT_TRUE(Put(store, "c").ok());
  EXPECT_EQ(store.writes_seen(), 3);
  EXPECT_EQ(store.writes_failed(), 2);
  EXPECT_EQ(store.writes_passed(), 1);
  EXPECT_THAT(Describe(*store.inner().Load()), ElementsAre("jobs/c={}"));
}

TEST(FaultyStoreTest, FailAllWritesUntilHealed) {
  FaultyStore store(NewMemoryStore());
  store.FailAllWrites();
  for (const char* key : {"a", "b", "c"}) EXPECT_EQ(Put(store, key).code(), Code::kUnavailable);
  store.Heal();
  EXPECT_TRUE(Put(store, "d").ok());
  EXPECT_EQ(store.writes_seen(), 4);
  EXPECT_EQ(store.writes_failed(), 3);
  EXPECT_THAT(Describe(*store.Load()), ElementsAre("jobs/d={}"));
}

TEST(FaultyStoreTest, WrapsSqliteStore) {
  TempDir dir;
  Result<std::unique_ptr<Store>> inner = OpenSqliteStore(dir.File("s.db"));
  ASSERT_TRUE(inner.ok()) << inner.status().message();
  FaultyStore store(std::move(inner).value());
  std::vector<Code> codes;
  store.FailNextWrites(1);
  for (const char* key : {"a", "b"}) {
    store.Write(PutBatch({Rec(Collection::kJobs, key, "{}")}), [&](Status s) { codes.push_back(s.code()); });
  }
  store.Flush();
  EXPECT_EQ(codes, (std::vector<Code>{Code::kUnavailable, Code::kOk}));
  EXPECT_THAT(Describe(*store.Load()), ElementsAre("jobs/b={}"));
}

}  // namespace
}  // namespace shepherd
