// Batches larger than one etcd transaction (storage/etcd_stage.h): the chunk encoding and the stage area's
// checks (pure), then the store against real etcd members: a large batch on etcd's default limits, a writer
// stopped at each point of a staged write (readers see the batch whole or not at all; the next writer
// finishes or discards it), a deposed leader's stage, ordering with small batches, and a bounded stage area.
#include "storage/etcd_stage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "storage/etcd_store.h"
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
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using StagePoint = EtcdStoreOptions::StagePoint;

net::EtcdOp Put(std::string key, std::string value) {
  return net::EtcdOp{.kind = net::EtcdOp::Kind::kPut, .key = std::move(key), .value = std::move(value)};
}
net::EtcdOp Del(std::string key) {
  return net::EtcdOp{.kind = net::EtcdOp::Kind::kDelete, .key = std::move(key)};
}

TEST(EtcdStageEncodingTest, ChunksRoundTripAnyBytesWithinTheBound) {
  std::vector<net::EtcdOp> ops;
  for (int i = 0; i < 200; ++i)
    ops.push_back(i % 7 == 3
                      ? Del("/p/r/jobs/" + std::to_string(i))
                      : Put("/p/r/jobs/" + std::to_string(i),
                            std::string("0,3,p1,") + std::string(1, '\0') + "d9," + std::string(i, 'v')));
  auto chunks = etcd_stage::EncodeChunks(ops, "/p/r/", 1000);
  ASSERT_TRUE(chunks.ok()) << chunks.status().message();
  EXPECT_GT(chunks->size(), 5u);
  std::vector<net::EtcdOp> back;
  for (const std::string& c : *chunks) {
    EXPECT_LE(c.size(), 1000u);
    auto ops_back = etcd_stage::DecodeChunk(c, "/p/r/");
    ASSERT_TRUE(ops_back.ok()) << ops_back.status().message();
    back.insert(back.end(), ops_back->begin(), ops_back->end());
  }
  ASSERT_EQ(back.size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(back[i].kind, ops[i].kind) << i;
    EXPECT_EQ(back[i].key, ops[i].key) << i;
    EXPECT_EQ(back[i].value, ops[i].value) << i;
  }
  // One operation larger than a chunk is refused by name.
  auto too_big = etcd_stage::EncodeChunks({Put("/p/r/jobs/big", std::string(2000, 'x'))}, "/p/r/", 1000);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("/p/r/jobs/big"));
}

TEST(EtcdStageEncodingTest, MalformedChunksAndCommitsAreErrorsNotCrashes) {
  for (const std::string bad : {"x", "p", "p5,", "p1,1", "p1,5,ab", "d0,", "d3,ab", "p,1,a", "p1a,1,ab",
                                "p99999999999999999999,1,a", "d1,ap"})
    EXPECT_EQ(etcd_stage::DecodeChunk(bad, "/p/r/").status().code(), Code::kInternal) << bad;
  for (const std::string bad : {"", "1", "1,2", "1,2,xyz", "1,2,0123456789abcdeg", ",2,0123456789abcdef"})
    EXPECT_FALSE(etcd_stage::DecodeCommit(bad).has_value()) << bad;
  const etcd_stage::CommitRecord c{.chunks = 3, .ops = 2500, .digest = 0xfedcba9876543210ULL};
  auto back = etcd_stage::DecodeCommit(etcd_stage::EncodeCommit(c));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->chunks, 3);
  EXPECT_EQ(back->ops, 2500);
  EXPECT_EQ(back->digest, 0xfedcba9876543210ULL);
}

