// The time model's terms beyond GEMMs and collectives (docs/planner.md, "Time"), on the SmallJob fixture
// with figures worked out by hand: memory-bound element-wise kernels, eager attention, pipeline slices
// without sequence parallelism, DeepSpeed's pipeline gradient reduction, context parallelism's need for
// flash attention and its thinner GEMMs.
#include <gtest/gtest.h>

#include "planner/comm_model.h"
#include "planner/model_arch.h"
#include "planner/planner.h"
#include "tests/planner/planner_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// Memory-bound kernels at 1e12 B/s HBM. Per layer and micro-batch, x = 1024 · 1024 = 1,048,576 elements:
// norms and residual adds 10·x/4 (sequence parallel) + GeLU 2 · 4096/1024 · x/4 = 4.5·x elements, 2 bytes:
// 9,437,184 B forward, three passes (forward, backward twice) = 28,311,552 B = 28.311552 µs; 4 layers on the
// last stage = 113.246208 µs, plus its cross-entropy over 1024 · 1000/4 logits: 52 B each with the fp32
// upcast (Megatron's unfused kernels: 38 B forward, 14 backward) = 13.312 µs, 8 B over 16-bit logits in
// fused kernels (cross_entropy_fp32 false) = 2.048 µs.
// Eager attention adds the 16/4 · 1024 · 1024 score matrix, 4 passes: 33,554,432 B forward, three passes:
// 3 · 42,991,616 B = 128.974848 µs per layer; its QKᵀ and AV are computed whole: + 6 · 1024³ FLOPs per
// layer · 4 layers / 4 ranks / 5e14 = 12.884901888 µs.
TEST_F(SmallJob, MemoryBoundKernelsTakeHbmTime) {
  hw_.hbm_bytes_per_s = 1e12;
  auto flash = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(flash.ok()) << flash.status().message();
  EXPECT_REL(flash->compute_time_s, 8 * (0.001548884901888 + 113.246208e-6 + 13.312e-6));
  spec_.training.cross_entropy_fp32 = false;
  auto fused = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(fused.ok()) << fused.status().message();
  EXPECT_REL(fused->compute_time_s, 8 * (0.001548884901888 + 113.246208e-6 + 2.048e-6));
  spec_.training.cross_entropy_fp32 = true;
  spec_.training.attention = Attention::kEager;
  auto eager = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  EXPECT_REL(eager->compute_time_s,
             8 * (0.001548884901888 + 12.884901888e-6 + 4 * 128.974848e-6 + 13.312e-6));
  // Model FLOPs do not change with the kernel: the slower step is lower TFLOP/s.
  EXPECT_LT(eager->tflops_per_gpu, flash->tflops_per_gpu);
}

// Selective recompute's modules run their kernels forward once more, at 1e12 B/s on the last stage's 4
// layers of 1024 tokens (tp 4, sequence parallel, x = 1,048,576): "layernorm" the two norms, read and
// write, 4·x/4 · 2 B = 2,097,152 B per layer; "core_attn" alone with flash attention recomputes nothing
// memory-bound. 8 micro-batches · 4 layers · 2.097152 µs = 67.108864 µs more than core_attn alone.
TEST_F(SmallJob, RecomputedModulesTakeHbmTime) {
  hw_.hbm_bytes_per_s = 1e12;
  spec_.training.activation_recompute = Recompute::kSelective;
  auto core_attn = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.training.recompute_modules.layernorm = true;
  auto layernorm = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(core_attn.ok() && layernorm.ok());
  EXPECT_REL(layernorm->compute_time_s - core_attn->compute_time_s, 8 * 4 * 2.097152e-6);
}

// Megatron-Core's selective recompute of "core_attn" runs the attention kernels' forward again, flash or
// not (transformer/attention.py). Flash: per layer and micro-batch 3 · s · (q + o) · tokens = 3 · 1024 ·
// 2048 · 1024 FLOPs over 4 ranks at 5e14, a third of it again: 1.073741824 µs; 8 micro-batches · 4 layers
// on the last stage = 34.359738368 µs. Eager: the whole score matrix, 6 · 1024 · 2048 · 1024 FLOPs, a third
// again (2.147483648 µs per layer) and its 4 passes over 33,554,432 B at 1e12 B/s (33.554432 µs): 8 · 4 ·
// 35.70191565 µs = 1.142461... ms. Without "core_attn" (layernorm alone, HBM infinitely fast) nothing.
TEST_F(SmallJob, SelectiveRecomputeRunsCoreAttentionAgain) {
  auto none = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.training.activation_recompute = Recompute::kSelective;
  auto selective = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.training.recompute_modules = {.core_attn = false, .layernorm = true};
  auto layernorm = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(none.ok() && selective.ok() && layernorm.ok());
  EXPECT_REL(selective->compute_time_s - none->compute_time_s, 8 * 4 * 1.073741824e-6);
  EXPECT_EQ(layernorm->compute_time_s, none->compute_time_s);
  // The model FLOPs are the same: recompute is not counted.
  EXPECT_LT(selective->tflops_per_gpu, none->tflops_per_gpu);

  hw_.hbm_bytes_per_s = 1e12;
  spec_.training.attention = Attention::kEager;
  spec_.training.recompute_modules = {};
  auto eager_selective = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.training.activation_recompute = Recompute::kNone;
  auto eager_none = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(eager_selective.ok() && eager_none.ok());
  EXPECT_REL(eager_selective->compute_time_s - eager_none->compute_time_s,
             8 * 4 * (2.147483648e-6 + 33.554432e-6));
}

