#include "scheduler/rank_env.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

// Two nodes; n1 holds ranks 1 and 3 on GPUs 5 and 2 (deliberately out of order), n0 ranks 0 and 2.
struct Fixture {
  JobSpec spec;
  Placement placement;
  Fixture() {
    spec.policy.hang_timeout_s = 60;
    spec.policy.max_restarts = 7;
    spec.checkpoint.dir = "/ckpt";
    placement.ranks = {
        {0, "n0", 0, 0, 0, 0}, {1, "n1", 5, 0, 0, 1}, {2, "n0", 1, 0, 0, 2}, {3, "n1", 2, 0, 0, 3}};
  }
  std::vector<LocalRankEnv> On(const std::string& node, int attempt = 1, const PlacementNodes* nodes = nullptr) {
    RankEnvInput in;
    in.nodes = nodes;
    in.job_id = "job-7";
    in.spec = &spec;
    in.plan.dp = 4;
    in.attempt = attempt;
    in.placement = &placement;
    in.node = node;
    in.master_addr = "10.0.0.1";
    in.master_port = 23456;
    in.resume_path = "/ckpt/step-10.pt";
    in.resume_step = 10;
    in.resume_attempt = 2;
    return ComposeRankEnv(in, {"http://d:8080", "tok"});
  }
};