TEST(EtcdStageEncodingTest, TheAreaKeepsCommittedStagesWholeAndCountsTheRest) {
  const std::string area = etcd_stage::AreaPrefix("/p");
  auto chunks = etcd_stage::EncodeChunks(
      {Put("/p/r/jobs/a", "1"), Del("/p/r/jobs/b"), Put("/p/r/jobs/c", "3")}, "/p/r/", 12);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 3u);
  const std::string dir = etcd_stage::StageDir("/p", 42);
  EXPECT_EQ(dir, "/p/stage/00000000000000000042/");
  auto fill = [&](etcd_stage::StageArea& a, size_t skip) {
    for (size_t n = 0; n < chunks->size(); ++n)
      if (n != skip) a.Add(area, etcd_stage::ChunkKey(dir, n), (*chunks)[n]);
  };
  const std::string commit =
      etcd_stage::EncodeCommit({.chunks = 3, .ops = 3, .digest = etcd_stage::Digest(*chunks)});
  etcd_stage::StageArea whole;
  fill(whole, 99);
  whole.Add(area, etcd_stage::CommitKey(dir), commit);
  whole.Add(area, etcd_stage::ChunkKey(etcd_stage::StageDir("/p", 7), 0), (*chunks)[0]);  // never committed
  whole.Add(area, area + "junk", "x");
  EXPECT_EQ(whole.uncommitted(), 2u);
  auto committed = whole.Committed("/p/r/");
  ASSERT_TRUE(committed.ok()) << committed.status().message();
  ASSERT_EQ(committed->size(), 1u);
  EXPECT_EQ((*committed)[0].id, "00000000000000000042");
  ASSERT_EQ((*committed)[0].ops.size(), 3u);
  EXPECT_EQ((*committed)[0].ops[1].kind, net::EtcdOp::Kind::kDelete);
  EXPECT_EQ((*committed)[0].ops[2].value, "3");

  etcd_stage::StageArea missing;
  fill(missing, 1);
  missing.Add(area, etcd_stage::CommitKey(dir), commit);
  EXPECT_EQ(missing.Committed("/p/r/").status().code(), Code::kInternal);
  etcd_stage::StageArea tampered;
  fill(tampered, 99);
  tampered.Add(area, etcd_stage::ChunkKey(dir, 2), "p9,1,jobs/c/x9");
  tampered.Add(area, etcd_stage::CommitKey(dir), commit);
  EXPECT_THAT(tampered.Committed("/p/r/").status().message(), HasSubstr("digest"));
}

std::string Body(int i, const std::string& tag) {
  return "{\"i\":" + std::to_string(i) + ",\"tag\":\"" + tag + "\",\"pad\":\"" + std::string(1500, 'p') +
         "\"}";
}

// 2,502 operations and about 3.8 MB in one batch, on etcd's default limits (128 operations and 1.5 MiB per
// request): it commits, and a reopened store reads back exactly the state the batch makes.
TEST(EtcdStageTest, ABatchOf2500OpsAndOver3MiBCommitsOnDefaultsAndReadsBackExactly) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  std::vector<std::string> expected;  // "collection/key=body" in Load's order, built by hand
  {
    auto store = Open(Options(etcd));
    ASSERT_NE(store, nullptr);
    LoadOrDie(*store);
    WriteBatch before;
    for (int i = 0; i < 10; ++i) before.Put(Rec(Collection::kJobs, "pre-" + std::to_string(i), "old"));
    before.Put(Rec(Collection::kJobs, "k-100", "old"));
    ASSERT_TRUE(WriteSync(*store, std::move(before)).ok());

    WriteBatch big;
    size_t bytes = 0;
    for (int i = 0; i < 2500; ++i) {
      big.Put(Rec(Collection::kJobs, "k-" + std::to_string(i), Body(i, "new"), "owner-" + std::to_string(i)));
      bytes += Body(i, "new").size();
    }
    big.Erase(Collection::kJobs, "pre-3");
    big.Put(Rec(Collection::kJobs, "k-5", "again", "owner-5"));
    ASSERT_EQ(big.ops.size(), 2502u);
    ASSERT_GT(bytes, 3u << 20);
    const int64_t revision_before = Revision(etcd);
    const uint64_t staged_before = EtcdStagedBatchesTotal();
    Status s = WriteSync(*store, std::move(big));
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(EtcdStagedBatchesTotal(), staged_before + 1);
    // At least 3 chunks (3.8 MB at 1.25 MiB), the commit, 20 applies (2,501 keys at 128), the cleanup.
    EXPECT_GE(Revision(etcd) - revision_before, 3 + 1 + 20 + 1);
  }
  for (int i = 0; i < 10; ++i)
    if (i != 3) expected.push_back("jobs/pre-" + std::to_string(i) + "=old");
  expected.push_back("jobs/k-100=" + Body(100, "new"));
  for (int i = 0; i < 2500; ++i)
    if (i != 100)
      expected.push_back("jobs/k-" + std::to_string(i) + "=" + (i == 5 ? "again" : Body(i, "new")));
  auto store = Open(Options(etcd));
  Snapshot s = LoadOrDie(*store);
  EXPECT_EQ(Describe(s), expected);
  for (const Record& r : s.records)
    if (r.key.rfind("k-", 0) == 0) {
      ASSERT_EQ(r.job, "owner-" + r.key.substr(2));
    }
  EXPECT_THAT(Keys(etcd, "/shepherd/stage/"), IsEmpty());
  EXPECT_EQ(Keys(etcd, "/shepherd/r/").size(), expected.size());
}

