// The etcd store against real etcd members (tests/fakes/etcd_cluster.h): the Store contract as SQLite's
// tests state it, group commits split into transactions, etcd's limits, the fence, member failures and
// quorum loss, start-up refusals, and ParseStoreLocation.
#include "storage/etcd_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "net/etcd_client.h"
#include "tests/fakes/etcd_cluster.h"
#include "tests/storage/etcd_test_util.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::Describe;
using ::shepherd::testing::EtcdCluster;
using ::shepherd::testing::Keys;
using ::shepherd::testing::LoadOrDie;
using ::shepherd::testing::Open;
using ::shepherd::testing::Options;
using ::shepherd::testing::PutBatch;
using ::shepherd::testing::Raw;
using ::shepherd::testing::Rec;
using ::shepherd::testing::Revision;
using ::shepherd::testing::WriteSync;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class EtcdStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.ok()) << etcd_.error(); }
  EtcdCluster etcd_{1};
};

TEST_F(EtcdStoreTest, PutSurvivesCloseAndReopen) {
  {
    auto store = Open(Options(etcd_));
    ASSERT_NE(store, nullptr);
    EXPECT_THAT(LoadOrDie(*store).records, IsEmpty());
    ASSERT_TRUE(
        WriteSync(*store, PutBatch({Rec(Collection::kNodes, "n1", R"({"gpus":8})"),
                                    Rec(Collection::kJobs, "j1", R"({"name":"llama \"405B\" ✓"})", "j1"),
                                    Rec(Collection::kCheckpoints, "j1/100", "{}", "j1")}))
            .ok());
  }
  auto store = Open(Options(etcd_));
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
  // The layout: one key per record under <prefix>/r/, and the schema version.
  auto keys = Keys(etcd_, "/shepherd/");
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys.at("/shepherd/schema"), std::to_string(kEtcdSchemaVersion));
  EXPECT_TRUE(keys.count("/shepherd/r/checkpoints/j1/100"));
}

TEST_F(EtcdStoreTest, UpsertKeepsFirstInsertionOrderAndReplacesBodyAndJob) {
  {
    auto store = Open(Options(etcd_));
    ASSERT_TRUE(
        WriteSync(*store, PutBatch({Rec(Collection::kJobs, "a", "1"), Rec(Collection::kJobs, "b", "1"),
                                    Rec(Collection::kJobs, "c", "1")}))
            .ok());
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "b", "2", "owner")})).ok());
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "a", "3")})).ok());
  }
  auto store = Open(Options(etcd_));
  Snapshot s = LoadOrDie(*store);
  EXPECT_THAT(Describe(s), ElementsAre("jobs/a=3", "jobs/b=2", "jobs/c=1"));
  EXPECT_EQ(s.records[1].job, "owner");
  // A reopened store keeps the places too (its sequences come from Load).
  ASSERT_TRUE(
      WriteSync(*store, PutBatch({Rec(Collection::kJobs, "d", "1"), Rec(Collection::kJobs, "a", "4")})).ok());
  EXPECT_THAT(Describe(LoadOrDie(*store)), ElementsAre("jobs/a=4", "jobs/b=2", "jobs/c=1", "jobs/d=1"));
}

TEST_F(EtcdStoreTest, EraseRemovesOnlyThatCollectionsKeyAndReputGoesLast) {
  {
    auto store = Open(Options(etcd_));
    ASSERT_TRUE(
        WriteSync(*store, PutBatch({Rec(Collection::kNodes, "x", "n"), Rec(Collection::kJobs, "x", "j"),
                                    Rec(Collection::kMeta, "m", "1")}))
            .ok());
    WriteBatch erase;
    erase.Erase(Collection::kNodes, "x");
    erase.Erase(Collection::kNodes, "never-written");  // erasing a missing key is not an error
    ASSERT_TRUE(WriteSync(*store, std::move(erase)).ok());
    WriteBatch erase_then_put;  // one key twice in one transaction: folded, and it still goes last
    erase_then_put.Erase(Collection::kJobs, "x");
    erase_then_put.Put(Rec(Collection::kJobs, "x", "j2"));
    ASSERT_TRUE(WriteSync(*store, std::move(erase_then_put)).ok());
  }
  auto store = Open(Options(etcd_));
  EXPECT_THAT(Describe(LoadOrDie(*store)), ElementsAre("meta/m=1", "jobs/x=j2"));
}

