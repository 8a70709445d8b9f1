#include "planner/launch_args.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace shepherd {
namespace {

using Args = std::vector<std::string>;

// A dense 3D layout: TP 8 with sequence parallelism, 4 uneven pipeline stages with 2 virtual stages each,
// the distributed optimizer, selective recompute.
TEST(LaunchArgs, MegatronDense3d) {
  PlanEstimate e;
  e.plan = {.tp = 8, .pp = 4, .dp = 16, .zero_stage = 1, .micro_batches = 32, .micro_batch_size = 2};
  e.plan.vpp = 2;
  e.plan.sequence_parallel = true;
  e.stage_layers = {15, 17, 17, 15};
  e.activation_recompute = Recompute::kSelective;
  const LaunchArgs a = MakeLaunchArgs(e);
  EXPECT_EQ(a.megatron, (Args{"--tensor-model-parallel-size",
                              "8",
                              "--pipeline-model-parallel-size",
                              "4",
                              "--context-parallel-size",
                              "1",
                              "--expert-model-parallel-size",
                              "1",
                              "--num-virtual-stages-per-pipeline-rank",
                              "2",
                              "--decoder-first-pipeline-num-layers",
                              "15",
                              "--decoder-last-pipeline-num-layers",
                              "15",
                              "--sequence-parallel",
                              "--use-distributed-optimizer",
                              "--micro-batch-size",
                              "2",
                              "--global-batch-size",
                              "1024",
                              "--recompute-granularity",
                              "selective"}));
  const Json expected = {{"parallelism.tensor_parallel_degree", 8},
                         {"parallelism.pipeline_parallel_degree", 4},
                         {"parallelism.context_parallel_degree", 1},
                         {"parallelism.expert_parallel_degree", 1},
                         {"parallelism.data_parallel_shard_degree", 16},
                         {"parallelism.data_parallel_replicate_degree", 1},
                         {"parallelism.pipeline_parallel_microbatch_size", 2},
                         {"training.local_batch_size", 64},
                         {"training.global_batch_size", 1024},
                         {"activation_checkpoint.mode", "selective"},
                         {"activation_checkpoint.selective_ac_option", "op"}};
  EXPECT_EQ(a.torchtitan, expected);
}

// An MoE layout without pipeline: context and expert parallelism, replicated (ZeRO 0) data parallelism,
// block recompute of 3 layers, even stages (no stage flags).
TEST(LaunchArgs, MoeContextParallelBlockRecompute) {
  PlanEstimate e;
  e.plan = {.tp = 2, .pp = 1, .dp = 4, .zero_stage = 0, .micro_batches = 8, .micro_batch_size = 1, .cp = 2};
  e.plan.ep = 4;
  e.plan.etp = 1;
  e.stage_layers = {24};
  e.activation_recompute = Recompute::kFull;
  e.recompute_num_layers = 3;
  const LaunchArgs a = MakeLaunchArgs(e);
  EXPECT_EQ(a.megatron, (Args{"--tensor-model-parallel-size",
                              "2",
                              "--pipeline-model-parallel-size",
                              "1",
                              "--context-parallel-size",
                              "2",
                              "--expert-model-parallel-size",
                              "4",
                              "--expert-tensor-parallel-size",
                              "1",
                              "--micro-batch-size",
                              "1",
                              "--global-batch-size",
                              "32",
                              "--recompute-granularity",
                              "full",
                              "--recompute-method",
                              "block",
                              "--recompute-num-layers",
                              "3"}));
  const Json expected = {{"parallelism.tensor_parallel_degree", 2},
                         {"parallelism.pipeline_parallel_degree", 1},
                         {"parallelism.context_parallel_degree", 2},
                         {"parallelism.expert_parallel_degree", 4},
                         {"parallelism.expert_tensor_parallel_degree", 1},
                         {"parallelism.data_parallel_shard_degree", 1},
                         {"parallelism.data_parallel_replicate_degree", 4},
                         {"training.local_batch_size", 8},
                         {"training.global_batch_size", 32},
                         {"activation_checkpoint.mode", "full"}};
  EXPECT_EQ(a.torchtitan, expected);
}

TEST(LaunchArgs, FullRecomputeOfEveryLayerIsUniformOne) {
  PlanEstimate e;
  e.activation_recompute = Recompute::kFull;
  const Args m = MakeLaunchArgs(e).megatron;
  const Args tail(m.end() - 6, m.end());
  EXPECT_EQ(tail, (Args{"--recompute-granularity", "full", "--recompute-method", "uniform",
                        "--recompute-num-layers", "1"}));
}

TEST(LaunchArgs, ZeroTwoAndThreeAreMegatronFsdpStrategies) {
  PlanEstimate e;
  e.activation_recompute = Recompute::kNone;
  e.plan.zero_stage = 3;
  Args m = MakeLaunchArgs(e).megatron;
  const auto at = std::find(m.begin(), m.end(), "--use-megatron-fsdp");
  ASSERT_NE(at, m.end());
  EXPECT_EQ(Args(at, at + 4), (Args{"--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                                    "optim_grads_params", "--use-distributed-optimizer"}));
  e.plan.zero_stage = 2;
  m = MakeLaunchArgs(e).megatron;
  EXPECT_NE(std::find(m.begin(), m.end(), "optim_grads"), m.end());
  EXPECT_EQ(MakeLaunchArgs(e).torchtitan["activation_checkpoint.mode"], "none");
}

}  // namespace
}  // namespace shepherd