// The state before and after the staged batch of the tests below, and the records as Describe shows them.
constexpr int kKeys = 300;
WriteBatch Before() {
  WriteBatch b;
  for (int i = 0; i < kKeys; ++i) b.Put(Rec(Collection::kJobs, "k-" + std::to_string(i), "old"));
  b.Put(Rec(Collection::kJobs, "gone", "x"));
  return b;
}
WriteBatch Staged() {
  WriteBatch b;
  for (int i = 0; i < kKeys; ++i)
    b.Put(Rec(Collection::kJobs, "k-" + std::to_string(i), "new-" + std::to_string(i)));
  b.Erase(Collection::kJobs, "gone");
  b.Put(Rec(Collection::kJobs, "added", "y"));
  return b;
}
std::vector<std::string> OldState() {
  std::vector<std::string> v;
  for (int i = 0; i < kKeys; ++i) v.push_back("jobs/k-" + std::to_string(i) + "=old");
  v.push_back("jobs/gone=x");
  return v;
}
std::vector<std::string> NewState() {
  std::vector<std::string> v;
  for (int i = 0; i < kKeys; ++i) v.push_back("jobs/k-" + std::to_string(i) + "=new-" + std::to_string(i));
  v.push_back("jobs/added=y");
  return v;
}
// A small batch after the staged one, touching its keys.
WriteBatch After() {
  WriteBatch b;
  b.Put(Rec(Collection::kJobs, "k-1", "after"));
  b.Erase(Collection::kJobs, "k-2");
  return b;
}
std::vector<std::string> WithAfter(std::vector<std::string> v) {
  for (std::string& s : v)
    if (s.rfind("jobs/k-1=", 0) == 0) s = "jobs/k-1=after";
  std::erase_if(v, [](const std::string& s) { return s.rfind("jobs/k-2=", 0) == 0; });
  return v;
}

// Small transactions (several chunks, several applies) for the stopped-writer tests.
EtcdStoreOptions SmallTxns(const EtcdCluster& etcd) {
  EtcdStoreOptions o = Options(etcd);
  o.max_txn_bytes = 4096;
  o.max_ops_per_txn = 64;
  return o;
}

class EtcdStageStopTest : public ::testing::TestWithParam<StagePoint> {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.ok()) << etcd_.error(); }
  EtcdCluster etcd_{1};
};