// etcd refuses a request over its 1.5 MiB --max-request-bytes: the batch holding a 1.7 MB body fails whole.
TEST_F(EtcdStoreTest, FailingBatchLeavesNoneOfItsOps) {
  EtcdStoreOptions options = Options(etcd_);
  options.max_txn_bytes = 8 << 20;  // let the request reach etcd
  {
    auto store = Open(options);
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "x", "1")})).ok());
    WriteBatch batch;
    batch.Put(Rec(Collection::kJobs, "y", "1"));
    batch.Erase(Collection::kJobs, "x");
    batch.Put(Rec(Collection::kJobs, "bad", std::string(1700000, 'b')));
    Status s = WriteSync(*store, std::move(batch));
    EXPECT_EQ(s.code(), Code::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("too large"));
  }
  auto store = Open(Options(etcd_));
  EXPECT_THAT(Describe(LoadOrDie(*store)), ElementsAre("jobs/x=1"));
}

// The default limit counts what etcd counts (raw bytes): a 1.1 MB record fits one transaction.
TEST_F(EtcdStoreTest, ARecordOfAMegabyteFitsTheDefaults) {
  const std::string big(1100000, 'x');
  {
    auto store = Open(Options(etcd_));
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kFindings, "f", big, "j")})).ok());
  }
  auto store = Open(Options(etcd_));
  Snapshot s = LoadOrDie(*store);
  ASSERT_EQ(s.records.size(), 1u);
  EXPECT_EQ(s.records[0].body, big);
}

TEST_F(EtcdStoreTest, FailedStoreStaysFailedAndWritesNothingMore) {
  EtcdStoreOptions options = Options(etcd_);
  options.max_txn_bytes = 8 << 20;
  {
    auto store = Open(options);
    EXPECT_EQ(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "bad", std::string(1700000, 'b'))})).code(),
              Code::kUnavailable);
    std::atomic<int> calls{0};
    Status later;
    store->Write(PutBatch({Rec(Collection::kJobs, "z", "1")}), [&](Status s) {
      later = s;
      ++calls;
    });
    store->Flush();
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(later.code(), Code::kUnavailable);
    EXPECT_THAT(later.message(), HasSubstr("too large"));
  }
  EXPECT_EQ(Keys(etcd_, "/shepherd/r/").size(), 0u);
}

TEST_F(EtcdStoreTest, FlushWaitsForEverythingQueuedAndTheDestructorCommitsIt) {
  std::atomic<int> ok{0};
  {
    auto store = Open(Options(etcd_));
    for (int i = 0; i < 50; ++i)
      store->Write(PutBatch({Rec(Collection::kAttempts, std::to_string(i), "{}")}), [&](Status s) {
        if (s.ok()) ++ok;
      });
    store->Flush();
    EXPECT_EQ(ok.load(), 50);
    EXPECT_EQ(Keys(etcd_, "/shepherd/r/").size(), 50u);  // visible to another client once Flush returned
    for (int i = 50; i < 100; ++i)
      store->Write(PutBatch({Rec(Collection::kAttempts, std::to_string(i), "{}")}), [&](Status s) {
        if (s.ok()) ++ok;
      });
    store->Write(PutBatch({Rec(Collection::kAttempts, "no-callback", "{}")}), nullptr);
  }
  EXPECT_EQ(ok.load(), 100);
  EXPECT_EQ(Keys(etcd_, "/shepherd/r/").size(), 101u);
}

