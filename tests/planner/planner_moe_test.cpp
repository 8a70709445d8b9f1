// Mixture of experts: parameter counts (total and activated) against published figures, expert-parallel
// memory, all-to-all traffic and FLOPs against numbers worked out by hand (arithmetic in the comments).
#include <gtest/gtest.h>

#include "planner/comm_model.h"
#include "planner/memory_model.h"
#include "planner/model_arch.h"
#include "planner/planner.h"
#include "tests/planner/planner_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// Mixtral 8x7B (Jiang et al. 2024, arXiv:2401.04088, Table 1: dim 4096, 32 layers, head dim 128, 32 heads,
// 8 KV heads, hidden 14336, vocab 32000, 8 experts, top 2; SwiGLU, RMSNorm, untied).
ModelSpec Mixtral8x7B() {
  ModelSpec m;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.mlp = Mlp::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.vocab = 32000;
  m.seq_len = 4096;
  m.moe = {.experts = 8, .top_k = 2};
  return m;
}

// A Llama-style MoE (SwiGLU, RMSNorm, untied) whose heads are `head_dim` wide: Qwen3 and gpt-oss below.
ModelSpec WideHeadMoe(int layers, int hidden, int heads, int kv_heads, int head_dim, int vocab, MoeSpec moe) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = head_dim;
  m.mlp = Mlp::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.vocab = vocab;
  m.seq_len = 4096;
  m.moe = moe;
  return m;
}