// A writer that stops (dies) at each point of a staged write: until the commit key is written, readers see
// none of the batch; from then on, all of it, whatever was applied. The next writer discards or finishes it
// before its own first write, which lands after it, and leaves no stage behind.
TEST_P(EtcdStageStopTest, ReadersSeeTheBatchWholeOrNotAtAllAndTheNextWriterCompletesOrDiscardsIt) {
  const StagePoint stop = GetParam();
  const bool committed = stop != StagePoint::kChunksWritten;
  {
    EtcdStoreOptions o = SmallTxns(etcd_);
    std::atomic<bool> armed{false};  // Before() is staged too: stop the second staged write only
    o.stage_hook = [stop, &armed](StagePoint p) { return !armed || p != stop; };
    auto store = Open(o);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(WriteSync(*store, Before()).ok());
    armed = true;
    Status s = WriteSync(*store, Staged());
    // Past the commit point the batch is durable: its done says so, and the store fails for what follows.
    EXPECT_EQ(s.ok(), committed) << s.message();
    EXPECT_EQ(WriteSync(*store, After()).code(), Code::kUnavailable);
  }
  // Behind the store's back: what the stopped writer left.
  auto stage = Keys(etcd_, "/shepherd/stage/");
  EXPECT_GT(stage.size(), 2u);  // several chunks
  EXPECT_EQ(std::count_if(stage.begin(), stage.end(), [](auto& kv) { return kv.first.ends_with("/commit"); }),
            committed ? 1 : 0);
  auto records = Keys(etcd_, "/shepherd/r/jobs/");
  if (stop == StagePoint::kPartlyApplied) {  // the first 64 keys applied, the rest not yet
    EXPECT_EQ(records.at("/shepherd/r/jobs/k-0").substr(records.at("/shepherd/r/jobs/k-0").size() - 5),
              "new-0");
    EXPECT_EQ(records.at("/shepherd/r/jobs/k-299").substr(records.at("/shepherd/r/jobs/k-299").size() - 3),
              "old");
    EXPECT_TRUE(records.count("/shepherd/r/jobs/gone"));
  } else {
    EXPECT_EQ(records.at("/shepherd/r/jobs/k-0").substr(records.at("/shepherd/r/jobs/k-0").size() - 3),
              "old");
  }
  // A reader (a follower's view) sees the batch whole or not at all.
  {
    auto reader = Open(Options(etcd_));
    EXPECT_EQ(Describe(LoadOrDie(*reader)), committed ? NewState() : OldState());
  }
  // The next writer: its first write lands after the finished (or discarded) batch.
  auto next = Open(Options(etcd_));
  LoadOrDie(*next);
  Status s = WriteSync(*next, After());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_THAT(Keys(etcd_, "/shepherd/stage/"), IsEmpty());
  EXPECT_EQ(Describe(LoadOrDie(*Open(Options(etcd_)))), WithAfter(committed ? NewState() : OldState()));
}

INSTANTIATE_TEST_SUITE_P(EachPoint, EtcdStageStopTest,
                         ::testing::Values(StagePoint::kChunksWritten, StagePoint::kCommitted,
                                           StagePoint::kPartlyApplied),
                         [](const auto& info) {
                           switch (info.param) {
                             case StagePoint::kChunksWritten:
                               return std::string("AfterChunks");
                             case StagePoint::kCommitted:
                               return std::string("AfterCommit");
                             case StagePoint::kPartlyApplied:
                               return std::string("MidApply");
                           }
                           return std::string("Unknown");
                         });

// A leader deposed while it writes chunks: its commit fails on the fence, and the new leader never applies
// what it staged; it deletes it before its first write.
TEST(EtcdStageTest, ADeposedLeadersStagedChunksAreNeverApplied) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  auto raw = Raw(etcd);
  auto lease = raw->LeaseGrant(60);
  ASSERT_TRUE(lease.ok());
  auto won_a = raw->Txn({}, {net::EtcdOp{.key = "/shepherd/leader", .value = "replica-a", .lease = *lease}});
  ASSERT_TRUE(won_a.ok());
  int64_t b_revision = 0;
  {
    EtcdStoreOptions o = SmallTxns(etcd);
    o.fence = EtcdFence{.leader_key = "/shepherd/leader", .create_revision = won_a->revision};
    std::atomic<bool> armed{false};  // Before() is staged too: depose A during the second staged write
    o.stage_hook = [&](StagePoint p) {
      if (!armed || p != StagePoint::kChunksWritten) return true;
      // Replica A's lease ends; replica B campaigns and wins.
      EXPECT_TRUE(raw->LeaseRevoke(*lease).ok());
      auto won_b = raw->Txn({}, {net::EtcdOp{.key = "/shepherd/leader", .value = "replica-b"}});
      EXPECT_TRUE(won_b.ok());
      b_revision = won_b.ok() ? won_b->revision : 0;
      return true;
    };
    auto a = Open(o);
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(WriteSync(*a, Before()).ok());
    armed = true;
    Status s = WriteSync(*a, Staged());
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("leadership lost"));
  }
  ASSERT_GT(b_revision, 0);
  EXPECT_GT(Keys(etcd, "/shepherd/stage/").size(), 2u);  // A's chunks, uncommitted
  EtcdStoreOptions o = Options(etcd);
  o.fence = EtcdFence{.leader_key = "/shepherd/leader", .create_revision = b_revision};
  auto b = Open(o);
  EXPECT_EQ(Describe(LoadOrDie(*b)), OldState());
  ASSERT_TRUE(WriteSync(*b, After()).ok());
  EXPECT_THAT(Keys(etcd, "/shepherd/stage/"), IsEmpty());
  EXPECT_EQ(Describe(LoadOrDie(*Open(Options(etcd)))), WithAfter(OldState()));
}

