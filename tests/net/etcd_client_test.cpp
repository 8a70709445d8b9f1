// EtcdClient against a real etcd member: ranges with paging, txns and their compares, leases, compaction,
// member status, and endpoints that do not answer.
#include "net/etcd_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "tests/fakes/etcd_cluster.h"

namespace shepherd::net {
namespace {

using ::shepherd::testing::EtcdCluster;
using ::testing::HasSubstr;

std::unique_ptr<EtcdClient> Connect(std::vector<std::string> endpoints,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto c = EtcdClient::Create(EtcdClientOptions{.endpoints = std::move(endpoints), .timeout = timeout});
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(c).value() : nullptr;
}

EtcdOp Put(std::string key, std::string value, int64_t lease = 0) {
  return EtcdOp{.kind = EtcdOp::Kind::kPut, .key = std::move(key), .value = std::move(value), .lease = lease};
}

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.ok()) << etcd_.error();
    client_ = Connect(etcd_.endpoints());
    ASSERT_NE(client_, nullptr);
  }
  EtcdCluster etcd_{1};
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, PutsAndRangesBinaryKeysAndValuesWithPaging) {
  // Bytes that JSON strings could not carry raw, and a prefix ending in 0xff.
  const std::string value("a\0b\xff\"\n", 6);
  std::vector<EtcdOp> ops;
  for (int i = 0; i < 5; ++i) ops.push_back(Put("/p\xff/k" + std::to_string(i), value + std::to_string(i)));
  ops.push_back(
      Put("/p\xff"
          "0",
          "outside"));  // sorts after the prefix "/p\xff/"
  ops.push_back(Put("/q", "outside"));
  auto t = client_->Txn({}, ops);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(t->succeeded);
  EXPECT_GT(t->revision, 1);

  auto first = client_->Range("/p\xff/", true, 2);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->kvs.size(), 2u);
  EXPECT_TRUE(first->more);
  EXPECT_EQ(first->kvs[0].key, "/p\xff/k0");
  EXPECT_EQ(first->kvs[0].value, value + "0");
  EXPECT_EQ(first->kvs[1].key, "/p\xff/k1");
  EXPECT_EQ(first->kvs[0].create_revision, t->revision);  // one txn: one revision for all its puts
  EXPECT_EQ(first->revision, t->revision);

  auto all = client_->Range("/p\xff/", true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->kvs.size(), 5u);
  EXPECT_FALSE(all->more);

  auto keys = client_->Range("/p\xff/k4", false, 0, 0, /*keys_only=*/true);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->kvs.size(), 1u);
  EXPECT_EQ(keys->kvs[0].key, "/p\xff/k4");
  EXPECT_EQ(keys->kvs[0].value, "");

  auto missing = client_->Range("/nothing", false);
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->kvs.empty());
}

TEST_F(EtcdClientTest, TxnRunsSuccessOnlyWhenEveryCompareHolds) {
  auto put = client_->Txn({}, {Put("/leader", "me")});
  ASSERT_TRUE(put.ok());
  const int64_t created = put->revision;

  EtcdCompare holds{.key = "/leader", .target = EtcdCompare::Target::kCreateRevision, .number = created};
  auto ok = client_->Txn({holds}, {Put("/a", "1")}, {Put("/b", "failure branch")});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->succeeded);

  EtcdCompare fails = holds;
  fails.number = created + 1000;
  auto no = client_->Txn({fails}, {Put("/a", "2")}, {Put("/b", "failure branch")});
  ASSERT_TRUE(no.ok()) << no.status().message();
  EXPECT_FALSE(no->succeeded);
  EXPECT_EQ(client_->Range("/a", false)->kvs.at(0).value, "1");
  EXPECT_EQ(client_->Range("/b", false)->kvs.at(0).value, "failure branch");

  EtcdCompare value{.key = "/leader", .target = EtcdCompare::Target::kValue, .value = "me"};
  EtcdCompare absent{.key = "/none", .target = EtcdCompare::Target::kVersion, .number = 0};
  auto both = client_->Txn({value, absent}, {EtcdOp{.kind = EtcdOp::Kind::kDelete, .key = "/a"}});
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->succeeded);
  EXPECT_TRUE(client_->Range("/a", false)->kvs.empty());

  // A prefix delete removes the prefix's keys only.
  ASSERT_TRUE(client_->Txn({}, {Put("/d/1", "x"), Put("/d/2", "x"), Put("/e", "x")}).ok());
  ASSERT_TRUE(client_->Txn({}, {EtcdOp{.kind = EtcdOp::Kind::kDelete, .key = "/d/", .prefix = true}}).ok());
  EXPECT_TRUE(client_->Range("/d/", true)->kvs.empty());
  EXPECT_EQ(client_->Range("/e", false)->kvs.size(), 1u);
}