TEST_F(EtcdStoreTest, AThousandBatchesCommitInSplitTransactionsAndLoadWhole) {
  auto store = Open(Options(etcd_));
  ASSERT_NE(store, nullptr);
  LoadOrDie(*store);
  const int64_t before = Revision(etcd_);
  std::atomic<int> ok{0}, failed{0};
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "job-" + std::to_string(i);
    store->Write(PutBatch({Rec(Collection::kJobs, id, "{\"i\":" + std::to_string(i) + "}", id),
                           Rec(Collection::kAttempts, id + "/0", "{}", id),
                           Rec(Collection::kFindings, id + "/f", "{}", id)}),
                 [&](Status s) { s.ok() ? ++ok : ++failed; });
  }
  store->Flush();
  EXPECT_EQ(ok.load(), 1000);
  EXPECT_EQ(failed.load(), 0);
  // 3,000 operations at most 128 per transaction: at least 24 transactions (one revision each); fewer than
  // one per batch unless the writer never found more than one batch queued.
  const int64_t txns = Revision(etcd_) - before;
  EXPECT_GE(txns, 24);
  EXPECT_LE(txns, 1000);
  auto reopened = Open(Options(etcd_));
  Snapshot s = LoadOrDie(*reopened);  // three pages of 1,000 keys
  ASSERT_EQ(s.records.size(), 3000u);
  for (int i = 0; i < 1000; ++i) {
    const std::string id = "job-" + std::to_string(i);
    ASSERT_EQ(s.records[3 * i].key, id);
    EXPECT_EQ(s.records[3 * i].body, "{\"i\":" + std::to_string(i) + "}");
    EXPECT_EQ(s.records[3 * i].job, id);
    EXPECT_EQ(s.records[3 * i + 1].key, id + "/0");
    EXPECT_EQ(s.records[3 * i + 2].collection, Collection::kFindings);
  }
}

// A batch over the operations limit is staged (etcd_stage_test.cpp has the details); only a single record
// larger than one request cannot be written, and fails the store.
TEST_F(EtcdStoreTest, ABatchOverTheOpsLimitIsStagedARecordOverTheBytesLimitFailsTheStore) {
  EtcdStoreOptions options = Options(etcd_);
  options.max_ops_per_txn = 4;
  auto store = Open(options);
  // Five writes of one key fold into one operation: one transaction.
  WriteBatch same;
  for (int i = 0; i < 5; ++i) same.Put(Rec(Collection::kMeta, "k", std::to_string(i)));
  ASSERT_TRUE(WriteSync(*store, std::move(same)).ok());
  WriteBatch big;
  for (int i = 0; i < 5; ++i) big.Put(Rec(Collection::kJobs, std::to_string(i), "{}"));
  ASSERT_TRUE(WriteSync(*store, std::move(big)).ok());
  EXPECT_EQ(Keys(etcd_, "/shepherd/r/jobs/").size(), 5u);
  EXPECT_TRUE(Keys(etcd_, "/shepherd/stage/").empty());

  // Bytes: a body over max_txn_bytes alone. The deployment's limits, not the request, are at fault: 503 at
  // the API, naming what to raise.
  EtcdCluster other(1);
  ASSERT_TRUE(other.ok()) << other.error();
  EtcdStoreOptions small = Options(other);
  small.max_txn_bytes = 4096;
  auto store2 = Open(small);
  Status s = WriteSync(*store2, PutBatch({Rec(Collection::kJobs, "j", std::string(5000, 'x'))}));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("/shepherd/r/jobs/j"));
  EXPECT_THAT(s.message(), HasSubstr("etcd_max_request_bytes"));
  EXPECT_EQ(WriteSync(*store2, PutBatch({Rec(Collection::kJobs, "later", "{}")})).code(), Code::kUnavailable);
  EXPECT_TRUE(Keys(other, "/shepherd/r/").empty());
  EXPECT_TRUE(Keys(other, "/shepherd/stage/").empty());
}