// Small batches queued around a staged one, without waiting, touching its keys: each lands in order.
TEST(EtcdStageTest, SmallBatchesAroundAStagedOneCommitInOrder) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  auto store = Open(Options(etcd));
  ASSERT_NE(store, nullptr);
  LoadOrDie(*store);
  ASSERT_TRUE(WriteSync(*store, Before()).ok());
  std::atomic<int> ok{0};
  auto count = [&](Status s) {
    EXPECT_TRUE(s.ok()) << s.message();
    if (s.ok()) ++ok;
  };
  WriteBatch b0;
  b0.Put(Rec(Collection::kJobs, "k-1", "before"));
  b0.Put(Rec(Collection::kJobs, "k-2", "before"));
  store->Write(std::move(b0), count);
  WriteBatch big = Staged();
  for (int i = 0; i < 2000; ++i) big.Put(Rec(Collection::kFindings, "f-" + std::to_string(i), "{}"));
  store->Write(std::move(big), count);
  store->Write(After(), count);
  store->Write(PutBatch({Rec(Collection::kJobs, "tail", "z")}), count);
  store->Flush();
  EXPECT_EQ(ok.load(), 4);
  std::vector<std::string> expected = WithAfter(NewState());
  // Load's order is by first insertion: the findings were first written by the staged batch, after "added";
  // "tail" after them.
  std::vector<std::string> with_findings;
  for (const std::string& s : expected) {
    with_findings.push_back(s);
    if (s == "jobs/added=y")
      for (int i = 0; i < 2000; ++i) with_findings.push_back("findings/f-" + std::to_string(i) + "={}");
  }
  with_findings.push_back("jobs/tail=z");
  EXPECT_EQ(Describe(LoadOrDie(*Open(Options(etcd)))), with_findings);
}

// Many staged batches and a stopped writer's leftovers: the stage area is empty after each, and history is
// still compacted.
TEST(EtcdStageTest, TheStageAreaNeverGrowsAndHistoryIsCompacted) {
  EtcdCluster etcd(1);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  const int64_t first = Revision(etcd);
  EtcdStoreOptions o = SmallTxns(etcd);
  o.compact_every = 50;
  {
    EtcdStoreOptions stopping = o;
    stopping.stage_hook = [](StagePoint p) { return p != StagePoint::kChunksWritten; };
    auto store = Open(stopping);
    EXPECT_FALSE(WriteSync(*store, Staged()).ok());
  }
  ASSERT_FALSE(Keys(etcd, "/shepherd/stage/").empty());
  auto store = Open(o);
  LoadOrDie(*store);
  const uint64_t staged_before = EtcdStagedBatchesTotal();
  for (int round = 0; round < 8; ++round) {
    WriteBatch b;
    for (int i = 0; i < 200; ++i)
      b.Put(Rec(Collection::kFindings, std::to_string(round) + "-" + std::to_string(i), "{}"));
    for (int i = 0; i < 200 && round > 0; ++i)
      b.Erase(Collection::kFindings, std::to_string(round - 1) + "-" + std::to_string(i));
    ASSERT_TRUE(WriteSync(*store, std::move(b)).ok());
    EXPECT_THAT(Keys(etcd, "/shepherd/stage/"), IsEmpty()) << round;
  }
  EXPECT_EQ(EtcdStagedBatchesTotal(), staged_before + 8);
  EXPECT_EQ(Keys(etcd, "/shepherd/r/").size(), 200u);
  auto old = Raw(etcd)->Range("/shepherd/r/", true, 0, first + 1);
  ASSERT_FALSE(old.ok());
  EXPECT_THAT(old.status().message(), HasSubstr("compacted"));
}

}  // namespace
}  // namespace shepherd
