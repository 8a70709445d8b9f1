// Activation bytes per layer, per stage and in flight (Korthikanti et al. 2022, Megatron-Core's schedules),
// checked against numbers worked out by hand, never against the code's own output.
#include <gtest/gtest.h>

#include "planner/memory_model.h"
#include "planner/planner.h"
#include "tests/planner/planner_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// ---- Activations (Korthikanti 2022) ----

// s = 1024, b = 2, h = 1024, a = 16, t = 2: s·b·h = 2,097,152, 5·a·s/h = 80.
double Act(const ModelSpec& m, Recompute r, Precision p, Attention a, bool sp = true, int cp = 1) {
  TrainingSpec t;
  t.activation_recompute = r;
  t.precision = p;
  t.attention = a;
  Plan plan = Layout(2, 1, 1, 0, 2);
  plan.sequence_parallel = sp;
  plan.cp = cp;
  return ActivationBytesPerLayer(m, t, plan);
}

TEST(Activations, PerLayerByRecomputeMode) {
  ModelSpec m{1e9, 8, 1024, 16, 1024, 1000};
  constexpr Precision bf16 = Precision::kBf16;
  constexpr Attention eager = Attention::kEager, flash = Attention::kFlash;
  EXPECT_EQ(Act(m, Recompute::kNone, bf16, eager), 119'537'664);      // ·114/2 (Korthikanti eq. 1)
  EXPECT_EQ(Act(m, Recompute::kSelective, bf16, eager), 35'651'584);  // ·34/2
  EXPECT_EQ(Act(m, Recompute::kNone, bf16, flash), 35'651'584);       // flash keeps no s² term
  EXPECT_EQ(Act(m, Recompute::kFull, bf16, flash), 2'097'152);        // ·2/2: the input, split by SP
  EXPECT_EQ(Act(m, Recompute::kSelective, Precision::kFp32, flash), 71'303'168);
  // Without sequence parallelism 10 units stay whole: (10 + 24/2) · 2,097,152; full recompute ·2.
  EXPECT_EQ(Act(m, Recompute::kSelective, bf16, flash, false), 46'137'344);
  EXPECT_EQ(Act(m, Recompute::kFull, bf16, flash, false), 4'194'304);
  // cp = 2 halves s' = 512: 34/2 · 1,048,576.
  EXPECT_EQ(Act(m, Recompute::kSelective, bf16, flash, true, 2), 17'825'792);
}

// The small layer above with GQA, 4 of 16 KV heads, and a SwiGLU MLP of width F = 3h.
ModelSpec GqaSwiglu() {
  ModelSpec m{1e9, 8, 1024, 16, 1024, 1000};
  m.kv_heads = 4;
  m.ffn_hidden = 3072;
  m.mlp = Mlp::kSwiglu;
  return m;
}

// GQA (g = 1/4) and SwiGLU: attention 7 + 4·0.25 = 8, MLP 3 + 6·3 = 21, norms 4: 33 units / 2 · 2,097,152 =
// 34,603,008.
TEST(Activations, GqaAndSwiglu) {
  ModelSpec m = GqaSwiglu();
  EXPECT_EQ(Act(m, Recompute::kSelective, Precision::kBf16, Attention::kFlash), 34'603'008);
  // GeLU at the same width: 7 + 1 + 3 + 4·3 + 4 = 27 units / 2 · 2,097,152.
  m.mlp = Mlp::kGelu;
  EXPECT_EQ(Act(m, Recompute::kSelective, Precision::kBf16, Attention::kFlash), 28'311'552);
}

// Dropout masks (1 unit each after the attention and the MLP) are kept only with dropout: RMSNorm models
// default to none, LayerNorm ones to Megatron-LM's 0.1. The GQA SwiGLU layer above: 33 − 2 = 31 units / 2 ·
// 2,097,152 = 32,505,856; without sequence parallelism the masks were among the whole units: (8 + 23/2) ·
// 2,097,152 = 40,894,464. Eager attention without dropout keeps only the softmax output, 2·a·s/h = 32
// units: (31 + 32)/2 · 2,097,152 = 66,060,288.
TEST(Activations, DropoutMasksOnlyWithDropout) {
  ModelSpec m = GqaSwiglu();
  m.norm = Norm::kRmsNorm;
  constexpr Precision bf16 = Precision::kBf16;
  EXPECT_EQ(Act(m, Recompute::kSelective, bf16, Attention::kFlash), 32'505'856);
  EXPECT_EQ(Act(m, Recompute::kSelective, bf16, Attention::kFlash, false), 40'894'464);
  EXPECT_EQ(Act(m, Recompute::kNone, bf16, Attention::kEager), 66'060'288);
  EXPECT_EQ(Act(m, Recompute::kFull, bf16, Attention::kFlash), 2'097'152);  // the input only, as before
  m.dropout = 0.1;
  EXPECT_EQ(Act(m, Recompute::kSelective, bf16, Attention::kFlash), 34'603'008);
  m.norm = Norm::kLayerNorm;
  m.dropout = 0.0;
  EXPECT_EQ(Act(m, Recompute::kSelective, bf16, Attention::kFlash), 32'505'856);
}

