#include "slurm/nodes.h"

#include <gtest/gtest.h>

#include "tests/slurm/testdata.h"

namespace shepherd::slurm {
namespace {

const SlurmNode& ByName(const std::vector<SlurmNode>& nodes, const std::string& name) {
  for (const SlurmNode& n : nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  static SlurmNode none;
  return none;
}

TEST(ParseNodes, IdleClusterFromScontrol) {
  auto nodes = ParseNodes(testing::ReadTestData("nodes_idle.txt"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 5u);
  const char* names[] = {"n0", "n1", "n2", "n3", "n4"};
  for (int i = 0; i < 5; ++i) {
    const SlurmNode& n = (*nodes)[i];
    EXPECT_EQ(n.name, names[i]);
    EXPECT_EQ(n.cpus, 2);
    EXPECT_EQ(n.real_memory_mb, 1024);
    EXPECT_EQ(n.gpus.count, 2);
    EXPECT_EQ(n.gpus.model, "");
    EXPECT_EQ(n.address, "localhost");
    EXPECT_EQ(n.hostname, "localhost");
    EXPECT_EQ(n.state.base, SlurmBaseState::kIdle);
    EXPECT_FALSE(n.state.drain);
    EXPECT_EQ(n.reason, "");
    EXPECT_EQ(n.features, (std::vector<std::string>{"fakegpu", "x86"}));
    EXPECT_EQ(n.partitions, (std::vector<std::string>{"debug"}));
    EXPECT_EQ(ShepherdStateOf(n.state), NodeState::kAvailable);
  }
}

TEST(ParseNodes, DrainedDrainingAndDownNodes) {
  auto nodes = ParseNodes(testing::ReadTestData("nodes_down_drain.txt"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  const SlurmNode& n1 = ByName(*nodes, "n1");
  EXPECT_EQ(n1.state_text, "IDLE+DRAIN");
  EXPECT_EQ(n1.state.base, SlurmBaseState::kIdle);
  EXPECT_TRUE(n1.state.drain);
  EXPECT_EQ(n1.reason, "shepherd f-000123 sdc_suspected");
  EXPECT_EQ(n1.reason_user, "root");
  EXPECT_EQ(ShepherdStateOf(n1.state), NodeState::kCordoned);

  const SlurmNode& n2 = ByName(*nodes, "n2");
  EXPECT_EQ(n2.state.base, SlurmBaseState::kMixed);
  EXPECT_TRUE(n2.state.drain);
  EXPECT_EQ(n2.reason, "operator: bad dimm");
  EXPECT_EQ(ShepherdStateOf(n2.state), NodeState::kCordoned);

  const SlurmNode& n4 = ByName(*nodes, "n4");
  EXPECT_EQ(n4.state.base, SlurmBaseState::kDown);
  EXPECT_TRUE(n4.state.not_responding);
  EXPECT_EQ(n4.reason, "Not responding");
  EXPECT_EQ(ShepherdStateOf(n4.state), NodeState::kFailed);

  EXPECT_EQ(ShepherdStateOf(ByName(*nodes, "n0").state), NodeState::kAvailable);
}

TEST(ParseNodes, AllocatedNodesAreAvailableToShepherd) {
  auto nodes = ParseNodes(testing::ReadTestData("nodes_drain_alloc.txt"));
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(ByName(*nodes, "n3").state.base, SlurmBaseState::kMixed);
  EXPECT_EQ(ShepherdStateOf(ByName(*nodes, "n3").state), NodeState::kAvailable);
}

// sinfo's spellings of the same moment as nodes_down_drain.txt.
TEST(ParseNodeState, SinfoLongAndShortFormsAgreeWithScontrol) {
  auto scontrol = ParseNodes(testing::ReadTestData("nodes_down_drain.txt"));
  ASSERT_TRUE(scontrol.ok());
  for (const char* file : {"sinfo_down_drain.txt", "sinfo_short_down_drain.txt"}) {
    std::istringstream in(testing::ReadTestData(file));
    std::string name, state, rest;
    int lines = 0;
    while (in >> name >> state) {
      std::getline(in, rest);
      ++lines;
      auto parsed = ParseNodeState(state);
      ASSERT_TRUE(parsed.ok()) << file << " " << state;
      const SlurmNode& n = ByName(*scontrol, name);
      EXPECT_EQ(ShepherdStateOf(*parsed), ShepherdStateOf(n.state)) << file << " " << name << " " << state;
      EXPECT_EQ(parsed->drain, n.state.drain) << file << " " << name;
      EXPECT_EQ(parsed->not_responding, n.state.not_responding) << file << " " << name;
    }
    EXPECT_EQ(lines, 5) << file;
  }
}

TEST(ParseNodeState, FlagsAndSuffixes) {
  auto s = ParseNodeState("IDLE+DRAIN+NOT_RESPONDING");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->drain);
  EXPECT_TRUE(s->not_responding);
  EXPECT_EQ(ShepherdStateOf(*s), NodeState::kFailed);  // failed beats cordoned

  auto powered = ParseNodeState("idle~");
  ASSERT_TRUE(powered.ok());
  EXPECT_TRUE(powered->powered_down);
  EXPECT_EQ(ShepherdStateOf(*powered), NodeState::kAvailable);

  auto inval = ParseNodeState("inval");
  ASSERT_TRUE(inval.ok());
  EXPECT_EQ(ShepherdStateOf(*inval), NodeState::kFailed);

  auto future = ParseNodeState("FUTURE");
  ASSERT_TRUE(future.ok());
  EXPECT_EQ(ShepherdStateOf(*future), NodeState::kCordoned);

  auto unknown_flag = ParseNodeState("ALLOCATED+CLOUD+SOMETHING_NEW");
  ASSERT_TRUE(unknown_flag.ok());
  EXPECT_EQ(unknown_flag->base, SlurmBaseState::kAllocated);

  EXPECT_EQ(ParseNodeState("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseNodeState("sleepy").status().code(), Code::kInvalidArgument);
}

// Gres strings in the forms slurm.conf(5) and scontrol print them (not captured: our cluster has one form).
TEST(ParseGresGpus, Forms) {
  struct Case {
    const char* gres;
    int count;
    const char* model;
  } cases[] = {
      {"gpu:2", 2, ""},
      {"gpu:a100:4(S:0-1)", 4, "a100"},
      {"gpu:tesla:2,gpu:k80:2", 4, "tesla"},
      {"gpu:4,mps:400", 4, ""},
      {"mps:100", 0, ""},
      {"(null)", 0, ""},
      {"", 0, ""},
      {"gpu:h100:8(S:0,1),nic:2", 8, "h100"},
  };
  for (const Case& c : cases) {
    auto g = ParseGresGpus(c.gres);
    ASSERT_TRUE(g.ok()) << c.gres;
    EXPECT_EQ(g->count, c.count) << c.gres;
    EXPECT_EQ(g->model, c.model) << c.gres;
  }
  EXPECT_EQ(ParseGresGpus("gpu:lots").status().code(), Code::kInvalidArgument);
}

TEST(ParseNodes, RejectsARecordWithoutState) {
  auto r = ParseNodes("NodeName=x CPUTot=4\n");
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("x"), std::string::npos);
}

}  // namespace
}  // namespace shepherd::slurm
