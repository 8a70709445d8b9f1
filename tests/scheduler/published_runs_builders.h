// Builders shared by the published-run tables (published_runs.cpp, published_runs_megatron.cpp).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "scheduler/planner.h"
#include "tests/scheduler/published_runs.h"

namespace shepherd::testing {

// A PublishedRun name built at run time: the table keeps C strings, so the text lives in a set whose nodes
// do not move, for the life of the process.
inline const char* RunName(const std::string& name) {
  static std::set<std::string> names;
  return names.insert(name).first->c_str();
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

// NeMo's long-sequence tables, 4K to 1M tokens with context parallelism (published_runs_long_context.cpp).
void AddNemoLongSequenceRuns(std::vector<PublishedRun>* runs);

// NeMo 25.04's FP8 pre-training table on DGX-GB200 (published_runs_nemo25.cpp).
void AddNemo25Runs(std::vector<PublishedRun>* runs);

}  // namespace shepherd::testing