TEST_F(EtcdStoreTest, WritesAfterAnotherReplicaTookTheLeaderKeyFailAndNothingIsVisible) {
  auto raw = Raw(etcd_);
  auto lease = raw->LeaseGrant(60);
  ASSERT_TRUE(lease.ok());
  auto won = raw->Txn({}, {net::EtcdOp{.key = "/shepherd/leader", .value = "replica-a", .lease = *lease}});
  ASSERT_TRUE(won.ok());
  EtcdStoreOptions options = Options(etcd_);  // the leader key alone does not make the prefix foreign
  options.fence = EtcdFence{.leader_key = "/shepherd/leader", .create_revision = won->revision};
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "before", "{}")})).ok());

  // Replica A's lease ends; replica B campaigns and wins (a new create_revision).
  ASSERT_TRUE(raw->LeaseRevoke(*lease).ok());
  ASSERT_TRUE(raw->Txn({}, {net::EtcdOp{.key = "/shepherd/leader", .value = "replica-b"}}).ok());

  Status s = WriteSync(*store,
                       PutBatch({Rec(Collection::kJobs, "after", "{}"), Rec(Collection::kNodes, "n", "{}")}));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("leadership lost"));
  Status later = WriteSync(*store, PutBatch({Rec(Collection::kJobs, "later", "{}")}));
  EXPECT_EQ(later.code(), Code::kFailedPrecondition);
  auto keys = Keys(etcd_, "/shepherd/r/");
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_TRUE(keys.count("/shepherd/r/jobs/before"));
}

TEST_F(EtcdStoreTest, QuarantineMovesTheRecordAsideWithTheReason) {
  auto store = Open(Options(etcd_));
  ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "ok", "{}"),
                                          Rec(Collection::kJobs, "bad", "{x", "bad")}))
                  .ok());
  ASSERT_TRUE(store->Quarantine(Rec(Collection::kJobs, "bad", "{x", "bad"), "not JSON").ok());
  EXPECT_THAT(Describe(LoadOrDie(*store)), ElementsAre("jobs/ok={}"));
  auto q = Keys(etcd_, "/shepherd/quarantine/");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_THAT(q.at("/shepherd/quarantine/jobs/bad"), HasSubstr("\"reason\":\"not JSON\""));
  EXPECT_THAT(q.at("/shepherd/quarantine/jobs/bad"), HasSubstr("\"body\":\"{x\""));
}

TEST_F(EtcdStoreTest, HistoryIsCompacted) {
  EtcdStoreOptions options = Options(etcd_);
  options.compact_every = 10;
  auto store = Open(options);
  const int64_t first = Revision(etcd_);
  for (int i = 0; i < 30; ++i)
    ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kMeta, "k", std::to_string(i))})).ok());
  auto old = Raw(etcd_)->Range("/shepherd/r/meta/k", false, 0, first + 1);
  ASSERT_FALSE(old.ok());
  EXPECT_THAT(old.status().message(), HasSubstr("compacted"));
}

TEST_F(EtcdStoreTest, RefusesAPrefixHoldingAnotherApplicationsKeysAndWritesNothing) {
  auto raw = Raw(etcd_);
  ASSERT_TRUE(raw->Txn({}, {net::EtcdOp{.key = "/app/config", .value = "theirs"}}).ok());
  auto r = OpenEtcdStore(Options(etcd_, "/app"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("/app/config"));
  EXPECT_THAT(Keys(etcd_, "/app"), ElementsAre(::testing::Pair("/app/config", "theirs")));
  // A sibling prefix sharing the text ("/app2") is not under "/app/" and does not count.
  auto sibling = OpenEtcdStore(Options(etcd_, "/ap"));
  EXPECT_TRUE(sibling.ok()) << sibling.status().message();
}

TEST_F(EtcdStoreTest, RefusesANewerSchemaAndWritesNothing) {
  auto raw = Raw(etcd_);
  const std::string newer = std::to_string(kEtcdSchemaVersion + 1);
  ASSERT_TRUE(raw->Txn({}, {net::EtcdOp{.key = "/shepherd/schema", .value = newer},
                            net::EtcdOp{.key = "/shepherd/r/jobs/j", .value = "0,0,{}"}})
                  .ok());
  const int64_t revision = Revision(etcd_);
  auto r = OpenEtcdStore(Options(etcd_));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("newer"));
  EXPECT_THAT(r.status().message(), HasSubstr("schema " + newer));
  EXPECT_EQ(Revision(etcd_), revision);
  EXPECT_EQ(Keys(etcd_, "/shepherd/schema").at("/shepherd/schema"), newer);
}

TEST(EtcdStoreStartTest, RefusesAnUnreachableEndpointNamingItInBoundedTime) {
  const auto start = std::chrono::steady_clock::now();
  auto r = OpenEtcdStore(
      EtcdStoreOptions{.endpoints = {"http://127.0.0.1:1"}, .timeout = std::chrono::seconds(2)});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("http://127.0.0.1:1"));
}

