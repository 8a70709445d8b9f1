// The real shepherdd binary with --slurm against the real local Slurm cluster (tests/slurm/local_cluster.h):
// the inventory is imported from Slurm, Slurm's drains show up in Shepherd, and Shepherd's own cordons are
// drained in Slurm with a reason naming them; Shepherd never resumes a node an operator drained. Runs in the
// slurm_cluster_test binary (one cluster for all), after cluster_test.cpp; it leaves every node resumed.
#include <gtest/gtest.h>

#include <fstream>

#include "core/json.h"
#include "tests/integration/harness.h"
#include "tests/slurm/local_cluster.h"

namespace shepherd::slurm {
namespace {

using ::shepherd::testing::Daemon;
using ::shepherd::testing::Http;
using ::shepherd::testing::TempDir;
using std::chrono::seconds;
using testing::LocalCluster;
using testing::WaitFor;

#define REQUIRE_CLUSTER()                                              \
  if (!LocalCluster::unavailable_reason().empty())                     \
    GTEST_SKIP() << "skipped: " << LocalCluster::unavailable_reason(); \
  ASSERT_TRUE(LocalCluster::start_error().empty()) << LocalCluster::start_error()

Json NodeOf(int port, const std::string& id) {
  auto r = Http(port, "GET", "/v1/nodes/" + id);
  return r.status == 200 ? Json::parse(r.body) : Json::object();
}

std::string SlurmReason(const std::string& node) {
  return LocalCluster::Sh({"sinfo", "-n", node, "-h", "-o", "%E"});
}
std::string SlurmState(const std::string& node) {
  return LocalCluster::Sh({"sinfo", "-n", node, "-h", "-o", "%T"});
}

// shepherdd --slurm with a short reconcile interval, its database in a fresh directory.
struct SlurmDaemon {
  TempDir dir;
  std::unique_ptr<Daemon> daemon;
  SlurmDaemon() {
    std::ofstream(dir.path + "/config.json")
        << Json{{"slurm", {{"slurm_conf", LocalCluster::slurm_conf()}, {"reconcile_interval_s", 0.3}}}}
               .dump();
    daemon =
        std::make_unique<Daemon>(dir.path, std::vector<std::string>{"--config", dir.path + "/config.json"});
  }
  int port() const { return daemon->port(); }
};

TEST(SlurmDaemon, ImportsTheInventoryAndFollowsDrains) {
  REQUIRE_CLUSTER();
  SlurmDaemon d;
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  // Imported: five nodes with the Gres' two GPUs, CPUs' host, and the switch tree as spine/leaf.
  ASSERT_TRUE(WaitFor(seconds(30), [&] {
    auto r = Http(d.port(), "GET", "/v1/nodes");
    return r.status == 200 && Json::parse(r.body)["nodes"].size() == 5;
  })) << d.daemon->log();
  for (const char* id : {"n0", "n1", "n2", "n3", "n4"}) {
    Json n = NodeOf(d.port(), id);
    EXPECT_EQ(n["gpus"], 2) << n.dump();
    EXPECT_EQ(n["topology"]["spine"], "s0") << n.dump();
    EXPECT_EQ(n["state"], "available") << n.dump();
  }
  EXPECT_EQ(NodeOf(d.port(), "n0")["topology"]["leaf"], "l0");
  EXPECT_EQ(NodeOf(d.port(), "n4")["topology"]["leaf"], "l1");

  // An operator drains n1 in Slurm: Shepherd cordons it with Slurm's reason.
  LocalCluster::Sh({"scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=fan maintenance"});
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return NodeOf(d.port(), "n1")["state"] == "cordoned"; }))
      << NodeOf(d.port(), "n1").dump();
  EXPECT_NE(NodeOf(d.port(), "n1")["reason"].get<std::string>().find("fan maintenance"), std::string::npos);

  // Returning n1 to service in Shepherd does not resume it in Slurm: the operator's drain stands, and the
  // next reconcile cordons it again.
  auto patch = Http(d.port(), "PATCH", "/v1/nodes/n1", R"({"schedulable": true})");
  ASSERT_EQ(patch.status, 200) << patch.body;
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return NodeOf(d.port(), "n1")["state"] == "cordoned"; }));
  EXPECT_EQ(SlurmReason("n1"), "fan maintenance");
  EXPECT_NE(SlurmState("n1").find("drain"), std::string::npos) << SlurmState("n1");

  // The operator resumes it in Slurm: Shepherd follows.
  LocalCluster::Sh({"scontrol", "update", "NodeName=n1", "State=RESUME"});
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return NodeOf(d.port(), "n1")["state"] == "available"; }))
      << NodeOf(d.port(), "n1").dump();
}

TEST(SlurmDaemon, ShepherdsCordonDrainsInSlurmAndItsReturnResumes) {
  REQUIRE_CLUSTER();
  SlurmDaemon d;
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return NodeOf(d.port(), "n2")["state"] == "available"; }));

  auto cordon = Http(d.port(), "PATCH", "/v1/nodes/n2", R"({"schedulable": false, "reason": "bad dimm"})");
  ASSERT_EQ(cordon.status, 200) << cordon.body;
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return SlurmReason("n2") == "shepherd bad dimm"; }))
      << SlurmReason("n2") << "\n"
      << d.daemon->log();
  EXPECT_NE(SlurmState("n2").find("drain"), std::string::npos) << SlurmState("n2");
  EXPECT_EQ(NodeOf(d.port(), "n2")["state"], "cordoned");  // Shepherd's own cordon stays as it was

  // Shepherd drained it, so Shepherd may resume it once an operator returns it in Shepherd.
  auto back = Http(d.port(), "PATCH", "/v1/nodes/n2", R"({"schedulable": true})");
  ASSERT_EQ(back.status, 200) << back.body;
  ASSERT_TRUE(WaitFor(seconds(20), [&] { return SlurmState("n2") == "idle"; }))
      << SlurmState("n2") << " " << SlurmReason("n2") << "\n"
      << d.daemon->log();
  EXPECT_EQ(NodeOf(d.port(), "n2")["state"], "available");
}

}  // namespace
}  // namespace shepherd::slurm