// Selective recompute's modules (training.recompute_modules), s·b·h = 2,097,152 over t = 2. The GQA SwiGLU
// layer without dropout (31 units): "layernorm" recomputes the two norms' outputs, the attention's and the
// MLP's inputs, 27 units. A MoE layer of 8 SwiGLU experts of width h/2, top 2: attention 2 + 4·1280/1024 =
// 7, MLP 2 + 2·2 + 2·6·0.5 = 12, norms 4: 23 units; "moe_act" recomputes the experts' activation outputs,
// 2 copies of 2·0.5: 21; both 17. With fp8 the layer keeps 23 − 1 (QKV's input only in FP8) − (2 + 2·0.5
// − 1) (the dispatched tokens and the experts' second inputs in FP8, the projection's FP8 copy extra) = 20
// units, and the GEMMs keep FP8 copies of what the modules recompute, so only the MoE layer's 16-bit
// router input (2 units) goes: 18. "core_attn" (in the default modules) frees the 16-bit attention output,
// 2 units, beside the projection's FP8 copy: 16 with the other two, 18 alone.
TEST(Activations, RecomputeModulesFreeWhatTheyRecompute) {
  ModelSpec m = GqaSwiglu();
  m.norm = Norm::kRmsNorm;
  TrainingSpec t;
  const Plan p = Layout(2, 1, 1, 0, 2);
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 31 * 1'048'576);
  t.recompute_modules.layernorm = true;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 27 * 1'048'576);
  m.moe = {.experts = 8, .top_k = 2, .expert_ffn_hidden = 512};
  t.recompute_modules = {};
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 23 * 1'048'576);
  t.recompute_modules.moe_act = true;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 21 * 1'048'576);
  t.recompute_modules.layernorm = true;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 17 * 1'048'576);
  // Recompute "none" or "full" ignores the modules.
  t.activation_recompute = Recompute::kNone;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 23 * 1'048'576);
  t.activation_recompute = Recompute::kSelective;
  t.precision = Precision::kFp8;
  t.recompute_modules.core_attn = false;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 18 * 1'048'576);
  t.recompute_modules.core_attn = true;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 16 * 1'048'576);
  t.recompute_modules = {};
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 18 * 1'048'576);
  t.recompute_modules.core_attn = false;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 20 * 1'048'576);
}

// Megatron-Core's "mlp" module checkpoints a dense layer's MLP from the residual stream: in the GQA SwiGLU
// layer without dropout (31 units of s·b·h/t = 1,048,576 B) its normed input 2 and inner activations 6·3
// go: 11; beside "layernorm" (27, the input already gone) the 18: 9. With fp8 the layer keeps 31 − 2 (QKV's
// and the MLP's inputs only in FP8) − (3 − 1) (the second MLP GEMM's input in FP8, the projection's FP8
// copy extra) = 27, and "mlp" frees the MLP's FP8 input 1 and its 18 − 3: 11. MoE layers keep their MLP.
TEST(Activations, MlpModuleFreesTheDenseMlp) {
  ModelSpec m = GqaSwiglu();
  m.norm = Norm::kRmsNorm;
  TrainingSpec t;
  t.recompute_modules = {.core_attn = false, .mlp = true};
  const Plan p = Layout(2, 1, 1, 0, 2);
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 11 * 1'048'576);
  t.recompute_modules.layernorm = true;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 9 * 1'048'576);
  t.recompute_modules.layernorm = false;
  t.precision = Precision::kFp8;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 11 * 1'048'576);
  t.recompute_modules.mlp = false;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 27 * 1'048'576);
  t.precision = Precision::kBf16;
  m.moe = {.experts = 8, .top_k = 2, .expert_ffn_hidden = 512};
  t.recompute_modules.mlp = true;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 23 * 1'048'576);  // as without the module
}

// Multi-head latent attention, the GQA SwiGLU layer's 16 heads as MLA (query latent 512, K/V latent 256,
// heads 32 + 16 rope wide for Q and K, 32 for V): attention input 2, Q and K 2·768/1024 each, V 2·512/1024,
// AV's output 2·512/1024, the two latents kept twice each (their norms' inputs and outputs) 4·768/1024:
// 2 + 3 + 1 + 1 + 3 = 10; MLP 20, norms 4: 34 units of s·b·h/t = 1,048,576 bytes. "mla_up_proj" recomputes
// Q, K and V from the latents: 30.
TEST(Activations, LatentAttentionKeepsItsLatentsAndRecomputesItsHeads) {
  ModelSpec m = GqaSwiglu();
  m.norm = Norm::kRmsNorm;
  m.kv_heads = 0;
  m.mla = {.q_lora_rank = 512,
           .kv_lora_rank = 256,
           .qk_nope_head_dim = 32,
           .qk_rope_head_dim = 16,
           .v_head_dim = 32};
  TrainingSpec t;
  const Plan p = Layout(2, 1, 1, 0, 2);
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 34 * 1'048'576);
  t.recompute_modules.mla_up_proj = true;
  EXPECT_EQ(ActivationBytesPerLayer(m, t, p), 30 * 1'048'576);
}

