#include "slurm/node_reconcile.h"

#include <gtest/gtest.h>

#include "scheduler/cluster.h"
#include "tests/slurm/testdata.h"

namespace shepherd::slurm {
namespace {

struct Fixture {
  std::vector<SlurmNode> nodes;
  TopologyMapping topology;
};

Fixture Load(const char* nodes_file) {
  Fixture f;
  auto nodes = ParseNodes(testing::ReadTestData(nodes_file));
  auto sw = ParseTopology(testing::ReadTestData("topology_two_leaves.txt"));
  EXPECT_TRUE(nodes.ok() && sw.ok());
  f.nodes = *nodes;
  f.topology = *MapTopology(*sw);
  return f;
}

// Shepherd's record of a healthy node as an earlier import stored it.
Node Healthy(const std::string& id, const std::string& leaf) {
  Node n;
  n.id = id;
  n.hostname = "localhost";
  n.gpus = 2;
  n.gpu_memory_gib = 80;
  n.gpu_model = "H100";
  n.topology = {{"spine", "s0"}, {"leaf", leaf}};
  return n;
}

std::vector<Node> HealthyFive() {
  return {Healthy("n0", "l0"), Healthy("n1", "l0"), Healthy("n2", "l0"), Healthy("n3", "l1"),
          Healthy("n4", "l1")};
}

std::vector<std::pair<NodeChangeKind, std::string>> Kinds(const std::vector<NodeChange>& changes) {
  std::vector<std::pair<NodeChangeKind, std::string>> out;
  for (const NodeChange& c : changes) out.emplace_back(c.kind, c.node);
  return out;
}

TEST(Reconcile, FirstImportAddsEveryNodeAndTheClusterAcceptsThem) {
  Fixture f = Load("nodes_idle.txt");
  auto changes = Reconcile({f.nodes, f.topology, {}, {}, 80, "H100"});
  ASSERT_EQ(changes.size(), 5u);
  Cluster cluster(f.topology.levels);
  for (const NodeChange& c : changes) {
    EXPECT_EQ(c.kind, NodeChangeKind::kAdd);
    EXPECT_EQ(c.record.gpus, 2);
    EXPECT_TRUE(c.record.schedulable);
    EXPECT_FALSE(c.record.failed);
    EXPECT_TRUE(cluster.UpsertNode(c.record).ok()) << c.node;
  }
  EXPECT_EQ(changes[3].record.topology,
            (std::map<std::string, std::string>{{"spine", "s0"}, {"leaf", "l1"}}));
  EXPECT_EQ(cluster.UsableGpus(), 10);
}

TEST(Reconcile, NothingChangesWhenBothAgree) {
  Fixture f = Load("nodes_idle.txt");
  EXPECT_TRUE(Reconcile({f.nodes, f.topology, HealthyFive(), {}, 80, "H100"}).empty());
}

TEST(Reconcile, AKnownNodeSlurmShowsUnknownKeepsItsState) {
  // slurmctld restarted and n2's slurmd has not registered again: State=UNKNOWN. Before, every node was
  // cordoned for the seconds that took ("slurm: UNKNOWN").
  Fixture f = Load("nodes_idle.txt");
  f.nodes[2].state = *ParseNodeState("UNKNOWN");
  EXPECT_TRUE(Reconcile({f.nodes, f.topology, HealthyFive(), {}, 80, "H100"}).empty());
  // Unknown and drained is still a drain.
  f.nodes[2].state = *ParseNodeState("UNKNOWN+DRAIN");
  auto changes = Reconcile({f.nodes, f.topology, HealthyFive(), {}, 80, "H100"});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, NodeChangeKind::kCordon);
}

TEST(Reconcile, SlurmDrainsAndDownsReachShepherd) {
  Fixture f = Load("nodes_down_drain.txt");
  auto changes = Reconcile({f.nodes, f.topology, HealthyFive(), {}, 80, "H100"});
  // n1 carries a Shepherd reason, but Shepherd has no record of draining it: follow Slurm, never resume.
  EXPECT_EQ(
      Kinds(changes),
      (std::vector<std::pair<NodeChangeKind, std::string>>{
          {NodeChangeKind::kCordon, "n1"}, {NodeChangeKind::kCordon, "n2"}, {NodeChangeKind::kFail, "n4"}}));
  EXPECT_EQ(changes[1].reason, "slurm: MIXED+DRAIN: operator: bad dimm");
  EXPECT_EQ(changes[2].reason, "slurm: DOWN+NOT_RESPONDING: Not responding");
}

TEST(Reconcile, ShepherdsOwnCordonIsDrainedInSlurmOnce) {
  Fixture f = Load("nodes_idle.txt");
  std::vector<Node> mine = HealthyFive();
  mine[3].schedulable = false;
  mine[3].reason = "f-000123 sdc_suspected";
  auto changes = Reconcile({f.nodes, f.topology, mine, {}, 80, "H100"});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, NodeChangeKind::kDrainInSlurm);
  EXPECT_EQ(changes[0].node, "n3");
  EXPECT_EQ(changes[0].reason, "shepherd f-000123 sdc_suspected");
}

