#include "slurm/step_env.h"

#include <gtest/gtest.h>

namespace shepherd::slurm {
namespace {

// TP=2, DP=2, PP=1 on three nodes, rank order tp + 2·dp: ranks 0,1 on n3 (one TP group), 2 on n0, 3 on n2.
Placement Layout() {
  Placement p;
  p.ranks = {{0, "n3", 0, 0, 0, 0}, {1, "n3", 1, 1, 0, 0}, {2, "n0", 0, 0, 0, 1}, {3, "n2", 1, 1, 0, 1}};
  return p;
}

EnvMap Task(int procid, const std::string& node) {
  EnvMap env = EncodeLayout(Layout());
  env["SLURM_PROCID"] = std::to_string(procid);
  env["SLURMD_NODENAME"] = node;
  return env;
}

TEST(RankEnv, EncodesTheLayoutAsRankIndexedTables) {
  EnvMap env = EncodeLayout(Layout());
  EXPECT_EQ(env.at("SHEPHERD_SLURM_NODES"), "n3,n3,n0,n2");
  EXPECT_EQ(env.at("SHEPHERD_SLURM_GPUS"), "0,1,0,1");
  EXPECT_EQ(env.at("SHEPHERD_SLURM_COORDS"), "0.0.0,1.0.0,0.0.1,1.0.1");
}

TEST(RankEnv, SecondRankOfASharedNode) {
  auto env = RankEnvironment(Task(1, "n3"));
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(*env, (EnvMap{{"RANK", "1"},
                          {"SHEPHERD_RANK", "1"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"CUDA_VISIBLE_DEVICES", "1"},
                          {"SHEPHERD_RANK_COORDS", "1,0,0"}}));
}

TEST(RankEnv, AloneOnItsNode) {
  auto env = RankEnvironment(Task(3, "n2"));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->at("LOCAL_RANK"), "0");
  EXPECT_EQ(env->at("LOCAL_WORLD_SIZE"), "1");
  EXPECT_EQ(env->at("SHEPHERD_RANK_COORDS"), "1,0,1");
}

TEST(RankEnv, RefusesToRunOnAnotherNodeThanPlaced) {
  EXPECT_EQ(RankEnvironment(Task(2, "n1")).status().code(), Code::kConflict);
}

TEST(RankEnv, RejectsBrokenTables) {
  EXPECT_EQ(RankEnvironment(Task(4, "n0")).status().code(), Code::kInvalidArgument);
  EnvMap short_gpus = Task(0, "n3");
  short_gpus["SHEPHERD_SLURM_GPUS"] = "0,1";
  EXPECT_EQ(RankEnvironment(short_gpus).status().code(), Code::kInvalidArgument);
  EnvMap missing = Task(0, "n3");
  missing.erase("SHEPHERD_SLURM_COORDS");
  EXPECT_EQ(RankEnvironment(missing).status().code(), Code::kInvalidArgument);
}

// The controller's per-rank variables (ComposeRankEnv, as the agents get them) travel as tables; with them
// the wrapper derives nothing of its own.
TEST(RankEnv, ComposedTablesAreTheRanksVariables) {
  std::vector<EnvMap> per_rank = {{{"CUDA_VISIBLE_DEVICES", "0,1"}, {"GROUP_RANK", "0"}, {"RANK", "0"}},
                                  {{"CUDA_VISIBLE_DEVICES", "0,1"}, {"GROUP_RANK", "0"}, {"RANK", "1"}},
                                  {{"CUDA_VISIBLE_DEVICES", "0"}, {"GROUP_RANK", "1"}, {"RANK", "2"}},
                                  {{"CUDA_VISIBLE_DEVICES", "1"}, {"GROUP_RANK", "2"}, {"RANK", "3"}}};
  auto tables = EncodeRankTables(per_rank);
  ASSERT_TRUE(tables.ok()) << tables.status().message();
  EXPECT_EQ(tables->at("SHEPHERD_SLURM_KEYS"), "CUDA_VISIBLE_DEVICES,GROUP_RANK,RANK");
  EXPECT_EQ(tables->at("SHEPHERD_SLURM_V_CUDA_VISIBLE_DEVICES"), "0,1;0,1;0;1");
  EnvMap task = Task(1, "n3");
  task.insert(tables->begin(), tables->end());
  auto env = RankEnvironment(task);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->at("CUDA_VISIBLE_DEVICES"), "0,1");  // the node's GPUs (per_node binding), not "1"
  EXPECT_EQ(env->at("GROUP_RANK"), "0");
  EXPECT_EQ(env->at("RANK"), "1");
  EXPECT_EQ(env->size(), 3u);  // nothing derived (LOCAL_RANK etc. come from the tables or srun's environment)
  // A table that does not list every rank refuses to run the rank.
  task["SHEPHERD_SLURM_V_GROUP_RANK"] = "0;0;1";
  EXPECT_EQ(RankEnvironment(task).status().code(), Code::kInvalidArgument);
}

TEST(RankEnv, TablesRefuseValuesWithTheSeparatorAndUnevenKeys) {
  EXPECT_EQ(EncodeRankTables({{{"A", "x;y"}}}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(EncodeRankTables({{{"A", "1"}}, {{"B", "2"}}}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(EncodeRankTables({{{"A", "1"}}, {{"A", "2"}, {"B", "3"}}}).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace shepherd::slurm
