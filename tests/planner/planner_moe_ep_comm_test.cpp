// How the expert-parallel all-to-alls are run: training.moe_dispatcher (DeepEP's and HybridEP's one network
// copy per destination domain) and training.moe_a2a_overlap (Megatron-Core's
// --overlap-moe-expert-parallel-comm: which all-to-all time the combined 1F1B hides, the warm-up chunk it
// adds, the rules Megatron-Core asserts, and the speed-up against Megatron-Bridge's published A/B).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "planner/comm_model.h"
#include "planner/gpu_profiles.h"
#include "planner/memory_model.h"
#include "planner/planner.h"
#include "tests/planner/planner_test_util.h"
#include "tests/planner/published_runs_builders.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// Of the all-to-all time paired with compute, 0.45 is hidden (Megatron-Bridge's A/B: 3.72 s of 8.25 s),
// at most 0.45 of the compute beside it. Pairs: without a pipeline the first forward and the last backward
// run alone, so with 2 micro-batches half the chunks pair; with pp 2, vpp 2 and 4 micro-batches (8 chunks)
// stage 0 runs 2·(2 − 1) + (2 − 1)·2 + 1 = 5 warm-up chunks alone, so 3/8 pair. Everything is still sent
// (st.ep unchanged); only the exposed time falls.
TEST(MoeA2aOverlap, HidesItsShareOfThePairedAllToAllsOrOfTheComputeBesideThem) {
  struct Case {
    const char* name;
    JobSpec spec;
    Plan plan;
    double paired;
  };
  JobSpec deep = SmallMoe(8);
  deep.model.layers = 8;
  Plan piped = MoeLayout(2, 2, 2, 1);
  piped.pp = 2;
  piped.vpp = 2;
  piped.micro_batches = 4;
  Plan flat = MoeLayout(2, 4, 2, 1);
  flat.micro_batches = 2;
  const Case cases[] = {{"no pipeline", SmallMoe(8), flat, 1.0 / 2}, {"pp 2, vpp 2", deep, piped, 3.0 / 8}};
  Hardware slow_gpu;  // compute far longer than the all-to-alls: the all-to-alls bound what is hidden
  slow_gpu.peak_flops = 1e9;
  for (const Case& c : cases) {
    for (const Hardware& hw : {Hardware{}, slow_gpu}) {
      SCOPED_TRACE(c.name);
      JobSpec on = c.spec;
      on.training.moe_a2a_overlap = true;
      const StepTime off = EstimateStepTime(c.spec, c.plan, hw);
      const StepTime with = EstimateStepTime(on, c.plan, hw);
      ASSERT_GT(off.ep, 0);
      EXPECT_REL(with.ep, off.ep);
      EXPECT_REL(with.compute, off.compute);
      EXPECT_REL(with.exposed, off.exposed - 0.45 * c.paired * std::min(off.ep, off.compute));
    }
  }
  // Which side bounds it differs between the two machines.
  EXPECT_LT(EstimateStepTime(SmallMoe(8), flat, Hardware{}).compute,
            EstimateStepTime(SmallMoe(8), flat, Hardware{}).ep);
  EXPECT_GT(EstimateStepTime(SmallMoe(8), flat, slow_gpu).compute,
            EstimateStepTime(SmallMoe(8), flat, slow_gpu).ep);
}

// The interleaved schedule runs one more warm-up chunk (schedules.py): stage 0 of pp 8, vpp 4, 64
// micro-batches holds (2·7 + 3·8 + 1 + 1)/4 = 10 micro-batches instead of 39/4; the last stage (0 + 24 + 1
// + 1)/4 = 6.5 instead of 6.25; never more than all chunks (pp 4, vpp 2, 2 micro-batches: 4/2 = 2). Without
// a pipeline the paired forward fills layers as the backward frees them: still 1.
TEST(MoeA2aOverlap, InterleavedScheduleHoldsOneMoreWarmUpChunk) {
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(8, 0, 64, 4, true), 10);
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(8, 0, 64, 4, false), 9.75);
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(8, 7, 64, 4, true), 6.5);
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(4, 0, 2, 2, true), 2);
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(1, 0, 8, 1, true), 1);
  // In stage 0's memory (pp 2, vpp 2, 8 micro-batches of 1): 2 + 2 + 1 = 5 chunks, 6 with the overlap, of
  // 2 chunks a micro-batch: every activation term grows by 6/5.
  JobSpec s = SmallMoe(8);
  s.model.layers = 8;
  s.training.global_batch_size = 16;
  Plan p = MoeLayout(2, 2, 2, 1);
  p.pp = 2;
  p.vpp = 2;
  p.micro_batches = 8;
  const std::vector<int> stages{4, 4};
  const MemoryBreakdown off = StageMemory(s, p, stages, 0);
  s.training.moe_a2a_overlap = true;
  const MemoryBreakdown on = StageMemory(s, p, stages, 0);
  EXPECT_REL(on.activations, off.activations * 6 / 5);
  EXPECT_REL(on.total - on.activations, off.total - off.activations);
}