// n4 is down in Slurm and Shepherd failed it on its own finding (node_lost): drained, so it does not come
// back by itself when its slurmd returns. Down for Slurm's own reason, or already drained: nothing.
TEST(Reconcile, ANodeShepherdFailedIsDrainedWhileSlurmHasItDown) {
  Fixture f = Load("nodes_down_drain.txt");
  std::vector<Node> mine = HealthyFive();
  mine[1].schedulable = mine[2].schedulable = false;  // as Slurm drains them: no changes for these
  mine[1].reason = "slurm: IDLE+DRAIN: shepherd f-000007 hang";
  mine[2].reason = "slurm: MIXED+DRAIN: operator: bad dimm";
  mine[4].failed = true;
  mine[4].reason = "node_lost: Slurm reports n4 not responding";
  auto changes = Reconcile({f.nodes, f.topology, mine, {}, 80, "H100"});
  ASSERT_EQ(Kinds(changes),
            (std::vector<std::pair<NodeChangeKind, std::string>>{{NodeChangeKind::kDrainInSlurm, "n4"}}));
  EXPECT_EQ(changes[0].reason, "shepherd node_lost: Slurm reports n4 not responding");
  mine[4].reason = "slurm: DOWN+NOT_RESPONDING: Not responding";
  EXPECT_TRUE(Reconcile({f.nodes, f.topology, mine, {}, 80, "H100"}).empty());
  mine[4].reason = "node_lost: Slurm reports n4 not responding";
  EXPECT_TRUE(Reconcile({f.nodes, f.topology, mine, {"n4"}, 80, "H100"}).empty());
}

TEST(Reconcile, OperatorResumeInSlurmReleasesShepherdsDrain) {
  Fixture f = Load("nodes_idle.txt");  // n3 idle again: someone resumed it in Slurm
  std::vector<Node> mine = HealthyFive();
  mine[3].schedulable = false;
  mine[3].reason = "f-000123 sdc_suspected";
  auto changes = Reconcile({f.nodes, f.topology, mine, {"n3"}, 80, "H100"});
  EXPECT_EQ(Kinds(changes),
            (std::vector<std::pair<NodeChangeKind, std::string>>{{NodeChangeKind::kRelease, "n3"}}));
}

TEST(Reconcile, ShepherdResumesOnlyItsOwnDrainAfterAnOperatorUncordoned) {
  Fixture f = Load("nodes_down_drain.txt");  // n1: Shepherd's reason; n2: an operator's
  std::vector<Node> mine = HealthyFive();
  mine[4].failed = true;  // n4: agreed down
  mine[4].reason = "slurm: DOWN+NOT_RESPONDING: Not responding";
  auto changes = Reconcile({f.nodes, f.topology, mine, {"n1", "n2"}, 80, "H100"});
  // n2 is in drained_by_shepherd (a stale record) but its Slurm reason is an operator's: cordon, no resume.
  EXPECT_EQ(Kinds(changes), (std::vector<std::pair<NodeChangeKind, std::string>>{
                                {NodeChangeKind::kResumeInSlurm, "n1"}, {NodeChangeKind::kCordon, "n2"}}));
}