TEST(RankEnvTest, TorchrunLayoutSharesTheNodesGpusAndLocalRankIndexesThem) {
  Fixture f;
  auto n1 = f.On("n1", 3);
  ASSERT_EQ(n1.size(), 2u);
  // GPU 2 comes first in CUDA_VISIBLE_DEVICES, so its rank (3) is LOCAL_RANK 0.
  EXPECT_EQ(n1[0].rank, 3);
  EXPECT_EQ(n1[0].gpu, 2);
  EXPECT_EQ(n1[1].rank, 1);
  for (size_t i = 0; i < n1.size(); ++i) {
    const EnvMap& e = n1[i].env;
    EXPECT_EQ(e.at("CUDA_VISIBLE_DEVICES"), "2,5");
    EXPECT_EQ(e.at("LOCAL_RANK"), std::to_string(i));
    EXPECT_EQ(e.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(e.at("GROUP_RANK"), "1");
    EXPECT_EQ(e.at("GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(e.at("WORLD_SIZE"), "4");
    EXPECT_EQ(e.at("ROLE_RANK"), e.at("RANK"));
    EXPECT_EQ(e.at("ROLE_WORLD_SIZE"), "4");
    EXPECT_EQ(e.at("ROLE_NAME"), "default");
    EXPECT_EQ(e.at("TORCHELASTIC_RESTART_COUNT"), "2");
    EXPECT_EQ(e.at("TORCHELASTIC_MAX_RESTARTS"), "7");
    EXPECT_EQ(e.at("TORCHELASTIC_RUN_ID"), "job-7");
    EXPECT_EQ(e.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(e.at("MASTER_PORT"), "23456");
    EXPECT_EQ(e.at("SHEPHERD_ATTEMPT"), "3");
    EXPECT_EQ(e.at("SHEPHERD_URL"), "http://d:8080");
    EXPECT_EQ(e.at("SHEPHERD_PARALLELISM"), "1,1,4");
    EXPECT_EQ(e.at("SHEPHERD_RESUME_CHECKPOINT"), "/ckpt/step-10.pt");
    EXPECT_EQ(e.at("SHEPHERD_RESUME_ATTEMPT"), "2");  // the client checks the checkpoint's markers by it
  }
  EXPECT_EQ(n1[0].env.at("RANK"), "3");
  EXPECT_EQ(n1[0].env.at("SHEPHERD_RANK_COORDS"), "0,0,3");
  auto n0 = f.On("n0");
  ASSERT_EQ(n0.size(), 2u);
  EXPECT_EQ(n0[0].env.at("GROUP_RANK"), "0");
  EXPECT_EQ(n0[0].env.at("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(n0[0].env.at("TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_TRUE(f.On("n9").empty());
}

// Context parallelism adds a fourth value to both layout variables (rank = tp + TP·(cp + CP·dp)); without
// it they keep three. TP 1, CP 2, DP 2: rank 3 is cp 1, dp 1.
TEST(RankEnvTest, ContextParallelLayoutCarriesAFourthValue) {
  Fixture f;
  for (RankSlot& r : f.placement.ranks) r.cp = r.rank % 2, r.dp = r.rank / 2;
  RankEnvInput in;
  in.job_id = "job-7";
  in.spec = &f.spec;
  in.plan.dp = 2;
  in.plan.cp = 2;
  in.placement = &f.placement;
  in.node = "n1";
  const std::vector<LocalRankEnv> n1 = ComposeRankEnv(in, {"http://d:8080", "tok"});
  ASSERT_EQ(n1.size(), 2u);
  EXPECT_EQ(n1[0].rank, 3);
  EXPECT_EQ(n1[0].env.at("SHEPHERD_PARALLELISM"), "1,1,2,2");
  EXPECT_EQ(n1[0].env.at("SHEPHERD_RANK_COORDS"), "0,0,1,1");
  EXPECT_EQ(n1[1].env.at("SHEPHERD_RANK_COORDS"), "0,0,0,1");  // rank 1: cp 1, dp 0
}

TEST(RankEnvTest, PerProcessBindingShowsEachRankOnlyItsGpu) {
  Fixture f;
  f.spec.gpu_binding = GpuBinding::kPerProcess;
  auto n1 = f.On("n1");
  ASSERT_EQ(n1.size(), 2u);
  EXPECT_EQ(n1[0].env.at("CUDA_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(n1[1].env.at("CUDA_VISIBLE_DEVICES"), "5");
  EXPECT_EQ(n1[1].env.at("LOCAL_RANK"), "1");
}

TEST(RankEnvTest, NcclDefaultsSitAboveTheHangTimeoutAndTheUsersValuesWin) {
  Fixture f;
  auto e = f.On("n0")[0].env;
  EXPECT_EQ(e.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
  EXPECT_EQ(e.at("TORCH_NCCL_DUMP_ON_TIMEOUT"), "1");
  EXPECT_EQ(e.at("TORCH_NCCL_TRACE_BUFFER_SIZE"), "2000");
  EXPECT_EQ(e.at("SHEPHERD_PG_TIMEOUT_S"), "360");    // hang 60 s: max(3·60, 60 + 300)
  EXPECT_EQ(e.count("TORCH_FR_DUMP_TEMP_FILE"), 0u);  // the agent sets it under its state dir
  f.spec.env = {
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}, {"TORCH_NCCL_TRACE_BUFFER_SIZE", "0"}, {"RANK", "99"}};
  e = f.On("n0")[0].env;
  EXPECT_EQ(e.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "3");
  EXPECT_EQ(e.at("TORCH_NCCL_TRACE_BUFFER_SIZE"), "0");
  EXPECT_EQ(e.at("RANK"), "0");  // the rendezvous is not the user's to set
  f.spec.policy.hang_timeout_s = 600;
  EXPECT_EQ(f.On("n0")[0].env.at("SHEPHERD_PG_TIMEOUT_S"), "1800");
}

// The per-attempt index the controller keeps gives every node the same environment as the scan of the whole
// placement: n2 (lowest rank 1) is group 1, n0 (lowest rank 0) group 0, n1 (lowest rank 3) group 2.
TEST(RankEnvTest, ThePlacementIndexGivesTheSameEnvironmentAsTheScan) {
  Fixture f;
  f.placement.ranks = {{0, "n0", 0, 0, 0, 0}, {1, "n2", 3, 0, 0, 1}, {2, "n0", 1, 0, 0, 2},
                       {3, "n1", 2, 0, 0, 3}, {4, "n2", 0, 0, 0, 4}, {5, "n1", 7, 0, 0, 5}};
  const PlacementNodes index = IndexPlacementNodes(f.placement);
  ASSERT_EQ(index.by_node.size(), 3u);
  EXPECT_EQ(index.by_node.at("n0").group_rank, 0);
  EXPECT_EQ(index.by_node.at("n2").group_rank, 1);
  EXPECT_EQ(index.by_node.at("n1").group_rank, 2);
  EXPECT_EQ(index.by_node.at("n2").ranks, (std::vector<int>{1, 4}));
  const std::map<std::string, std::string> group = {{"n0", "0"}, {"n2", "1"}, {"n1", "2"}};
  for (const auto& [node, want] : group) {
    auto scanned = f.On(node, 2);
    auto indexed = f.On(node, 2, &index);
    ASSERT_EQ(indexed.size(), 2u) << node;
    ASSERT_EQ(scanned.size(), indexed.size()) << node;
    for (size_t i = 0; i < indexed.size(); ++i) {
      EXPECT_EQ(indexed[i].rank, scanned[i].rank);
      EXPECT_EQ(indexed[i].gpu, scanned[i].gpu);
      EXPECT_EQ(indexed[i].env, scanned[i].env) << node;
      EXPECT_EQ(indexed[i].env.at("GROUP_RANK"), want);
      EXPECT_EQ(indexed[i].env.at("GROUP_WORLD_SIZE"), "3");
    }
  }
  EXPECT_TRUE(f.On("n9", 2, &index).empty());
}

}  // namespace
}  // namespace shepherd