// Selective recompute of "mlp" runs each dense layer's MLP forward again: 2 · 1024 tokens · 1024 · 4096 · 2
// FLOPs over 4 ranks at 5e14, 8.589934592 µs per layer, 8 micro-batches · 4 layers on the last stage; and
// its TP collective once more: a fifth collective per layer where the TP overlap test's 4 cost 0.00402653184
// s, a quarter of that more communication.
TEST_F(SmallJob, MlpRecomputeRunsTheDenseMlpForwardAgain) {
  spec_.training.activation_recompute = Recompute::kSelective;
  spec_.training.recompute_modules = {.core_attn = false, .layernorm = true};
  auto without = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.training.recompute_modules.mlp = true;
  auto with = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(without.ok() && with.ok());
  EXPECT_REL(with->compute_time_s - without->compute_time_s, 8 * 4 * 8.589934592e-6);
  EXPECT_REL(with->comm_time_s - without->comm_time_s, 0.00402653184 / 4);
  // TP is exposed; the longer backward hides a little more of the DP all-reduce.
  EXPECT_GT(with->exposed_comm_s, without->exposed_comm_s);
  EXPECT_LT(with->memory.activations, without->memory.activations);
}

// Block recompute (recompute_num_layers N: the first N layers of each virtual stage run their forward again;
// Megatron-Core's block method). Each recomputed layer costs a third of its GEMMs and attention again (the
// forward of forward + backward); the others cost what they do without recompute (here, with flash attention
// and the HBM infinitely fast). The last stage's 4 layers: N = 1 recomputes one of
// them, a quarter of full recompute's extra; with vpp 2 (two virtual stages of 2) it recomputes two, a half;
// N = 2 at vpp 2 is every layer, full recompute itself.
TEST_F(SmallJob, BlockRecomputeRunsTheFirstLayersOfEachVirtualStageAgain) {
  auto none = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.training.activation_recompute = Recompute::kFull;
  auto every = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.training.recompute_num_layers = 1;
  auto one = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  Plan interleaved = Layout(4, 2, 2, 0);
  interleaved.vpp = 2;
  auto one_of_two = EvaluatePlan(spec_, interleaved, hw_);
  spec_.training.recompute_num_layers = 2;
  auto two_of_two = EvaluatePlan(spec_, interleaved, hw_);
  spec_.training.recompute_num_layers = 0;
  auto every_interleaved = EvaluatePlan(spec_, interleaved, hw_);
  ASSERT_TRUE(none.ok() && every.ok() && one.ok() && one_of_two.ok() && two_of_two.ok() &&
              every_interleaved.ok());
  const double extra = every->compute_time_s - none->compute_time_s;
  ASSERT_GT(extra, 0);
  EXPECT_REL(one->compute_time_s - none->compute_time_s, extra / 4);
  EXPECT_REL(one_of_two->compute_time_s - none->compute_time_s, extra / 2);
  EXPECT_REL(two_of_two->compute_time_s, every_interleaved->compute_time_s);
  // The forward's two TP collectives run again on the recomputed layer only: 4 + 2/4 per layer, not 6.
  EXPECT_REL(one->comm.tp, every->comm.tp * 4.5 / 6);
}