TEST(Reconcile, ANodeShepherdBlamesThatAnOperatorDrainedIsHeldAndTheOperatorsResumeReturnsIt) {
  // n2 is drained in Slurm by an operator; Shepherd failed it on its own evidence (Slurm dropped it from an
  // allocation). Before, nothing was remembered, and the operator's RESUME was answered by Shepherd draining
  // it again.
  Fixture drained = Load("nodes_down_drain.txt");
  std::vector<Node> mine = HealthyFive();
  mine[1].schedulable = false;
  mine[1].reason = "slurm: IDLE+DRAIN: shepherd f-000007 hang";
  mine[4].failed = true;
  mine[4].reason = "slurm: DOWN+NOT_RESPONDING: Not responding";
  mine[2].failed = true;
  mine[2].reason = "node_lost: Slurm removed n2 from allocation 12 (node failure)";
  auto held = Reconcile({drained.nodes, drained.topology, mine, {}, 80, "H100"});
  EXPECT_EQ(Kinds(held),
            (std::vector<std::pair<NodeChangeKind, std::string>>{{NodeChangeKind::kHeldInSlurm, "n2"}}));
  // Remembered (drained_by_shepherd holds n2): the operator resumes it in Slurm, and Shepherd follows.
  Fixture idle = Load("nodes_idle.txt");
  auto resumed = Reconcile({idle.nodes, idle.topology, mine, {"n2"}, 80, "H100"});
  EXPECT_EQ(Kinds(resumed),
            (std::vector<std::pair<NodeChangeKind, std::string>>{{NodeChangeKind::kRelease, "n1"},
                                                                 {NodeChangeKind::kRelease, "n2"},
                                                                 {NodeChangeKind::kRelease, "n4"}}));
}

TEST(Reconcile, SlurmReturnToServiceReleasesSlurmCausedHolds) {
  Fixture f = Load("nodes_idle.txt");
  std::vector<Node> mine = HealthyFive();
  mine[4].failed = true;
  mine[4].reason = "slurm: DOWN+NOT_RESPONDING: Not responding";
  mine[2].schedulable = false;
  mine[2].reason = "slurm: MIXED+DRAIN: operator: bad dimm";
  auto changes = Reconcile({f.nodes, f.topology, mine, {}, 80, "H100"});
  EXPECT_EQ(Kinds(changes), (std::vector<std::pair<NodeChangeKind, std::string>>{
                                {NodeChangeKind::kRelease, "n2"}, {NodeChangeKind::kRelease, "n4"}}));
}

TEST(Reconcile, CapacityOrTopologyChangesAreUpdatesThatKeepShepherdsFlags) {
  Fixture f = Load("nodes_idle.txt");
  std::vector<Node> mine = HealthyFive();
  mine[0].gpus = 8;
  mine[0].spare = true;
  mine[4].topology["leaf"] = "l0";
  mine.push_back(Healthy("n9", "l1"));
  auto changes = Reconcile({f.nodes, f.topology, mine, {}, 80, "H100"});
  ASSERT_EQ(Kinds(changes),
            (std::vector<std::pair<NodeChangeKind, std::string>>{{NodeChangeKind::kUpdate, "n0"},
                                                                 {NodeChangeKind::kUpdate, "n4"},
                                                                 {NodeChangeKind::kMissing, "n9"}}));
  EXPECT_EQ(changes[0].record.gpus, 2);
  EXPECT_TRUE(changes[0].record.spare);
  EXPECT_EQ(changes[1].record.topology.at("leaf"), "l1");
}

TEST(Reconcile, NodesWithoutGpusAreSkipped) {
  Fixture f = Load("nodes_idle.txt");
  f.nodes[0].gpus = {};
  auto changes = Reconcile({{f.nodes[0]}, f.topology, {}, {}, 80, "H100"});
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, NodeChangeKind::kSkipped);
}

TEST(DrainReason, PrefixesOnce) {
  EXPECT_EQ(DrainReasonFor("f-000123 sdc_suspected"), "shepherd f-000123 sdc_suspected");
  EXPECT_EQ(DrainReasonFor("shepherd f-000124 node_lost"), "shepherd f-000124 node_lost");
  EXPECT_TRUE(IsShepherdDrainReason("shepherd f-000123 sdc_suspected"));
  EXPECT_FALSE(IsShepherdDrainReason("shepherdess said so"));
  EXPECT_FALSE(IsShepherdDrainReason("operator: bad dimm"));
}

}  // namespace
}  // namespace shepherd::slurm