TEST(EtcdStoreClusterTest, OneMemberKilledWritesGoOnTwoStoppedTheWriteWaitsForOneBack) {
  EtcdCluster etcd(3);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  EtcdStoreOptions options = Options(etcd);
  options.timeout = std::chrono::seconds(2);
  options.unavailable_wait = std::chrono::seconds(120);
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "1", "{}")})).ok());
  etcd.Kill(0);  // the store's current endpoint
  ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "2", "{}")})).ok());

  etcd.Stop(1);  // with 0 dead: no quorum
  std::promise<Status> done;
  store->Write(PutBatch({Rec(Collection::kJobs, "3", "{}")}), [&](Status s) { done.set_value(s); });
  std::future<Status> result = done.get_future();
  // Waiting, not failed (done cannot run before a quorum is back: it needs a commit).
  EXPECT_EQ(result.wait_for(std::chrono::seconds(3)), std::future_status::timeout);
  ASSERT_TRUE(etcd.Restart(1)) << etcd.error();
  Status s = result.get();
  EXPECT_TRUE(s.ok()) << s.message();
  auto keys = Keys(etcd, "/shepherd/r/");
  EXPECT_EQ(keys.size(), 3u);
}

// A member that stops answering (SIGSTOP: its connections stay open, nothing comes back) costs one call
// timeout, then the others serve.
TEST(EtcdStoreClusterTest, AStalledMemberIsPassedOver) {
  EtcdCluster etcd(3);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  EtcdStoreOptions options = Options(etcd);
  options.timeout = std::chrono::seconds(2);
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(WriteSync(*store, PutBatch({Rec(Collection::kJobs, "1", "{}")})).ok());
  etcd.Pause(0);  // the store's current endpoint
  Status s = WriteSync(*store, PutBatch({Rec(Collection::kJobs, "2", "{}")}));
  EXPECT_TRUE(s.ok()) << s.message();
  etcd.Resume(0);
  ASSERT_TRUE(etcd.WaitHealthy()) << etcd.error();
  EXPECT_EQ(Keys(etcd, "/shepherd/r/").size(), 2u);
}

TEST(EtcdStoreClusterTest, NoQuorumLongerThanTheWaitFailsTheStore) {
  EtcdCluster etcd(3);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  EtcdStoreOptions options = Options(etcd);
  options.timeout = std::chrono::seconds(1);
  options.unavailable_wait = std::chrono::seconds(3);
  auto store = Open(options);
  ASSERT_NE(store, nullptr);
  etcd.Stop(1);
  etcd.Stop(2);
  Status s = WriteSync(*store, PutBatch({Rec(Collection::kJobs, "x", "{}")}));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("did not answer"));
}

TEST(ParseStoreLocationTest, AcceptsSqliteAndEtcdAndRefusesTheRestNamingTheText) {
  auto sqlite = ParseStoreLocation("sqlite:///var/lib/shepherd/shepherd.db");
  ASSERT_TRUE(sqlite.ok());
  EXPECT_EQ(sqlite->kind, StoreLocation::Kind::kSqlite);
  EXPECT_EQ(sqlite->path, "/var/lib/shepherd/shepherd.db");
  auto rel = ParseStoreLocation("sqlite://state/s.db");
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->path, "state/s.db");
  auto etcd = ParseStoreLocation("etcd://10.0.0.1:2379,etcd-b:2379");
  ASSERT_TRUE(etcd.ok());
  EXPECT_EQ(etcd->kind, StoreLocation::Kind::kEtcd);
  EXPECT_THAT(etcd->endpoints, ElementsAre("http://10.0.0.1:2379", "http://etcd-b:2379"));
  for (const char* bad : {"", "/var/lib/s.db", "sqlite://", "etcd://", "etcd://h", "etcd://h:", "etcd://:1",
                          "etcd://h:1,", "etcd://h:99999", "etcd://h:1/x", "http://h:1", "mysql://x"}) {
    auto r = ParseStoreLocation(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("'") + bad + "'"));
  }
}

}  // namespace
}  // namespace shepherd