// Selective recompute under fsdp is torchtitan's per-op checkpointing: k, the output projection and the
// MLP's second matmul (fc2 here) run forward again: 2 FLOPs per token and weight of h·(k + o + F) =
// 1024 · (1024 + 1024 + 4096) weights, 1024 tokens, over tp 4 at 5e14 FLOP/s, 4 layers, 8 micro-batches:
// 8 · 4 · 2 · 1024 · 6,291,456 / 4 / 5e14 = 2.06158e-4 s more than no recompute; the forward's two TP
// collectives run again (6 per layer, not 4).
TEST_F(SmallJob, TorchtitanSelectiveRecomputeRunsEveryOtherMatmulAgain) {
  spec_.training.framework = Framework::kFsdp;
  spec_.training.activation_recompute = Recompute::kNone;
  auto none = EvaluatePlan(spec_, Layout(4, 2, 2, 3), hw_);
  spec_.training.activation_recompute = Recompute::kSelective;
  auto op = EvaluatePlan(spec_, Layout(4, 2, 2, 3), hw_);
  ASSERT_TRUE(none.ok() && op.ok());
  EXPECT_REL(op->compute_time_s - none->compute_time_s, 8.0 * 4 * 2 * 1024 * 6'291'456 / 4 / 5e14);
  EXPECT_REL(op->comm.tp, none->comm.tp * 6 / 4);
}

// CPU activation offloading (pp 1, no recompute): a SmallJob layer at tp 4 with sequence parallelism keeps
// 34/4 · 1,048,576 = 8,912,896 B (flash, dropout masks). Offloading 4 of the 8 layers leaves 4 on the GPU,
// 35,651,584 B fewer with one micro-batch in flight. Over a 1 GB/s host link each direction's copies
// take 4 · 8.912896 ms, far beyond the compute, so 2 more layers expose 2 · 2 · 8.912896 ms more per
// micro-batch, 4 of them: 0.142606336 s. Over a 1 PB/s link the copies hide behind the compute.
TEST_F(SmallJob, CpuOffloadingMovesActivationsOverTheHostLink) {
  spec_.training.activation_recompute = Recompute::kNone;
  const Plan layout = Layout(4, 1, 4, 0);
  auto resident = EvaluatePlan(spec_, layout, hw_);
  hw_.host_bytes_per_s = 1e9;
  spec_.training.cpu_offload_layers = 2;
  auto two = EvaluatePlan(spec_, layout, hw_);
  spec_.training.cpu_offload_layers = 4;
  auto four = EvaluatePlan(spec_, layout, hw_);
  ASSERT_TRUE(resident.ok() && two.ok() && four.ok());
  EXPECT_EQ(resident->memory.activations - four->memory.activations, 35'651'584);
  EXPECT_REL(four->exposed_comm_s - two->exposed_comm_s, 0.142606336);
  hw_.host_bytes_per_s = 1e15;
  auto fast = EvaluatePlan(spec_, layout, hw_);
  ASSERT_TRUE(fast.ok());
  EXPECT_REL(fast->step_time_s, resident->step_time_s);
  // Megatron-Core offloads only without pipeline parallelism, and never the last layer.
  auto piped = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_FALSE(piped.ok());
  EXPECT_TRUE(HasField(piped.status(), "training.cpu_offload_layers")) << piped.status().message();
  spec_.training.cpu_offload_layers = 8;
  auto all = EvaluatePlan(spec_, layout, hw_);
  ASSERT_FALSE(all.ok());
  EXPECT_TRUE(HasField(all.status(), "training.cpu_offload_layers")) << all.status().message();
  // auto keeps to pp 1.
  spec_.training.cpu_offload_layers = 4;
  auto chosen = AutoPlan(spec_, hw_);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  EXPECT_EQ(chosen->plan.pp, 1);
}

// Sliding-window attention, a 128-token window on every layer but each second one (gpt-oss's pattern): 4 of
// the 8 layers. Flash attention's FLOPs per layer and micro-batch of 1024 tokens: full causal
// 6 · 1024 · 1024 · 1024 = 6,442,450,944, windowed 12 · 128 · 1024 · 1024 = 1,610,612,736; the stage's 4
// layers (half of them windowed) over 4 ranks at 5e14 FLOP/s take 4 · 2,415,919,104 / 4 / 5e14 =
// 4.831838208 µs less per micro-batch, 8 of them. Model FLOPs per token count 12 · keys · q width:
// 12 · (4 · 1024 + 4 · 128) · 1024 = 56,623,104 instead of 12 · 8 · 1024 · 1024 = 100,663,296.
TEST_F(SmallJob, WindowedLayersAttendToTheirWindow) {
  const double full_flops = ModelFlopsPerToken(spec_.model);
  auto full = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.model.window = 128;
  spec_.model.full_attention_every = 2;
  EXPECT_EQ(spec_.model.windowed_layers(), 4);
  auto windowed = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(full.ok() && windowed.ok());
  EXPECT_REL(full->compute_time_s - windowed->compute_time_s, 8 * 4.831838208e-6);
  EXPECT_REL(full_flops - ModelFlopsPerToken(spec_.model), 100'663'296.0 - 56'623'104.0);
  // A window as long as the sequence is full attention; eager attention computes every score anyway.
  spec_.model.window = 1024;
  EXPECT_EQ(spec_.model.windowed_layers(), 0);
  spec_.model.window = 128;
  spec_.training.attention = Attention::kEager;
  auto eager_windowed = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  spec_.model.window = 0;
  auto eager_full = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(eager_windowed.ok() && eager_full.ok());
  EXPECT_EQ(eager_windowed->compute_time_s, eager_full->compute_time_s);
}

