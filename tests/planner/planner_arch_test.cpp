// Architecture counts, pipeline stage layouts and Megatron-LM's memory estimate, checked against numbers
// worked out by hand (arithmetic in the comments), never against the code's own output.
#include <gtest/gtest.h>

#include <vector>

#include "planner/memory_model.h"
#include "planner/model_arch.h"
#include "planner/pipeline_layout.h"
#include "planner/planner.h"

namespace shepherd {
namespace {

#define EXPECT_REL(actual, expected) EXPECT_NEAR((actual), (expected), 1e-12 * std::abs(expected))

ModelSpec Llama405BModel() {
  ModelSpec m;
  m.layers = 126;
  m.hidden = 16384;
  m.heads = 128;
  m.kv_heads = 8;
  m.ffn_hidden = 53248;
  m.mlp = Mlp::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.vocab = 128256;
  m.seq_len = 8192;
  return m;
}

// Llama 3 405B, head dim 128, K and V 8 · 128 = 1024 wide:
//   QKV 16384 · (16384 + 2 · 1024) = 301,989,888; output 16384² = 268,435,456;
//   SwiGLU 3 · 16384 · 53248 = 2,617,245,696; two RMSNorms 32,768 → 3,187,703,808 per layer.
//   126 layers 401,650,679,808 + embedding and output 2 · 128256 · 16384 = 4,202,692,608 + final norm
//   16,384 = 405,853,388,800 ("405B").
TEST(ModelArch, Llama405BCountsItsParameters) {
  const ModelSpec m = Llama405BModel();
  EXPECT_EQ(LayerParams(m), 3'187'703'808.0);
  EXPECT_EQ(CountParams(m), 405'853'388'800.0);
  EXPECT_EQ(ModelParams(m), 405'853'388'800.0);
}

// GPT-3 175B style (Narayanan et al. 2021 Table 1 row 175B: 96 layers, h 12288, 96 heads, vocab 51200):
// per layer 12h² + 13h = 1,811,939,328 + 159,744 = 1,812,099,072 (QKV 3h² + 3h, out h² + h, MLP 8h² + 5h,
// two LayerNorms 4h); 96 layers 173,961,510,912; tied embedding 51200 · 12288 = 629,145,600 + final norm
// 24,576 → 174,590,681,088.
TEST(ModelArch, Gpt175BWithTiedEmbeddings) {
  ModelSpec m;
  m.layers = 96;
  m.hidden = 12288;
  m.heads = 96;
  m.vocab = 51200;
  m.seq_len = 2048;
  m.tied_embeddings = true;
  EXPECT_EQ(LayerParams(m), 1'812'099'072.0);
  EXPECT_EQ(CountParams(m), 174'590'681'088.0);
}

// Model FLOPs per token, Megatron's convention: 6 · (L · P + V · h) + 12 · L · s · h.
// Small model: L 2, h 64, 4 heads, vocab 100, seq 32, GeLU, LayerNorm:
//   P = 12 · 64² + 13 · 64 = 49,152 + 832 = 49,984; 6 · (99,968 + 6,400) = 638,208; 12 · 2 · 32 · 64 =
//   49,152.
TEST(ModelArch, ModelFlopsPerToken) {
  ModelSpec m;
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.vocab = 100;
  m.seq_len = 32;
  EXPECT_EQ(LayerParams(m), 49'984.0);
  EXPECT_EQ(ModelFlopsPerToken(m), 687'360.0);
}

TEST(PipelineLayout, EvenGivenAndBalanced) {
  EXPECT_EQ(StageLayers(80, 8), std::vector<int>(8, 10));
  EXPECT_EQ(StageLayers(80, 4, {19, 21, 21, 19}), (std::vector<int>{19, 21, 21, 19}));
  // 126 + 2 = 128 units over 16 stages = 8 each; the ends give one to the embedding and output layer.
  std::vector<int> llama(16, 8);
  llama.front() = llama.back() = 7;
  EXPECT_EQ(StageLayers(126, 16), llama);
  // 11 + 2 = 13 units over 5: 2 each, 3 extra to stages 1, 2, 3 → 2, 3, 3, 3, 2 → 1, 3, 3, 3, 1.
  EXPECT_EQ(StageLayers(11, 5), (std::vector<int>{1, 3, 3, 3, 1}));
  // 5 + 2 = 7 over 3: 2 each, the 1 extra to the middle → 1, 3, 1.
  EXPECT_EQ(StageLayers(5, 3), (std::vector<int>{1, 3, 1}));
  // 61 + 2 = 63 over 32: 1 each, 30 extra to the middle, 1 to stage 0 → 2, 2 × 30, 1 → 1, 2 × 30, 0; the
  // last stage takes a layer from the fullest middle one (the first of them: stage 1) → 1, 1,
  // 2 × 29, 1 (a tester's auto plan for Kimi K2 at PP 32 had a 0-layer stage, which pipeline_layers refuses).
  std::vector<int> k2(32, 2);
  k2[0] = k2[1] = k2[31] = 1;
  EXPECT_EQ(StageLayers(61, 32), k2);
  // 27 + 2 = 29 over 16: both ends would hold none.
  for (int l : StageLayers(27, 16)) EXPECT_GE(l, 1);
  EXPECT_EQ(StageLayers(27, 16).front() + StageLayers(27, 16).back(), 2);
}

// A virtual stage may hold only the embedding (first stage) or only the output layer (last stage).
TEST(PipelineLayout, MaxVirtualStagesCountsTheEmbeddingAndOutputLayer) {
  EXPECT_EQ(MaxVirtualStages(StageLayers(126, 16)), 8);  // 7 + 1, 8, 7 + 1
  EXPECT_EQ(MaxVirtualStages({10, 10, 10, 10}), 10);     // the middle stages bound it
  EXPECT_EQ(MaxVirtualStages({5, 5}), 6);
  EXPECT_EQ(MaxVirtualStages({1, 3, 3, 3, 1}), 2);
  EXPECT_EQ(MaxVirtualStages({9, 3, 9}), 3);
}

// Megatron-LM's theoretical memory (re-derived from its published formulas; Korthikanti et al. 2022 and
// the distributed optimizer's 6 + 12/DP B/param) for a GPT model it can express: 24 layers, h 2048, 16
// heads, seq 2048, vocab 50,000 (untied), TP 2, PP 2, DP 4, distributed optimizer, selective recompute,
// sequence parallel, micro-batch 1, 32 micro-batches:
//   per layer 12 · 2048² + 13 · 2048 = 50,331,648 + 26,624 = 50,358,272; 12 layers per stage
//   604,299,264 + embedding 102,400,000 = 706,699,264 on stage 0, / TP 2 = 353,349,632 parameters;
//   weights+optimizer (6 + 12/4 = 9 B) 3,180,146,688 bytes.
//   Activations: s·b·h = 4,194,304 · 34 / 2 per layer = 71,303,168 · 12 layers · 2 in flight
//   = 1,711,276,032, plus embedding (8 · 2048 + 4,194,304)/2 · 2 = 4,210,688 → 1,715,486,720.
// Megatron's estimator gives the same terms: 34 units per layer (18 + 4·ffn/h with ffn = 4h), pp in-flight
// micro-batches on stage 0 and its embedding terms.
TEST(MegatronMemory, SmallGptMatchesTheEstimator) {
  JobSpec s;
  s.model.layers = 24;
  s.model.hidden = 2048;
  s.model.heads = 16;
  s.model.seq_len = 2048;
  s.model.vocab = 50000;
  s.training.global_batch_size = 128;
  s.resources.gpus = 16;
  Plan p{.tp = 2,
         .pp = 2,
         .dp = 4,
         .zero_stage = 1,
         .micro_batches = 32,
         .micro_batch_size = 1,
         .cp = 1,
         .vpp = 1,
         .sequence_parallel = true,
         .pipeline_layers = {}};
  const MemoryBreakdown m = WorstStageMemory(s, p);
  EXPECT_EQ(m.stage, 0);
  EXPECT_REL(m.weights + m.gradients + m.optimizer + m.master_weights, 3'180'146'688.0);
  EXPECT_REL(m.activations, 1'715'486'720.0);
}

// Block recompute keeps only the input of the layers it recomputes (2·x/tp with sequence parallelism) and
// everything of the others (without recompute: 34·x/tp with dropout, flash attention). x = 1024 · 1024
// tokens × hidden, tp 4: 524,288 B against 8,912,896 B per layer; stage 0 of 4 layers over pp 2 holds 2
// micro-batches. N = 1 keeps 3 layers whole: 3 · 8,388,608 · 2 = 50,331,648 B more than every layer
// recomputed; N = 2 keeps 2: 33,554,432 B more; N beyond the stage's layers is every layer.
TEST(MegatronMemory, BlockRecomputeKeepsTheLayersItDoesNotRecompute) {
  JobSpec s;
  s.model = ModelSpec{1e9, 8, 1024, 16, 1024, 1000};
  s.training.activation_recompute = Recompute::kFull;
  Plan p;
  p.tp = 4;
  p.pp = 2;
  p.dp = 2;
  p.micro_batches = 8;
  p.sequence_parallel = true;
  const double every = StageMemory(s, p, {4, 4}, 0).activations;
  s.training.recompute_num_layers = 1;
  EXPECT_REL(StageMemory(s, p, {4, 4}, 0).activations - every, 50'331'648.0);
  s.training.recompute_num_layers = 2;
  EXPECT_REL(StageMemory(s, p, {4, 4}, 0).activations - every, 33'554'432.0);
  s.training.recompute_num_layers = 9;
  EXPECT_REL(StageMemory(s, p, {4, 4}, 0).activations, every);
}

// torchtitan's per-op checkpointing (selective under fsdp) keeps a layer's input 2, Q 2, V 2, the attention
// output 2 and fc1's output 2F/h = 8 units of s·b·h (GeLU, F = 4h): 16 · 1024 · 1024 B at tp 1, against 34
// units without recompute (dropout masks included); a SwiGLU MLP of F = 2816 keeps w1's output 2F/h = 5.5
// and w2's 2: 15.5 units.
TEST(FsdpMemory, TorchtitanSelectiveKeepsEveryOtherMatmulsOutput) {
  ModelSpec m{1e9, 8, 1024, 16, 1024, 1000};
  TrainingSpec t;
  t.framework = Framework::kFsdp;
  Plan p;
  EXPECT_REL(ActivationBytesPerLayer(m, t, p), 16.0 * 1024 * 1024);
  t.activation_recompute = Recompute::kNone;
  EXPECT_REL(ActivationBytesPerLayer(m, t, p), 34.0 * 1024 * 1024);
  t.activation_recompute = Recompute::kSelective;
  m.mlp = Mlp::kSwiglu;
  m.ffn_hidden = 2816;
  EXPECT_REL(ActivationBytesPerLayer(m, t, p), 15.5 * 1024 * 1024);
  t.framework = Framework::kMegatron;  // Megatron's selective: the attention kernels only, none with flash
  t.activation_recompute = Recompute::kNone;
  const double none = ActivationBytesPerLayer(m, t, p);
  t.activation_recompute = Recompute::kSelective;
  EXPECT_REL(ActivationBytesPerLayer(m, t, p), none);
}

// training.optimizer_dtype "bf16" (Megatron-Core's precision-aware optimizer, Apex's DistributedFusedAdam
// dtype): Adam's moments 4 B per parameter instead of 8, SGD's momentum 2 instead of 4, sharded as before.
TEST(MegatronMemory, Bf16OptimizerStatesHalveTheMoments) {
  TrainingSpec t;
  EXPECT_EQ(ModelStateBytesPerParam(t, 1, 4).optimizer, 2.0);
  t.bf16_optimizer_states = true;
  EXPECT_EQ(ModelStateBytesPerParam(t, 1, 4).optimizer, 1.0);
  EXPECT_EQ(ModelStateBytesPerParam(t, 0, 4).optimizer, 4.0);
  EXPECT_EQ(ModelStateBytesPerParam(t, 0, 4).master_weights, 4.0);  // the fp32 master copy stays
  t.optimizer = Optimizer::kSgd;
  EXPECT_EQ(ModelStateBytesPerParam(t, 0, 4).optimizer, 2.0);
}

// FSDP2 working set: bf16 parameters of two layers and fp32 gradients of one: 8 B per layer parameter.
// 1e9 parameters, 8 layers, vocab 1000 × 1024: 124,744,000 per layer · 8 / tp 1.
TEST(FsdpMemory, WorkingSetOfLayersInFlight) {
  ModelSpec m{1e9, 8, 1024, 16, 1024, 1000};
  TrainingSpec t;
  t.framework = Framework::kFsdp;
  EXPECT_REL(GatheredWorkingBytes(m, t, Plan{}), 997'952'000.0);
  t.framework = Framework::kMegatron;
  EXPECT_EQ(GatheredWorkingBytes(m, t, Plan{}), 0);  // ZeRO-1: the weights stay whole
}

// DeepSpeed's ZeRO-3 gathers layers too: two layers of bf16 weights and one layer's gradients in its bf16
// reduction: 6 B per layer parameter. A probe found it charged no working set (28 GB less than fsdp for a
// 2.4T model). Megatron's ZeRO-3 is not charged (docs/planner.md, Known limits).
TEST(FsdpMemory, DeepSpeedZeroThreeGathersLayers) {
  ModelSpec m{1e9, 8, 1024, 16, 1024, 1000};
  TrainingSpec t;
  Plan p;
  p.zero_stage = 3;
  t.framework = Framework::kDeepSpeed;
  EXPECT_REL(GatheredWorkingBytes(m, t, p), 124'744'000.0 * 6);
  p.tp = 2;
  EXPECT_REL(GatheredWorkingBytes(m, t, p), 124'744'000.0 / 2 * 6);
  p.zero_stage = 2;
  EXPECT_EQ(GatheredWorkingBytes(m, t, p), 0);
  p.zero_stage = 3;
  t.framework = Framework::kMegatron;
  EXPECT_EQ(GatheredWorkingBytes(m, t, p), 0);
}

// With a pipeline, FSDP2 reshards nothing between micro-batches: the whole stage stays unsharded in bf16 and
// its gradients accumulate unsharded in fp32 (torch.distributed.pipelining, torchtitan). Stage 0 of the
// model above over pp 2: 4 layers · 124,744,000 + the embedding 1000 · 1024 = 500,000,000 parameters:
// 6 B each, 3.0 GB; gradients reduced in bf16 (grad_reduce_in_fp32 false) 4 B each, 2.0 GB.
TEST(FsdpMemory, WithAPipelineTheWholeStageStaysUnsharded) {
  JobSpec s;
  s.model = ModelSpec{1e9, 8, 1024, 16, 1024, 1000};
  s.training.framework = Framework::kFsdp;
  Plan p;
  p.tp = 1;
  p.pp = 2;
  p.dp = 4;
  p.zero_stage = 3;
  p.micro_batches = 8;
  EXPECT_REL(StageMemory(s, p, {4, 4}, 0).working, 3'000'000'000.0);
  s.training.grad_reduce_in_fp32 = false;
  EXPECT_REL(StageMemory(s, p, {4, 4}, 0).working, 2'000'000'000.0);
  p.pp = 1;  // without one, two layers in flight as before
  EXPECT_REL(StageMemory(s, p, {8}, 0).working, 997'952'000.0);
}

}  // namespace
}  // namespace shepherd