// A multi-token-prediction depth (model.mtp_layers) sits on the last stage: the GQA SwiGLU layer with
// LayerNorm biases, h·(1024 + 2·256) + 1024·h + (1536 + 1024) + 2·2h = 2,628,096, MLP 3·h·3072 + 2·3072 +
// 1024 = 9,444,352, plus its inputs' norms and projection 2h + 2h² = 2,099,200: 14,171,648 / t = 7,085,824
// per rank; and that stage embeds the next tokens through its own embedding copy: 2·V·h/t = 1,024,000
// instead of 512,000. Stage 0 is unchanged; the last stage keeps the depth's layer and output activations.
TEST(Memory, MtpDepthsSitOnTheLastStage) {
  JobSpec s;
  s.model = GqaSwiglu();
  s.model.mtp_layers = 1;
  s.training.global_batch_size = 8;
  s.resources.gpus = 4;
  Plan p = Layout(2, 2, 1, 0);
  p.micro_batches = 8;
  EXPECT_EQ(StageMtpParamsPerRank(s.model, p, 1).dense, 7'085'824);
  EXPECT_EQ(StageMtpParamsPerRank(s.model, p, 0).dense, 0);
  EXPECT_EQ(StageVocabParamsPerRank(s.model, 2, 2, 1), 1'024'000);
  JobSpec plain = s;
  plain.model.mtp_layers = 0;
  EXPECT_EQ(StageVocabParamsPerRank(plain.model, 2, 2, 1), 512'000);
  const std::vector<int> layers{4, 4};
  EXPECT_EQ(StageMemory(s, p, layers, 0).total, StageMemory(plain, p, layers, 0).total);
  EXPECT_GT(StageMemory(s, p, layers, 1).activations, StageMemory(plain, p, layers, 1).activations);
}

// Embedding (8·s·b + s·b·h)/t and output layer plus fp32 logits (4·s·b·h + 4·s·b·V)/t, s = 1024, b = 2,
// h = 1024, V = 1000, t = 2: (16,384 + 2,097,152)/2 and (8,388,608 + 8,192,000)/2; with the loss in bf16
// (cross_entropy_fp32 false) the logits take 2·s·b·V: (8,388,608 + 4,096,000)/2.
TEST(Activations, EmbeddingAndOutputLayer) {
  ModelSpec m{1e9, 8, 1024, 16, 1024, 1000};
  const Plan p = Layout(2, 1, 1, 0, 2);
  TrainingSpec t;
  EXPECT_EQ(EmbeddingActivationBytes(m, p), 1'056'768);
  m.dropout = 0;  // no dropout mask: the ids only, 16,384/2
  EXPECT_EQ(EmbeddingActivationBytes(m, p), 8'192);
  EXPECT_EQ(OutputActivationBytes(m, t, p), 8'290'304);
  t.cross_entropy_fp32 = false;
  EXPECT_EQ(OutputActivationBytes(m, t, p), 6'242'304);
}

TEST(Activations, OneFOneBFirstStageHoldsPipelineDepth) {
  EXPECT_EQ(InFlightMicroBatches(4, 0, 8), 4);
  EXPECT_EQ(InFlightMicroBatches(4, 3, 8), 1);
  EXPECT_EQ(InFlightMicroBatches(4, 0, 2), 2);
  EXPECT_EQ(InFlightMicroBatches(1, 0, 16), 1);
  // Interleaved, vpp = 2: 4 · (1 + 3/(4·2)) = 5.5 (Korthikanti et al. 2022 §4.2.3), which is Megatron-Core's
  // 2·3 + 1·4 warm-up chunks plus one, over 2.
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(4, 0, 8, 2), 5.5);
  // Stage 1: 2·2 + 4 + 1 = 9 chunks (Korthikanti's factor on pp − stage would give 3 · 1.375 = 4.125).
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(4, 1, 8, 2), 4.5);
  // The Llama 3 paper's layout at 16,384 GPUs: pp 16, vpp 7, 16 micro-batches. Stage 1's warm-up, 2·14 + 6·16
  // = 124 chunks, is more than all 16·7 = 112, so it holds every micro-batch: 16, not 15 · (1 + 15/112).
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(16, 1, 16, 7), 16);
  EXPECT_DOUBLE_EQ(InFlightMicroBatches(16, 1, 32, 7), 125.0 / 7);
}

}  // namespace
}  // namespace shepherd