// FP8 adds Transformer Engine's casts, 4 bytes per element (read 2, write the FP8 copy and its transpose),
// per layer and micro-batch of 1024 tokens at tp 4: forward the projection's input (q width 1024) and the
// second MLP GEMM's (4096), 4 · 1024 · 5120/4 = 5,242,880 B; backward the output gradients of QKV
// ((1024 + 2 · 1024)/4), of the first MLP GEMM (4096/4) and of the projection and second MLP GEMM (whole h
// each, 2 · 1024): 4 · 1024 · 3840 = 15,728,640 B; 20.97152 µs at 1e12 B/s, 4 layers on the last stage. The
// GEMM-time split is SmallJob.Fp8RunsTheLayersGemmsAtTheFp8Peak's.
TEST_F(SmallJob, Fp8CastsTakeHbmTime) {
  hw_.hbm_bytes_per_s = 1e12;
  hw_.peak_fp8_flops = 2e15;
  spec_.training.precision = Precision::kFp8;
  auto fp8 = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(fp8.ok()) << fp8.status().message();
  const double gemms = 0.001532854272 / 2 + 12.884901888e-6 + 3.145728e-6;
  EXPECT_REL(fp8->compute_time_s, 8 * (gemms + 113.246208e-6 + 13.312e-6 + 4 * 20.97152e-6));
}

// Without sequence parallelism each TP rank still sends only its slice to the next stage (scatter/gather),
// and the receiving TP group all-gathers the slices: 2 · 8 micro-batches · 3/4 · 2,097,152 B / 1e11.
TEST_F(SmallJob, PipelineSlicesAreGatheredWithoutSequenceParallelism) {
  Plan plain = Layout(4, 2, 2, 0);
  plain.sequence_parallel = false;
  auto sp = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  auto no_sp = EvaluatePlan(spec_, plain, hw_);
  ASSERT_TRUE(sp.ok() && no_sp.ok());
  EXPECT_REL(no_sp->comm.pp, sp->comm.pp);
  EXPECT_REL(no_sp->comm_time_s - sp->comm_time_s, 2 * 8 * 0.75 * 2'097'152 / 1e11);
}

// DeepSpeed's pipeline engine reduces gradients after the last backward: with pp > 1 all DP traffic is
// exposed (all-reduce of bf16 gradients, 2 · 1/2 · 250e6 / 1e11 = 0.0025 s, over dp 2 inside the domain).
TEST_F(SmallJob, DeepSpeedPipelinesExposeTheGradientReduction) {
  spec_.training.framework = Framework::kDeepSpeed;
  hw_.peak_flops = 1e12;  // a backward long enough to hide everything that can be hidden
  auto e = EvaluatePlan(spec_, Layout(4, 2, 2, 0), hw_);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_REL(e->exposed_comm_s, 0.00402653184 + 0.0008388608 + 0.0025);
}

// The H800 (DeepSeek-V3's GPU) is the H100 with NVLink cut from 900 to 400 GB/s both directions: the
// same peaks and HBM, 160 GB/s of achievable NVLink (DeepSeek-V3's report measured 160) and 40 of network
// per GPU (80 % of 50). A TP 8 layout of a 70B model computes as fast and fits the same, but its
// tensor-parallel all-reduces, inside the node, take 450/200 = 2.25 times as long.
TEST(EvaluatePlan, AnH800IsAnH100WithANarrowerNvLink) {
  JobSpec s = Model(70e9, 80, 8192, 64, 4096, 128256, 64, 512);
  s.resources.gpu = "H800";
  const Hardware h800 = HardwareForResources(s.resources);
  EXPECT_EQ(h800.nvlink_bytes_per_s, 160e9);
  EXPECT_EQ(h800.ib_bytes_per_s, 40e9);
  EXPECT_EQ(h800.peak_flops, 989e12);
  EXPECT_EQ(h800.peak_fp8_flops, 1979e12);
  const Plan p = Layout(8, 1, 8, 1);
  auto slow = EvaluatePlan(s, p, h800);
  s.resources.gpu = "H100-80GB";
  auto fast = EvaluatePlan(s, p, HardwareForResources(s.resources));
  ASSERT_TRUE(slow.ok() && fast.ok());
  EXPECT_EQ(slow->memory.total, fast->memory.total);
  EXPECT_DOUBLE_EQ(slow->compute_time_s, fast->compute_time_s);
  EXPECT_GT(slow->step_time_s, fast->step_time_s);
}