// Megatron-Core's TransformerConfig asserts each of these; the planner answers 422 naming the field.
TEST(MoeA2aOverlap, RulesNameTheField) {
  auto refused = [](JobSpec s, const Plan& p) {
    s.training.moe_a2a_overlap = true;
    auto e = EvaluatePlan(s, p, Hardware{});
    return !e.ok() && HasField(e.status(), "training.moe_a2a_overlap");
  };
  const Plan ep2 = MoeLayout(2, 4, 2, 1);
  JobSpec dense = Model(0, 2, 64, 4, 32, 100, 8, 8);
  EXPECT_TRUE(refused(dense, Layout(2, 1, 4, 1)));
  JobSpec fsdp = SmallMoe(8);
  fsdp.training.framework = Framework::kFsdp;
  EXPECT_TRUE(refused(fsdp, ep2));
  JobSpec fp32 = SmallMoe(8);
  fp32.training.precision = Precision::kFp32;
  EXPECT_TRUE(refused(fp32, ep2));
  JobSpec two_mtp = SmallMoe(8);
  two_mtp.model.mtp_layers = 2;
  EXPECT_TRUE(refused(two_mtp, ep2));
  EXPECT_TRUE(refused(SmallMoe(8), MoeLayout(2, 4, 1, 1)));  // no expert parallelism
  JobSpec deep = SmallMoe(8);
  deep.model.layers = 8;
  Plan one_chunk = MoeLayout(2, 2, 2, 1);
  one_chunk.pp = 2;
  EXPECT_TRUE(refused(deep, one_chunk));  // pp 2 without interleaving
  JobSpec full = SmallMoe(8);
  full.training.activation_recompute = Recompute::kFull;
  EXPECT_TRUE(refused(full, ep2));
  // And the same layout runs with it where none of these holds.
  JobSpec ok = SmallMoe(8);
  ok.training.moe_a2a_overlap = true;
  EXPECT_TRUE(EvaluatePlan(ok, ep2, Hardware{}).ok());
}

// Where the request leaves choices open, only what the combined 1F1B runs on is chosen: auto picks ep > 1,
// vpp > 1 with a pipeline and no full recompute; an explicit pipeline without vpp gets vpp ≥ 2. A job no
// layout with ep > 1 divides is refused naming the field.
TEST(MoeA2aOverlap, OpenChoicesKeepToWhatItRunsOn) {
  JobSpec s = SmallMoe(16);
  s.model.layers = 8;
  s.training.global_batch_size = 64;
  s.training.moe_a2a_overlap = true;
  auto a = AutoPlan(s, Hardware{});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_GE(a->plan.ep, 2);
  EXPECT_TRUE(a->plan.pp == 1 || a->plan.vpp >= 2) << a->explanation;
  EXPECT_NE(a->activation_recompute, Recompute::kFull);
  EXPECT_NE(a->explanation.find("training.moe_a2a_overlap"), std::string::npos) << a->explanation;

  JobSpec given = s;
  given.parallelism = {.tp = 2, .pp = 2, .dp = 4, .zero_stage = 1};
  given.parallelism.ep = 2;
  auto completed = PlanJob(given, Hardware{});
  ASSERT_TRUE(completed.ok()) << completed.status().message();
  EXPECT_GE(completed->plan.vpp, 2);
  EXPECT_NE(completed->explanation.find("As written (vpp 2, "), std::string::npos) << completed->explanation;

  JobSpec lone = SmallMoe(1);
  lone.training.global_batch_size = 4;
  lone.training.moe_a2a_overlap = true;
  auto none = AutoPlan(lone, Hardware{});
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(HasField(none.status(), "training.moe_a2a_overlap"));
}

// Megatron-Bridge's two published A/B runs of the overlap, Qwen3-30B-A3B on 16 H100s with EP 16, TP 1, PP 1,
// BF16, global batch 1024, micro-batch 1 (skills/nemo-mbridge-perf-expert-parallel-overlap): pre-training
// at sequence 4096 over HybridEP, 24.71 s per step without and 20.99 s with it (1.177×); SFT over the
// alltoall dispatcher, 41.25 and 31.31 s (1.317×). The planner's alltoall run, between the two.
TEST(MoeA2aOverlap, SpeedUpWithinMegatronBridgesMeasuredRange) {
  JobSpec s = LlamaStyle(48, 2048, 32, 4, 151936, 4096, 1024, 16, "H100-80GB");
  s.model.head_dim = 128;
  s.model.moe = {.experts = 128, .top_k = 8, .expert_ffn_hidden = 768};
  s.training.activation_recompute = Recompute::kNone;
  s.training.grad_reduce_in_fp32 = false;
  Plan p = Layout(1, 1, 1, 16, 1, 1);
  p.ep = 16;
  const Hardware hw = HardwareForResources(s.resources);
  auto off = EvaluatePlan(s, p, hw);
  s.training.moe_a2a_overlap = true;
  auto on = EvaluatePlan(s, p, hw);
  ASSERT_TRUE(off.ok() && on.ok()) << off.status().message() << on.status().message();
  const double speedup = off->step_time_s / on->step_time_s;
  EXPECT_GT(speedup, 24.71 / 20.99);
  EXPECT_LT(speedup, 41.25 / 31.31);
}

