// SlurmNodeSync on real `scontrol show nodes` / `scontrol show topology` output captured from the local cluster
// (tests/slurm/testdata): import, Slurm's drains, Shepherd's own cordons drained with the finding's id and
// kind, and the drained_by_shepherd record.
#include "control/launch/slurm_node_sync.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/json.h"
#include "tests/fakes/fake_clock.h"

namespace shepherd {
namespace {

std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(SLURM_TESTDATA_DIR) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

slurm::SlurmView View(const std::string& nodes_file) {
  slurm::SlurmView v;
  v.nodes = *slurm::ParseNodes(ReadTestData(nodes_file));
  v.topology = *slurm::MapTopology(*slurm::ParseTopology(ReadTestData("topology_two_leaves.txt")),
                                   DefaultTopologyLevels());
  return v;
}

const Record* MetaRecord(const WriteBatch& b) {
  const Record* out = nullptr;
  for (const auto& op : b.ops)
    if (!op.erase && op.record.collection == Collection::kMeta && op.record.key == SlurmNodeSync::kDrainedKey)
      out = &op.record;
  return out;
}

class SlurmSyncTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  Inventory inv_{DefaultTopologyLevels(), {}};
  FindingLog findings_;
  SlurmNodeSync sync_{&inv_, &findings_, 80};
  WriteBatch b_;
};

TEST_F(SlurmSyncTest, ImportsEveryNodeWithGpusAndTopology) {
  auto commands = sync_.Apply(View("nodes_idle.txt"), clock_.Now(), &b_);
  EXPECT_TRUE(commands.empty());
  ASSERT_EQ(inv_.cluster().size(), 5);
  const Node& n3 = *inv_.Find("n3");
  EXPECT_EQ(n3.gpus, 2);
  EXPECT_EQ(n3.hostname, "localhost");
  EXPECT_EQ(n3.topology.at("spine"), "s0");
  EXPECT_EQ(n3.topology.at("leaf"), "l1");
  EXPECT_TRUE(n3.schedulable);
  EXPECT_FALSE(n3.failed);
  // A second pass over the same view changes nothing.
  WriteBatch again;
  EXPECT_TRUE(sync_.Apply(View("nodes_idle.txt"), clock_.Now(), &again).empty());
  EXPECT_TRUE(again.empty());
}

TEST_F(SlurmSyncTest, SlurmsDrainAndDownShowUpAndNothingIsDrainedBack) {
  sync_.Apply(View("nodes_idle.txt"), clock_.Now(), &b_);
  // Captured with n1 drained (a "shepherd ..." reason, but not a drain this Shepherd made), n2 draining for
  // an operator and n4 down (testdata/README.md).
  auto commands = sync_.Apply(View("nodes_down_drain.txt"), clock_.Now(), &b_);
  EXPECT_TRUE(commands.empty());  // nothing is resumed, nor echoed back as Shepherd's drain
  for (const char* id : {"n1", "n2"}) {
    EXPECT_FALSE(inv_.Find(id)->schedulable) << id;
    EXPECT_EQ(inv_.Find(id)->reason.rfind("slurm: ", 0), 0u) << inv_.Find(id)->reason;
  }
  EXPECT_NE(inv_.Find("n2")->reason.find("operator: bad dimm"), std::string::npos) << inv_.Find("n2")->reason;
  EXPECT_TRUE(inv_.Find("n4")->failed) << inv_.Find("n4")->reason;
  EXPECT_TRUE(inv_.Find("n0")->schedulable && !inv_.Find("n0")->failed);
  // Back to idle: Shepherd releases what Slurm had held.
  EXPECT_TRUE(sync_.Apply(View("nodes_idle.txt"), clock_.Now(), &b_).empty());
  for (const Node* n : inv_.cluster().nodes()) EXPECT_TRUE(n->schedulable && !n->failed) << n->id;
}

TEST_F(SlurmSyncTest, AFindingsCordonIsDrainedInSlurmWithItsIdAndKind) {
  sync_.Apply(View("nodes_idle.txt"), clock_.Now(), &b_);
  Finding f;
  f.id = findings_.NextId();
  f.kind = FindingKind::kSdcSuspected;
  findings_.Add(f);
  inv_.Apply({"n2", NodeActionKind::kCordon, "sdc suspected on rank 5"}, f.id, clock_.Now(), &b_);

  auto commands = sync_.Apply(View("nodes_idle.txt"), clock_.Now(), &b_);
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0].kind, SlurmNodeCommand::Kind::kDrain);
  EXPECT_EQ(commands[0].node, "n2");
  EXPECT_EQ(commands[0].reason, "shepherd " + f.id + " sdc_suspected");

  // A failed drain is not remembered (the next pass tries again); a successful one is, durably.
  WriteBatch failed;
  sync_.OnCommandsDone({{commands[0], Unavailable("Invalid user id")}}, &failed);
  EXPECT_TRUE(sync_.drained_by_shepherd().empty());
  EXPECT_EQ(MetaRecord(failed), nullptr);
  WriteBatch ok;
  sync_.OnCommandsDone({{commands[0], Status::Ok()}}, &ok);
  EXPECT_EQ(sync_.drained_by_shepherd(), std::set<std::string>{"n2"});
  ASSERT_NE(MetaRecord(ok), nullptr);

  SlurmNodeSync restored(&inv_, &findings_, 80);
  ASSERT_TRUE(restored.Restore(MetaRecord(ok)->body).ok());
  EXPECT_EQ(restored.drained_by_shepherd(), std::set<std::string>{"n2"});
  EXPECT_FALSE(restored.Restore("{not json").ok());
}

}  // namespace
}  // namespace shepherd