// A multi-token-prediction depth runs on the last stage: with even stages it makes that stage the slowest
// and the step longer; with a last stage four layers lighter (Megatron-Bridge's DeepSeek-V3 layouts leave
// it room) the slowest stage, and so the compute time, is unchanged while the model FLOPs per token grow.
TEST(EvaluatePlan, AnMtpDepthRunsOnTheLastStage) {
  JobSpec s = Model(70e9, 80, 8192, 64, 4096, 128256, 64, 512);
  Plan p = Layout(8, 4, 2, 1);
  auto even = EvaluatePlan(s, p, Hardware{});
  p.pipeline_layers = {21, 21, 21, 17};
  auto room = EvaluatePlan(s, p, Hardware{});
  s.model.mtp_layers = 1;
  auto room_mtp = EvaluatePlan(s, p, Hardware{});
  p.pipeline_layers = {};
  auto even_mtp = EvaluatePlan(s, p, Hardware{});
  ASSERT_TRUE(even.ok() && room.ok() && room_mtp.ok() && even_mtp.ok());
  EXPECT_GT(even_mtp->compute_time_s, even->compute_time_s);
  EXPECT_DOUBLE_EQ(room_mtp->compute_time_s, room->compute_time_s);
  EXPECT_GT(room_mtp->tflops_per_gpu, room->tflops_per_gpu);
}

TEST(EvaluatePlan, ContextParallelismNeedsFlashAttention) {
  JobSpec s = Model(70e9, 80, 8192, 64, 4096, 128256, 256, 1024);
  s.training.attention = Attention::kEager;
  Plan p = Layout(8, 4, 4, 1);
  p.cp = 2;
  auto e = EvaluatePlan(s, p, Hardware{});
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(HasField(e.status(), "parallelism.cp")) << e.status().message();
  s.training.attention = Attention::kFlash;
  EXPECT_TRUE(EvaluatePlan(s, p, Hardware{}).ok());
}

// A dense GEMM runs at the curve of its smaller side: h/tp, or the s/cp · b tokens of a rank when those are
// fewer. Default curve 0.635 · d / (d + 192); h 8192, seq 8192, mbs 1.
TEST(EvaluatePlan, ContextParallelRanksRunThinnerGemms) {
  JobSpec s = Model(70e9, 80, 8192, 64, 8192, 128256, 256, 1024);
  const Hardware hw;
  Plan p = Layout(1, 4, 64, 1);
  EXPECT_REL(MatmulEfficiency(s, p, hw), 0.635 * 8192 / 8384);  // 8192 tokens, width 8192
  p.cp = 16;
  EXPECT_REL(MatmulEfficiency(s, p, hw), 0.635 * 512 / 704);  // 512 tokens per rank
  p.micro_batch_size = 4;
  EXPECT_REL(MatmulEfficiency(s, p, hw), 0.635 * 2048 / 2240);
  p = Layout(8, 4, 8, 1);
  p.cp = 2;
  EXPECT_REL(MatmulEfficiency(s, p, hw), 0.635 * 1024 / 1216);  // width 1024 < 4096 tokens
}

// FSDP under a pipeline (torch.distributed.pipelining, torchtitan) keeps the stage unsharded across its
// micro-batches: each parameter is gathered once per step and its fp32 gradient reduce-scattered once,
// whatever the number of micro-batches. tp 4, pp 2, dp 2: the stage's 125,000,000 parameters per rank, half
// of each leaves: gradients 0.5 · 125,000,000 · 4 + parameters 0.5 · 125,000,000 · 2 = 375,000,000 B.
// Without a pipeline every micro-batch gathers twice and reduces once (ZeRO-3's traffic).
TEST_F(SmallJob, PipelinedFsdpGathersAndReducesOncePerStep) {
  spec_.training.framework = Framework::kFsdp;
  Plan p = Layout(4, 2, 2, 3);
  for (int mb : {8, 16}) {
    p.micro_batches = mb;
    EXPECT_EQ(EstimateCommBytes(spec_, p).dp, 375'000'000) << mb;
  }
  p.pp = 1;
  p.dp = 4;
  p.micro_batches = 8;
  EXPECT_GT(EstimateCommBytes(spec_, p).dp, 8 * 375'000'000.0);
}

}  // namespace
}  // namespace shepherd
