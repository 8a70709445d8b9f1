// Builders shared by the published-run tables (published_runs.cpp, published_runs_megatron.cpp).
#pragma once

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "planner/planner.h"
#include "tests/planner/published_runs.h"

namespace shepherd::testing {

// A PublishedRun name built at run time: the table keeps C strings, so the text lives in a set whose nodes
// do not move, for the life of the process.
inline const char* RunName(const std::string& name) {
  static std::set<std::string> names;
  return names.insert(name).first->c_str();
}

// `v` with `digits` after the point.
inline std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A GPT-style model (GeLU MLP of 4h, LayerNorm, untied output layer: the ModelSpec defaults) on `gpus` GPUs
// of type `gpu`.
inline JobSpec GptStyle(int layers, int hidden, int heads, int vocab, int seq_len, int global_batch, int gpus,
                        const char* gpu) {
  JobSpec s;
  s.model.layers = layers;
  s.model.hidden = hidden;
  s.model.heads = heads;
  s.model.vocab = vocab;
  s.model.seq_len = seq_len;
  s.training.global_batch_size = global_batch;
  s.resources.gpus = gpus;
  s.resources.gpu = gpu;
  return s;
}

// A Llama-style model: GPT-style with GQA, a SwiGLU MLP and RMSNorm.
inline JobSpec LlamaStyle(int layers, int hidden, int heads, int kv_heads, int vocab, int seq_len,
                          int global_batch, int gpus, const char* gpu) {
  JobSpec s = GptStyle(layers, hidden, heads, vocab, seq_len, global_batch, gpus, gpu);
  s.model.kv_heads = kv_heads;
  s.model.mlp = Mlp::kSwiglu;
  s.model.norm = Norm::kRmsNorm;
  return s;
}

// tp·cp·pp·dp with `vpp` virtual stages and ZeRO `zero`; micro-batch 1, sequence parallel when tp > 1.
inline Plan Layout(int tp, int cp, int pp, int dp, int vpp, int zero) {
  return Plan{.tp = tp,
              .pp = pp,
              .dp = dp,
              .zero_stage = zero,
              .micro_batches = 0,
              .micro_batch_size = 1,
              .cp = cp,
              .vpp = vpp,
              .sequence_parallel = tp > 1,
              .pipeline_layers = {}};
}

// Runs before Korthikanti et al. 2022 (MT-NLG 2021, BLOOM 2022 on Megatron-DeepSpeed): no sequence
// parallelism. Their specs also set training.attention "eager" (Megatron's fused masked softmax; flash
// attention came later).
inline Plan Historic(Plan p) {
  p.sequence_parallel = false;
  return p;
}

// The rows of Megatron-LM's README: its GPT-3 175B example and its A100 and H100 weak-scaling tables, in
// that order (published_runs_megatron.cpp).
void AddMegatronLmReadmeRuns(std::vector<PublishedRun>* runs);

// Qwen3 MoE at sequence 4096 (Qwen3 technical report, arXiv:2505.09388 Table 2; heads of width 128,
// 128 experts, 8 per token, no shared experts, vocabulary 151,936, untied): 30B-A3B has 48 layers, residual
// 2048, 32 query and 4 KV heads, experts of width 768; 235B-A22B 94 layers, 4096, 64 and 4, 1536.
inline JobSpec Qwen3Moe(int layers, int hidden, int heads, int expert_ffn, int gpus, int global_batch,
                        const char* gpu) {
  JobSpec s = LlamaStyle(layers, hidden, heads, 4, 151936, 4096, global_batch, gpus, gpu);
  s.model.head_dim = 128;
  s.model.moe = {.experts = 128, .top_k = 8, .expert_ffn_hidden = expert_ffn};
  return s;
}
inline JobSpec Qwen3_30B(int gpus, int global_batch, const char* gpu) {
  return Qwen3Moe(48, 2048, 32, 768, gpus, global_batch, gpu);
}
inline JobSpec Qwen3_235B(int gpus, int global_batch, const char* gpu) {
  return Qwen3Moe(94, 4096, 64, 1536, gpus, global_batch, gpu);
}

// DeepSeek-V3 (arXiv:2412.19437 §4.2 and the released config.json): 61 layers (the first 3 dense, SwiGLU
// 18,432), residual 7168, 128 heads of multi-head latent attention (query latent 1536, K/V latent 512, head
// widths 128 + 64 rope for queries and keys, 128 for values), 256 routed experts of width 2048, 8 per
// token, 1 shared expert, vocabulary 129,280, untied, RMSNorm.
inline JobSpec DeepSeekV3(int gpus, int global_batch, const char* gpu) {
  JobSpec s = LlamaStyle(61, 7168, 128, 0, 129280, 4096, global_batch, gpus, gpu);
  s.model.ffn_hidden = 18432;
  s.model.mla = {.q_lora_rank = 1536,
                 .kv_lora_rank = 512,
                 .qk_nope_head_dim = 128,
                 .qk_rope_head_dim = 64,
                 .v_head_dim = 128};
  s.model.moe = {
      .experts = 256, .top_k = 8, .expert_ffn_hidden = 2048, .shared_experts = 1, .moe_layers = 58};
  return s;
}

// Megatron-Bridge's FP8 performance recipes (scripts/performance/utils/precision.py: fp8_cs is
// bf16_with_fp8_current_scaling_mixed, which sets fp8_param_gather; the perf scripts set
// grad_reduce_in_fp32 false; the models are built with cross_entropy_loss_fusion, Transformer Engine's).
inline void BridgeFp8(JobSpec* s) {
  s->training.precision = Precision::kFp8;
  s->training.fp8_param_gather = true;
  s->training.grad_reduce_in_fp32 = false;
  s->training.cross_entropy_fp32 = false;
}

// NeMo's long-sequence tables, 4K to 1M tokens with context parallelism (published_runs_long_context.cpp).
void AddNemoLongSequenceRuns(std::vector<PublishedRun>* runs);

// NeMo 25.04's FP8 pre-training table on DGX-GB200 (published_runs_nemo25.cpp).
void AddNemo25Runs(std::vector<PublishedRun>* runs);

// Megatron-Bridge's MoE rows of the 26.08 container on GB200 and GB300 and its all-to-all overlap A/B on
// 16 H100s (published_runs_bridge_moe.cpp).
void AddBridgeMoeRuns(std::vector<PublishedRun>* runs);

}  // namespace shepherd::testing