// A token's k experts, spread evenly over n domains and chosen without repeats, reach a given other domain
// with probability 1 − C(E − E/n, k)/C(E, k): 4 experts, top 2, 2 domains: 1 − C(2, 2)/C(4, 2) = 5/6;
// 16, top 2, 2 domains: 1 − 28/120 = 23/30; 128, top 8, 2 domains (Qwen3-30B-A3B on two nodes):
// 1 − C(64, 8)/C(128, 8) = 1 − 4,426,165,368/1,429,702,652,400; 128, top 4 over 8 domains (gpt-oss-120b
// at EP 64 on H100s): 7 · (1 − C(112, 4)/C(128, 4)) = 7 · (1 − 6,210,820/10,668,000). Never more than the
// k·(n − 1)/n copies the alltoall dispatcher sends.
TEST(MoeDispatcher, NetworkCopiesPerTokenOncePerDomainHoldingAnExpert) {
  EXPECT_DOUBLE_EQ(NetworkCopiesPerToken(4, 2, 2), 5.0 / 6);
  EXPECT_DOUBLE_EQ(NetworkCopiesPerToken(16, 2, 2), 23.0 / 30);
  EXPECT_NEAR(NetworkCopiesPerToken(128, 8, 2), 1 - 4'426'165'368.0 / 1'429'702'652'400.0, 1e-12);
  EXPECT_NEAR(NetworkCopiesPerToken(128, 4, 8), 7 * (1 - 6'210'820.0 / 10'668'000.0), 1e-12);
  EXPECT_DOUBLE_EQ(NetworkCopiesPerToken(16, 1, 2), 0.5);  // top 1: the alltoall's 1 · 1/2, no saving
  EXPECT_DOUBLE_EQ(NetworkCopiesPerToken(16, 2, 1), 0);    // one domain: nothing crosses the network
}

// The EP group of 16 ranks over two 8-GPU domains (16 experts, top 2; MoeComm's test of the alltoall
// pricing): 61,440 B of all-to-all per step, 32,768 of them to the 8 ranks of the other domain at 40 GB/s.
// DeepEP and HybridEP send that domain each token once when it holds one of its 2 experts, 23/30 of a
// copy instead of the alltoall's 2 · 1/2 = 1: 25,122.13 B over the network, and all 61,440 B over NVLink
// (170.7 ns at 360 GB/s, under the network's 628.1 ns), plus the same 8 latencies of 15 µs. Inside one
// domain (ep 8) nothing changes; a dense model with the option is a 422 naming it.
TEST(MoeDispatcher, DeepEpAndHybridEpSendEachTokenOncePerOtherDomain) {
  JobSpec s = SmallMoe(16);
  s.model.moe.experts = 16;
  s.training.global_batch_size = 16;
  Plan p = MoeLayout(1, 16, 16, 1);
  p.micro_batches = 1;
  const StepTime alltoall = EstimateStepTime(s, p, Hardware{});
  EXPECT_NEAR(alltoall.ep, 32'768 / 40e9 + 8 * 15e-6, 1e-15);
  for (MoeDispatcher d : {MoeDispatcher::kDeepEp, MoeDispatcher::kHybridEp}) {
    s.training.moe_dispatcher = d;
    EXPECT_NEAR(EstimateStepTime(s, p, Hardware{}).ep, 32'768 * 23.0 / 30 / 40e9 + 8 * 15e-6, 1e-15);
  }
  p.ep = 8;
  const double inside = EstimateStepTime(s, p, Hardware{}).ep;
  s.training.moe_dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_DOUBLE_EQ(EstimateStepTime(s, p, Hardware{}).ep, inside);
  JobSpec dense = Model(0, 2, 64, 4, 32, 100, 8, 8);
  dense.training.moe_dispatcher = MoeDispatcher::kDeepEp;
  auto refused = EvaluatePlan(dense, Layout(2, 1, 4, 1), Hardware{});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(HasField(refused.status(), "training.moe_dispatcher"));
}

}  // namespace
}  // namespace shepherd