TEST_F(EtcdClientTest, LeaseGrantKeepAliveAndRevokeDeletesItsKeys) {
  auto lease = client_->LeaseGrant(30);
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  EXPECT_NE(*lease, 0);
  ASSERT_TRUE(client_->Txn({}, {Put("/leased", "x", *lease)}).ok());
  auto kv = client_->Range("/leased", false);
  ASSERT_EQ(kv->kvs.size(), 1u);
  EXPECT_EQ(kv->kvs[0].lease, *lease);

  auto ttl = client_->LeaseKeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().message();
  EXPECT_GT(*ttl, 0);
  EXPECT_LE(*ttl, 30);

  ASSERT_TRUE(client_->LeaseRevoke(*lease).ok());
  EXPECT_TRUE(client_->Range("/leased", false)->kvs.empty());
  auto gone = client_->LeaseKeepAlive(*lease);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_EQ(*gone, 0);
  EXPECT_TRUE(client_->LeaseRevoke(*lease).ok());  // unknown by now: not an error
}

TEST_F(EtcdClientTest, CompactionDropsOldRevisionsAndRepeatingItIsHarmless) {
  auto first = client_->Txn({}, {Put("/c", "1")});
  auto second = client_->Txn({}, {Put("/c", "2")});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(client_->Range("/c", false, 0, first->revision)->kvs.at(0).value, "1");
  ASSERT_TRUE(client_->Compact(second->revision).ok());
  auto old = client_->Range("/c", false, 0, first->revision);
  EXPECT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), Code::kInvalidArgument);  // etcd answered: not "try another member"
  EXPECT_THAT(old.status().message(), HasSubstr("compacted"));
  EXPECT_TRUE(client_->Compact(second->revision).ok());
}

TEST_F(EtcdClientTest, MemberHealthReportsSizeAndEndpoint) {
  auto s = client_->MemberHealth();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_GT(s->db_size, 0);
  EXPECT_GT(s->revision, 0);
  EXPECT_EQ(s->endpoint, etcd_.endpoint(0));
}

TEST_F(EtcdClientTest, ADeadEndpointIsSkippedAndAllDeadFailsNamingThem) {
  // Port 1 on loopback: nothing listens (connection refused at once).
  auto mixed = Connect({"http://127.0.0.1:1", etcd_.endpoint(0)});
  ASSERT_NE(mixed, nullptr);
  EXPECT_TRUE(mixed->Txn({}, {Put("/x", "1")}).ok());
  EXPECT_TRUE(mixed->Range("/x", false).ok());

  auto dead = Connect({"http://127.0.0.1:1", "http://127.0.0.1:2"}, std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  auto r = dead->Range("/x", false);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("http://127.0.0.1:1,http://127.0.0.1:2"));
}

TEST_F(EtcdClientTest, CancelFailsEveryLaterCall) {
  client_->Cancel();
  auto r = client_->Range("/x", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

TEST(EtcdClientCreateTest, RefusesBadEndpoints) {
  EXPECT_EQ(EtcdClient::Create({}).status().code(), Code::kInvalidArgument);
  for (const char* bad :
       {"127.0.0.1:2379", "https://h:1", "http://h", "http://h:", "http://h:12/x", "http://:1"}) {
    auto c = EtcdClient::Create(EtcdClientOptions{.endpoints = {bad}});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(bad));
  }
}

TEST(EtcdClusterTest, ThreeMembersSurviveOneKilledAndAMemberRestarts) {
  EtcdCluster etcd(3);
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  auto client = Connect(etcd.endpoints());
  ASSERT_TRUE(client->Txn({}, {Put("/k", "1")}).ok());
  etcd.Kill(0);  // the client's current endpoint
  auto r = client->Txn({}, {Put("/k", "2")});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(etcd.Restart(0)) << etcd.error();
  auto only0 = Connect({etcd.endpoint(0)});
  // The restarted member catches up (bounded polling: it replays from its peers).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string seen;
  while (std::chrono::steady_clock::now() < until) {
    auto got = only0->Range("/k", false);
    if (got.ok() && !got->kvs.empty() && (seen = got->kvs[0].value) == "2") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(seen, "2");
}

}  // namespace
}  // namespace shepherd::net