// Mistral AI, "Mixtral of experts" (mistral.ai/news/mixtral-of-experts, Dec 2023): "46.7B total parameters
// but only uses 12.9B parameters per token". By hand: attention 4096 · (4096 + 2 · 1024) + 4096² =
// 41,943,040, norms 8,192, router 4096 · 8 = 32,768, expert 3 · 4096 · 14336 = 176,160,768;
// MoE layer 41,984,000 + 8 · 176,160,768 = 1,451,270,144, × 32 = 46,440,644,608; embedding and output
// 2 · 32000 · 4096 + final norm 4096 = 262,148,096 → 46,702,792,704. Activated per layer 41,984,000 +
// 2 · 176,160,768 = 394,305,536, × 32 + 262,148,096 = 12,879,925,248.
TEST(MoeArch, Mixtral8x7BMatchesItsPublishedCounts) {
  const ModelSpec m = Mixtral8x7B();
  EXPECT_EQ(CountParams(m), 46'702'792'704.0);
  EXPECT_EQ(CountActivatedParams(m), 12'879'925'248.0);
  EXPECT_NEAR(CountParams(m) / 46.7e9, 1, 0.005);
  EXPECT_NEAR(CountActivatedParams(m) / 12.9e9, 1, 0.005);
}

// DeepSeek-V3 (DeepSeek-AI 2024, arXiv:2412.19437: abstract "671B total parameters with 37B activated for
// each token"; §4.2: 61 layers, hidden 7168, 128 heads, the first three layers dense, 1 shared and 256
// routed experts of width 2048, 8 routed per token; vocabulary 128K, 129,280 in the released config; the
// 671B exclude the multi-token-prediction module), with its multi-head latent attention (q_lora_rank 1536,
// kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128). By hand, per layer:
// attention 7168 · 1536 + 1536 (query latent and norm) + 1536 · 128 · 192 + 7168 · (512 + 64) + 512 (K/V
// latent, rope key, norm) + 512 · 128 · 256 + 128 · 128 · 7168 = 187,107,328, norms 14,336; dense layer
// + 3 · 7168 · 18432 = 583,483,392; MoE layer attention and norms + router 7168 · 256 + shared expert
// 3 · 7168 · 2048 = 232,996,864, routed 256 · 44,040,192 = 11,274,289,152. Total 3 · 583,483,392 +
// 58 · 11,507,286,016 + 2 · 129,280 · 7168 + 7168 = 671,026,404,352; activated 3 · 583,483,392 +
// 58 · (232,996,864 + 8 · 44,040,192) + 1,853,365,248 = 37,552,282,624 (37B published: +1.5 %).
ModelSpec DeepSeekV3(bool mla) {
  ModelSpec m;
  m.layers = 61;
  m.hidden = 7168;
  m.heads = 128;
  m.ffn_hidden = 18432;
  m.mlp = Mlp::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.vocab = 129280;
  m.seq_len = 4096;
  m.moe = {.experts = 256, .top_k = 8, .expert_ffn_hidden = 2048, .shared_experts = 1, .moe_layers = 58};
  if (mla)
    m.mla = {.q_lora_rank = 1536,
             .kv_lora_rank = 512,
             .qk_nope_head_dim = 128,
             .qk_rope_head_dim = 64,
             .v_head_dim = 128};
  return m;
}

TEST(MoeArch, DeepSeekV3WithItsLatentAttentionMatchesItsPublishedCounts) {
  const ModelSpec m = DeepSeekV3(true);
  EXPECT_EQ(CountParams(m), 671'026'404'352.0);
  EXPECT_EQ(CountActivatedParams(m), 37'552'282'624.0);
  EXPECT_NEAR(CountParams(m) / 671e9, 1, 0.001);
  EXPECT_NEAR(CountActivatedParams(m) / 37e9, 1, 0.02);
  // Counted as multi-head attention (4h² = 205.5M per layer), the activated count is 4.5 % over.
  EXPECT_GT(CountActivatedParams(DeepSeekV3(false)) / 37e9, 1.04);
}

// Multi-head latent attention without a query latent, and with half DeepSeek-V3's heads. DeepSeek-V2-Lite
// (DeepSeek-V2 paper, arXiv:2405.04434, Appendix B: "15.7B total parameters, of which 2.4B are activated";
// config.json: 27 layers, the first dense of width 10,944, hidden 2048, 16 heads, kv_lora_rank 512, no
// q_lora_rank, head widths 128 + 64 and 128, 64 routed experts of width 1408, 6 per token, 2 shared,
// vocabulary 102,400). By hand: attention 2048 · 16 · 192 + 2048 · 576 + 512 + 512 · 16 · 256 +
// 16 · 128 · 2048 = 13,763,072, norms 4096; dense layer + 3 · 2048 · 10944 = 81,007,104; MoE layer
// attention and norms + router 131,072 + 2 shared 17,301,504 = 31,199,744, routed 64 · 8,650,752.
// Total 81,007,104 + 26 · 584,847,872 + 2 · 102,400 · 2048 + 2048 = 15,706,484,224; activated
// 81,007,104 + 26 · 83,104,256 + 419,432,448 = 2,661,150,208, 2.45B without the input embedding (the
// published figure leaves it out, as gpt-oss's does). Kimi K2 (Kimi K2 report, arXiv:2507.20534: 1.04T
// total, 32B activated; config.json: DeepSeek-V3's shape with 64 heads, 384 experts, 1 dense layer,
// vocabulary 163,840): 1,026,408,209,408 and 32,861,477,888 counted.
TEST(MoeArch, MlaModelsWithoutAQueryLatentOrWithFewerHeadsMatchTheirPublishedCounts) {
  ModelSpec lite;
  lite.layers = 27;
  lite.hidden = 2048;
  lite.heads = 16;
  lite.ffn_hidden = 10944;
  lite.mlp = Mlp::kSwiglu;
  lite.norm = Norm::kRmsNorm;
  lite.vocab = 102400;
  lite.seq_len = 4096;
  lite.mla = {.kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64, .v_head_dim = 128};
  lite.moe = {.experts = 64, .top_k = 6, .expert_ffn_hidden = 1408, .shared_experts = 2, .moe_layers = 26};
  EXPECT_NEAR(CountParams(lite), 15'706'484'224.0, 1e3);
  EXPECT_NEAR(CountActivatedParams(lite), 2'661'150'208.0, 1e3);
  EXPECT_NEAR(CountParams(lite) / 15.7e9, 1, 0.005);
  EXPECT_NEAR((CountActivatedParams(lite) - 102400.0 * 2048) / 2.4e9, 1, 0.03);

  ModelSpec k2 = DeepSeekV3(true);
  k2.heads = 64;
  k2.vocab = 163840;
  k2.moe = {.experts = 384, .top_k = 8, .expert_ffn_hidden = 2048, .shared_experts = 1, .moe_layers = 60};
  EXPECT_NEAR(CountParams(k2), 1'026'408'209'408.0, 1e3);
  EXPECT_NEAR(CountActivatedParams(k2), 32'861'477'888.0, 1e3);
  EXPECT_NEAR(CountParams(k2) / 1.04e12, 1, 0.02);
  EXPECT_NEAR(CountActivatedParams(k2) / 32e9, 1, 0.03);
}

// Model FLOPs with MLA: QKᵀ over heads of 192 (128 + 64 rope) and AV over values of 128, not h/a = 56:
// 6 · 61 · 4096 · 128 · (192 + 128) = 61,404,610,560 per token on top of 6 · (61 layers' activated
// 35,698,917,376 + output layer 926,679,040) = 219,753,578,496: 281,158,189,056. Its one multi-token-
// prediction depth (model.mtp_layers) holds a MoE layer (11,507,286,016), the norms of its two inputs and
// their 2h → h projection (2 · 7168 + 2 · 7168²): 11,610,060,800 more, 682,636,465,152 in all (DeepSeek
// publishes 685B with the MTP module's own copies of the embedding and output layer, 1.85B); per token
// 6 · (585,318,400 + 102,774,784 + 926,679,040) + 6 · 4096 · 40,960 = 10,695,266,304 more FLOPs:
// 291,853,455,360. Megatron-Bridge counts 259.8 G per token for its DeepSeek-V3 rows, which run that MTP
// depth (1,276 TFLOP/s at 4,912 tokens/s, 26.08): ours with causal attention (half the 62,411,243,520 of
// QKᵀ and AV, MTP's included, off) is 260.6 G, 0.3 % above.
TEST(MoeArch, DeepSeekV3ModelFlopsCountTheLatentAttentionAndTheMtpDepth) {
  ModelSpec m = DeepSeekV3(true);
  EXPECT_NEAR(ModelFlopsPerToken(m), 281'158'189'056.0, 1e3);
  m.mtp_layers = 1;
  EXPECT_NEAR(CountParams(m), 682'636'465'152.0, 1e3);
  EXPECT_NEAR(ModelFlopsPerToken(m), 291'853'455'360.0, 1e3);
  EXPECT_NEAR((ModelFlopsPerToken(m) - 62'411'243'520.0 / 2) / (1276e12 / 4912), 1, 0.005);
}

// Heads wider than h/a (model.head_dim): Qwen3 (Qwen3 technical report, arXiv:2505.09388, Table 2: 30B-A3B
// 48 layers, 32 query and 4 KV heads, 128 experts, 8 per token, 30.5B total and 3.3B activated; 235B-A22B
// 94 layers, 64 and 4 heads, 128 experts, 8 per token, 235B and 22B; the released configs give hidden 2048
// and 4096, head_dim 128, expert width 768 and 1536, vocabulary 151,936, untied, RMSNorm, SwiGLU; the q/k
// norms of 128 weights per layer are not counted). By hand, 30B-A3B: attention 2048 · (4096 + 2 · 512) +
// 4096 · 2048 = 18,874,368, norms 4,096, router 2048 · 128 = 262,144, expert 3 · 2048 · 768 = 4,718,592;
// layer 18,878,464 + 262,144 + 128 · 4,718,592 = 623,120,384, × 48 = 29,909,778,432; embedding and output
// 2 · 151,936 · 2048 + final norm 2048 = 622,331,904 → 30,532,110,336 (30.5B). Activated per layer
// 19,140,608 + 8 · 4,718,592 = 56,889,344, × 48 + 622,331,904 = 3,353,020,416 (3.3B).
TEST(MoeArch, HeadDimWiderThanHiddenOverHeadsMatchesQwen3Counts) {
  ModelSpec m =
      WideHeadMoe(48, 2048, 32, 4, 128, 151936, {.experts = 128, .top_k = 8, .expert_ffn_hidden = 768});
  EXPECT_EQ(CountParams(m), 30'532'110'336.0);
  EXPECT_EQ(CountActivatedParams(m), 3'353'020'416.0);
  EXPECT_NEAR(CountParams(m) / 30.5e9, 1, 0.005);
  EXPECT_NEAR(CountActivatedParams(m) / 3.3e9, 1, 0.02);
  // Without head_dim the attention would be 2048 wide, not 4096: 15 % of the activated count missing.
  ModelSpec narrow = m;
  narrow.head_dim = 0;
  EXPECT_LT(CountActivatedParams(narrow) / 3.3e9, 0.9);

  m = WideHeadMoe(94, 4096, 64, 4, 128, 151936, {.experts = 128, .top_k = 8, .expert_ffn_hidden = 1536});
  EXPECT_NEAR(CountParams(m) / 235e9, 1, 0.005);
  EXPECT_NEAR(CountActivatedParams(m) / 22e9, 1, 0.01);
}

// gpt-oss-120b (OpenAI, gpt-oss model card, arXiv:2508.10925: 116.8B total, 5.1B active per token; 36
// layers, residual 2880, 64 query heads and 8 KV heads of width 64, 128 experts of width 2880, 4 per
// token, vocabulary 201,088, untied). The card's active count leaves out the input embedding (a lookup,
// not a matmul): our activated count minus V·h. By hand: attention 2880 · (4096 + 2 · 512) + 4096 · 2880 =
// 26,542,080, norms 5,760, router 368,640, expert 3 · 2880² = 24,883,200; layer 26,916,480 + 128 ·
// 24,883,200 = 3,211,966,080, × 36 = 115,630,778,880, + 2 · 201,088 · 2880 + 2880 = 116,789,048,640.
// Activated: (26,916,480 + 4 · 24,883,200) · 36 + 1,158,269,760 = 5,710,443,840; minus 579,133,440 =
// 5,131,310,400.
TEST(MoeArch, GptOss120BMatchesItsModelCard) {
  const ModelSpec m =
      WideHeadMoe(36, 2880, 64, 8, 64, 201088, {.experts = 128, .top_k = 4, .expert_ffn_hidden = 2880});
  EXPECT_EQ(CountParams(m), 116'789'048'640.0);
  EXPECT_EQ(CountActivatedParams(m), 5'710'443'840.0);
  EXPECT_NEAR(CountParams(m) / 116.8e9, 1, 0.001);
  EXPECT_NEAR((CountActivatedParams(m) - 201088.0 * 2880) / 5.1e9, 1, 0.01);
}

TEST(MoeArch, LayerFrequencyCountsEveryNthLayer) {
  MoeSpec e{.experts = 8, .top_k = 2, .moe_layer_freq = 2};
  EXPECT_EQ(e.count(32), 16);
  EXPECT_EQ(e.count(5), 3);  // layers 0, 2, 4
  e.moe_layer_freq = 0;
  EXPECT_EQ(e.count(32), 32);
  EXPECT_EQ(MoeSpec{}.count(32), 0);
}

TEST(MoeArch, SmallModelSplit) {
  const ModelSpec m = SmallMoe(8).model;
  const LayerParamSplit s = CountLayerSplit(m);
  EXPECT_EQ(s.dense, 17'152);
  EXPECT_EQ(s.expert, 66'304);
  EXPECT_EQ(s.activated, 50'304);
  EXPECT_EQ(CountParams(m), 179'840);
  // FLOPs from activated parameters: 6 · (2 · 50,304 + 6,400) + 12 · 2 · 32 · 64 = 642,048 + 49,152.
  EXPECT_EQ(ModelFlopsPerToken(m), 691'200);
}

// tp 2, dp 4, ep 2, Megatron ZeRO-1 (distributed optimizer), 8 GPUs.
//   dense per rank (2 · 17,152 + embedding 6,400 + output 6,400) / 2 = 23,552 at 2 + 4 + (4 + 8)/4 = 9 B
//   (sharded over dp·cp = 4) = 211,968; experts 2 · 66,304 / (tp 2 · ep 2) = 33,152 at 2 + 4 + 12/2 = 12 B
//   (sharded over the expert-data-parallel dp·cp/ep = 2) = 397,824; state 609,792.
TEST(MoeMemory, ExpertsShardedByEpAndTheirOwnDataParallelGroup) {
  const JobSpec s = SmallMoe(8);
  EXPECT_EQ(StageExpertParamsPerRank(s.model, MoeLayout(2, 4, 2, 1), 2), 33'152);
  auto e = EvaluatePlan(s, MoeLayout(2, 4, 2, 1), Hardware{});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(State(e->memory), 609'792);
  EXPECT_EQ(e->model_parameters, 179'840);
  EXPECT_EQ(e->activated_parameters, 2 * 50'304 + 12'928);
  // ep 1: the experts 2 · 66,304 / 2 = 66,304 per rank at 9 B: 211,968 + 596,736.
  auto no_ep = EvaluatePlan(s, MoeLayout(2, 4, 1, 1), Hardware{});
  ASSERT_TRUE(no_ep.ok());
  EXPECT_EQ(State(no_ep->memory), 808'704);
}

// Activations of a MoE layer (units of s·b·h): attention 7 + 4 = 11, MLP 3 + 2·top_k 4 + (2 experts) ·
// 4 · 128/64 = 23, norms 4 → 38; sequence parallel over tp 2: 19 · 32 · 64 = 38,912 bytes.
TEST(MoeMemory, ActivationsCountDispatchedTokensAndUsedExperts) {
  const JobSpec s = SmallMoe(8);
  EXPECT_EQ(ActivationBytesPerLayer(s.model, s.training, MoeLayout(2, 4, 2, 1)), 38'912);
}

// All-to-all: 32 tokens / tp 2 (sequence parallel) = 16 per rank, × top 2 × 64 × 2 B = 4,096 B, half of
// it leaves the rank (ep 2): 2,048 per all-to-all; 2 MoE layers × 2 micro-batches (8 / dp 4) × 4
// (dispatch and combine, forward and backward) = 16 → 32,768.
// DP (ZeRO-1): dense 23,552 params: fp32 gradients 94,208 B and bf16 weights 47,104 B, 3/4 each over 4
// ranks = 105,984; experts 33,152: 132,608 and 66,304, 1/2 each over 2 ranks = 99,456 → 205,440.
// head_dim 32 on 4 heads (q, k and v 128 wide on a 64 residual, twice h/a): attention params 64 · (128 +
// 2 · 128) + 128 · 64 = 32,768 plus biases 384 + 64 = 448, against 16,384 + 256: activated per layer
// 50,304 + 16,576 = 66,880; FLOPs 6 · (2 · 66,880 + 6,400) + 12 · 2 · 32 · 128 = 840,960 + 98,304.
// Activations: attention 3 + 4 · (128 + 128)/64 = 19 units instead of 11, so 46 in all; over tp 2:
// 23 · 32 · 64 = 47,104 bytes.
TEST(MoeArch, HeadDimWidensAttentionParamsFlopsAndActivations) {
  JobSpec s = SmallMoe(8);
  s.model.head_dim = 32;
  EXPECT_EQ(CountLayerSplit(s.model).activated, 66'880);
  EXPECT_EQ(ModelFlopsPerToken(s.model), 939'264);
  EXPECT_EQ(ActivationBytesPerLayer(s.model, s.training, MoeLayout(2, 4, 2, 1)), 47'104);
  s.model.head_dim = 16;  // h/a: the same as leaving it out
  EXPECT_EQ(ModelFlopsPerToken(s.model), 691'200);
  EXPECT_EQ(ActivationBytesPerLayer(s.model, s.training, MoeLayout(2, 4, 2, 1)), 38'912);
}

TEST(MoeComm, AllToAllAndExpertDataParallelBytes) {
  const JobSpec s = SmallMoe(8);
  Plan p = MoeLayout(2, 4, 2, 1);
  p.micro_batches = 2;
  const CommBytes c = EstimateCommBytes(s, p);
  EXPECT_EQ(c.ep, 32'768);
  EXPECT_EQ(c.dp, 205'440);
  // The all-to-alls are on the critical path: ep 2 is not free.
  const StepTime with_ep = EstimateStepTime(s, p, Hardware{});
  EXPECT_GT(with_ep.ep, 0);
  EXPECT_GE(with_ep.exposed, with_ep.ep);
  p.ep = 1;
  EXPECT_EQ(EstimateCommBytes(s, p).ep, 0);
  EXPECT_EQ(EstimateStepTime(s, p, Hardware{}).ep, 0);
}

// An EP group wider than the NVLink domain (8 GPUs in Hardware{}): 16 experts, ep 16, tp 1 on 16 GPUs,
// one micro-batch (16 / dp 16). Each all-to-all: 32 tokens × top 2 × 64 × 2 B = 8,192 B, 15/16 of it to
// the 15 peers = 7,680 B; 2 MoE layers × 4 all-to-alls = 61,440 B. The 7 peers in the rank's domain get
// 7/15 of it over NVLink (28,672 B at 360 GB/s), the 8 outside 8/15 over the network (32,768 B at 40 GB/s)
// at the same time: 819.2 ns, plus 8 latencies of 15 µs (the group crosses domains). ep 8 fits one
// domain: 8,192 · 7/8 · 8 = 57,344 B all over NVLink, 8 latencies of 5 µs.
TEST(MoeComm, AllToAllPeersInTheNvlinkDomainAreReachedOverNvlink) {
  JobSpec s = SmallMoe(16);
  s.model.moe.experts = 16;
  s.training.global_batch_size = 16;
  Plan p = MoeLayout(1, 16, 16, 1);
  p.micro_batches = 1;
  EXPECT_EQ(EstimateCommBytes(s, p).ep, 61'440);
  EXPECT_NEAR(EstimateStepTime(s, p, Hardware{}).ep, 32'768 / 40e9 + 8 * 15e-6, 1e-15);
  p.ep = 8;
  EXPECT_EQ(EstimateCommBytes(s, p).ep, 57'344);
  EXPECT_NEAR(EstimateStepTime(s, p, Hardware{}).ep, 57'344 / 360e9 + 8 * 5e-6, 1e-15);
}

// Expert GEMMs are tokens-per-expert × h × F_e/tp: the dense curve (here 0.7 · d/(d + 192)) at the smaller
// of the two. Mixtral (8 experts, top 2) at ep 8 gives each expert 4096 · 2 · 8/8 = 8192 tokens, more than
// h/tp = 2048, so the dense figure 0.7 · 2048/2240 = 0.64; a fine-grained MoE (128 experts, top 4, the
// gpt-oss-120b layout of the Validation row) gives 4096 · 4 · 8/128 = 1024 tokens: 0.7 · 1024/1216.
TEST(MoeCompute, ExpertGemmsAtTheCurveOfTheTokensEachExpertReceives) {
  JobSpec s;
  s.model = Mixtral8x7B();
  Plan p = MoeLayout(2, 32, 8, 1);
  Hardware hw;
  hw.matmul_efficiency = 0.7;
  EXPECT_DOUBLE_EQ(ExpertTokensPerMicroBatch(s, p), 8192);
  EXPECT_NEAR(ExpertMatmulEfficiency(s, p, hw), 0.64, 1e-12);
  s.model.moe = {.experts = 128, .top_k = 4};
  p.tp = 1;
  EXPECT_DOUBLE_EQ(ExpertTokensPerMicroBatch(s, p), 1024);
  EXPECT_NEAR(ExpertMatmulEfficiency(s, p, hw), 0.7 * 1024 / 1216, 1e-12);
  // In the step time: fewer tokens per expert (ep 1: 32 · 2/4 = 16 instead of 32 at ep 2) is slower.
  const JobSpec small = SmallMoe(8);
  Plan q = MoeLayout(2, 4, 2, 1);
  q.micro_batches = 2;
  const double ep2 = EstimateStepTime(small, q, Hardware{}).compute;
  q.ep = 1;
  EXPECT_GT(EstimateStepTime(small, q, Hardware{}).compute, ep2);
}

TEST(MoeValidation, ExpertParallelRulesNameTheField) {
  JobSpec s = SmallMoe(8);
  auto not_dividing = EvaluatePlan(s, MoeLayout(1, 8, 8, 1), Hardware{});  // 8 ∤ 4 experts
  ASSERT_FALSE(not_dividing.ok());
  EXPECT_TRUE(HasField(not_dividing.status(), "parallelism.ep"));
  auto not_in_dp = EvaluatePlan(s, MoeLayout(8, 1, 4, 0), Hardware{});  // 4 ∤ dp·cp = 1
  ASSERT_FALSE(not_in_dp.ok());
  EXPECT_TRUE(HasField(not_in_dp.status(), "parallelism.ep"));
  JobSpec dense = Model(0, 2, 64, 4, 32, 100, 8, 8);
  auto no_moe = EvaluatePlan(dense, MoeLayout(2, 4, 2, 1), Hardware{});
  ASSERT_FALSE(no_moe.ok());
  EXPECT_TRUE(HasField(no_moe.status(), "parallelism.ep"));
  s.model.moe.top_k = 5;  // more than 4 experts
  auto bad_k = EvaluatePlan(s, MoeLayout(2, 4, 2, 1), Hardware{});
  ASSERT_FALSE(bad_k.ok());
  EXPECT_TRUE(HasField(bad_k.status(), "model.moe.top_k"));
}

// Expert tensor parallel 1 under tp 2 (Megatron-Core's expert grid folds the 8 ranks of the stage: etp 1 ·
// ep 4 = 4 divides them, expert data parallel 8/4 = 2), tp 2, dp 4, ZeRO-1, 2 micro-batches:
//   memory: experts 2 · 66,304 / (etp 1 · ep 4) = 33,152 per rank at 2 + 4 + 12/2 = 12 B, the same as
//   etp 2 · ep 2 (609,792 with the dense 211,968); with ep 2 the expert data parallel size is 4:
//   66,304 at 9 B, 808,704;
//   TP: a = 32 · 64 · 2 B = 4,096; 4 collectives per layer, each moving 2 · 1/2 · a = 4,096 over tp 2; both
//   layers are MoE layers whose expert half (2 of the 4) no longer runs over the tp group:
//   2 micro-batches · 4 · (2 − 1) · 4,096 = 32,768, half the 65,536 of etp = tp;
//   all-to-all: each rank dispatches its own 16 tokens (32 / tp 2) × top 2 × 64 × 2 B = 4,096 B, 3/4 to
//   the 3 peers of ep 4: 3,072 × 2 layers × 2 micro-batches × 4 = 49,152;
//   DP: dense 105,984; experts 33,152 over 2 ranks as in AllToAllAndExpertDataParallelBytes: 205,440.
TEST(MoeExpertTp, OneFoldsTheExpertsOverTheTensorParallelRanks) {
  const JobSpec s = SmallMoe(8);
  Plan p = MoeLayout(2, 4, 4, 1);
  p.etp = 1;
  EXPECT_EQ(ExpertDataParallelSize(p), 2);
  EXPECT_EQ(StageExpertParamsPerRank(s.model, p, 2), 33'152);
  auto e = EvaluatePlan(s, p, Hardware{});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(State(e->memory), 609'792);
  EXPECT_EQ(e->plan.etp, 1);
  EXPECT_NE(e->explanation.find("etp=1"), std::string::npos) << e->explanation;
  Plan ep2 = MoeLayout(2, 4, 2, 1);
  ep2.etp = 1;
  EXPECT_EQ(ExpertDataParallelSize(ep2), 4);
  auto e2 = EvaluatePlan(s, ep2, Hardware{});
  ASSERT_TRUE(e2.ok()) << e2.status().message();
  EXPECT_EQ(State(e2->memory), 808'704);

  p.micro_batches = 2;
  const CommBytes c = EstimateCommBytes(s, p);
  EXPECT_EQ(c.tp, 32'768);
  EXPECT_EQ(c.ep, 49'152);
  EXPECT_EQ(c.dp, 205'440);
  Plan same = p;
  same.etp = 0;  // etp = tp
  same.ep = 2;
  EXPECT_EQ(EstimateCommBytes(s, same).tp, 65'536);
  EXPECT_DOUBLE_EQ(EstimateStepTime(s, p, Hardware{}).tp, EstimateStepTime(s, same, Hardware{}).tp / 2);
}

// Each expert GEMM takes the tokens of the etp ranks that share it: Mixtral at tp 2, etp 1, ep 8 gives each
// expert 4096/2 (the rank's sequence-parallel share) · top 2 · 8/8 = 4096 tokens on the whole h = 4096, so
// 0.7 · 4096/(4096 + 192) instead of etp 2's 0.64 (ExpertGemmsAtTheCurveOfTheTokensEachExpertReceives).
TEST(MoeExpertTp, ExpertGemmsTakeTheWholeWidthWithEtpOne) {
  JobSpec s;
  s.model = Mixtral8x7B();
  Plan p = MoeLayout(2, 32, 8, 1);
  p.etp = 1;
  Hardware hw;
  hw.matmul_efficiency = 0.7;
  EXPECT_DOUBLE_EQ(ExpertTokensPerMicroBatch(s, p), 4096);
  EXPECT_NEAR(ExpertMatmulEfficiency(s, p, hw), 0.7 * 4096 / 4288, 1e-12);
}

TEST(MoeExpertTp, RulesNameTheField) {
  JobSpec s = SmallMoe(8);
  Plan grid = MoeLayout(2, 1, 4, 0);  // 2 GPUs' worth of ranks per stage: etp 1 · ep 4 does not divide 2
  s.resources.gpus = 2;
  s.training.global_batch_size = 2;
  grid.etp = 1;
  auto bad_grid = EvaluatePlan(s, grid, Hardware{});
  ASSERT_FALSE(bad_grid.ok());
  EXPECT_TRUE(HasField(bad_grid.status(), "parallelism.ep"));
  EXPECT_TRUE(HasField(bad_grid.status(), "parallelism.etp"));
  s = SmallMoe(8);
  Plan no_sp = MoeLayout(2, 4, 2, 1);
  no_sp.etp = 1;
  no_sp.sequence_parallel = false;  // the experts would take tokens every TP rank holds in full
  auto e = EvaluatePlan(s, no_sp, Hardware{});
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(HasField(e.status(), "parallelism.etp"));
  // etp = tp: Megatron-Core's TransformerConfig still raises "When using expert parallelism and tensor
  // parallelism, sequence parallelism must be used" (ep > 1, tp > 1); the planner accepted it.
  Plan tp_ep = MoeLayout(2, 4, 2, 1);
  tp_ep.sequence_parallel = false;
  auto no_sp_same_etp = EvaluatePlan(s, tp_ep, Hardware{});
  ASSERT_FALSE(no_sp_same_etp.ok());
  ASSERT_EQ(no_sp_same_etp.status().fields().size(), 1u);
  EXPECT_EQ(no_sp_same_etp.status().fields()[0].field, "parallelism.sequence_parallel");
  tp_ep.sequence_parallel = true;
  EXPECT_TRUE(EvaluatePlan(s, tp_ep, Hardware{}).ok());
  Plan tp_only = MoeLayout(2, 4, 1, 1);  // no expert parallelism: allowed without it
  tp_only.sequence_parallel = false;
  EXPECT_TRUE(EvaluatePlan(s, tp_only, Hardware{}).ok());
  JobSpec dense = Model(0, 2, 64, 4, 32, 100, 8, 8);
  Plan p = MoeLayout(2, 4, 1, 1);
  p.etp = 1;
  auto no_moe = EvaluatePlan(dense, p, Hardware{});
  ASSERT_FALSE(no_moe.ok());
  EXPECT_TRUE(HasField(no_moe.status(), "parallelism.etp"));
}

// Mixtral 8x7B on 64 H100s (Megatron-LM's Mixtral example layout TP 2 PP 4 EP 8, 256 sequences of 4096):
// the layout is accepted and fits; auto also searches ep and finds a fitting layout no slower.
TEST(MoeAuto, MixtralSearchesExpertParallelism) {
  JobSpec s;
  s.model = Mixtral8x7B();
  s.training.global_batch_size = 256;
  s.resources.gpus = 64;
  Plan given = MoeLayout(2, 8, 8, 1);
  given.pp = 4;
  auto e = EvaluatePlan(s, given, Hardware{});
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->fits);
  auto a = AutoPlan(s, Hardware{});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->fits);
  EXPECT_LE(a->step_time_s, e->step_time_s);
  EXPECT_EQ(8 % a->plan.ep, 0);
  EXPECT_NE(a->explanation.find("ep dividing 8 experts"), std::string::npos) << a->explanation;
}

}  // namespace
}  // namespace shepherd
