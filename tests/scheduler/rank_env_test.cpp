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
  std::vector<LocalRankEnv> On(const std::string& node, int attempt = 1) {
    RankEnvInput in;
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

}  // namespace
}  // namespace shepherd
