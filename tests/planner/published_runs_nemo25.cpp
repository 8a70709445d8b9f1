// NeMo 2.0's FP8 pre-training table on DGX-GB200 (published_runs.h), container NeMo 25.04.
#include "tests/planner/published_runs_builders.h"

namespace shepherd::testing {

// docs.nvidia.com/nemo-framework/user-guide/latest/performance/archive/25.04-performance-summary.html,
// "Container: NeMo 25.04, System: DGX-GB200": GPUs, GBS, MBS, sequence, FSDP, TP, PP, CP, VP, EP, GA and
// tokens/s per GPU per row (compared on tokens/s: NeMo's own FLOP count). FP8 with per-tensor current
// scaling. Configs (NVIDIA/NeMo scripts/performance: helpers.py, llm/pretrain_*.py and
// recommended_model_configs/model_configs_gb200.csv, at ae861a9c43): the precision recipe
// bf16_with_fp8_current_scaling_mixed (fp8_param_gather; its first and last layers in bf16 are not
// modelled), grad_reduce_in_fp32 false, Transformer Engine's fused cross-entropy, no recompute, the
// distributed optimizer, NullTokenizer vocabularies (GPT-3 51,200, Mixtral 32,000, Nemotron 256,000, Llama
// 3 128,256). Architectures (nemo/collections/llm/gpt/model): GPTConfig175B (96 × 12288, 96 heads, FFN
// 49,152, no dropout, tied embeddings), Nemotron4Config15B and 340B (32 × 6144, 48 heads, 8 KV, FFN 24,576;
// 96 × 18432, 96 heads, 8 KV, FFN 73,728; squared ReLU, a two-matrix MLP counted as "gelu"; LayerNorm; no
// dropout; untied), MixtralConfig8x7B and 8x22B (32 × 4096, 32 heads, 8 KV, 8 experts of 14,336, top 2;
// 56 × 6144, 48 heads, 8 KV, 8 experts of 16,384). The table prints Mixtral 8x22B's GBS and MBS swapped
// (GBS 1, MBS 64, with GA 16 over DP 4): GBS 64, MBS 1, as NeMo's recipe table has it. Left out: its FSDP
// Llama 3 70B row (Megatron-FSDP; the planner's megatron ZeRO-3 charges no working set, Known limits).
void AddNemo25Runs(std::vector<PublishedRun>* runs) {
  const char* source = "NeMo 25.04 performance summary, DGX-GB200 FP8";
  const char* gb200 = "GB200-NVL72";
  // `tflops`: the table's TFLOP/s per GPU in NeMo's own count (shown, not compared); 0 where not legible.
  auto add = [&](const char* name, JobSpec s, Plan p, int micro_batch, double tflops, double tokens) {
    s.training.precision = Precision::kFp8;
    s.training.fp8_param_gather = true;
    s.training.grad_reduce_in_fp32 = false;
    s.training.cross_entropy_fp32 = false;
    s.training.activation_recompute = Recompute::kNone;
    s.training.tp_comm_overlap = p.tp > 1;
    p.micro_batch_size = micro_batch;
    runs->push_back({name, source, s, p, HardwareForResources(s.resources), tflops, tokens});
  };
  auto nemotron4 = [&](int layers, int hidden, int heads, int ffn, int batch, int gpus) {
    JobSpec s = GptStyle(layers, hidden, heads, 256000, 4096, batch, gpus, gb200);
    s.model.kv_heads = 8;
    s.model.ffn_hidden = ffn;
    s.model.dropout = 0.0;
    return s;
  };
  auto mixtral = [&](int layers, int hidden, int heads, int expert_ffn, int seq, int batch, int gpus) {
    JobSpec s = LlamaStyle(layers, hidden, heads, 8, 32000, seq, batch, gpus, gb200);
    s.model.moe = {.experts = 8, .top_k = 2, .expert_ffn_hidden = expert_ffn};
    return s;
  };
  {
    JobSpec s = GptStyle(96, 12288, 96, 51200, 2048, 256, 128, gb200);
    s.model.dropout = 0.0;
    s.model.tied_embeddings = true;
    add("NeMo25 GPT3-175B 128 GB200 FP8 TP4 PP4 VP12", s, Layout(4, 1, 4, 8, 12, 1), 2, 1942, 1804);
  }
  {
    JobSpec s = LlamaStyle(32, 4096, 32, 8, 128256, 8192, 128, 8, gb200);
    s.model.ffn_hidden = 14336;
    add("NeMo25 Llama3-8B 8 GB200 FP8 TP1", s, Layout(1, 1, 1, 8, 1, 1), 2, 1917, 33099);
  }
  {
    JobSpec s = LlamaStyle(126, 16384, 128, 8, 128256, 8192, 64, 128, gb200);
    s.model.ffn_hidden = 53248;
    add("NeMo25 Llama3.1-405B 128 GB200 FP8 TP4 PP8 CP2 VP8", s, Layout(4, 2, 8, 2, 8, 1), 1, 1763, 665);
  }
  add("NeMo25 Nemotron4-15B 64 GB200 FP8 TP1", nemotron4(32, 6144, 48, 24576, 256, 64),
      Layout(1, 1, 1, 64, 1, 1), 2, 1674, 17809);
  add("NeMo25 Nemotron4-340B 128 GB200 FP8 TP8 PP4 VP12", nemotron4(96, 18432, 96, 73728, 32, 128),
      Layout(8, 1, 4, 4, 12, 1), 1, 1551, 737);
  {
    Plan p = Layout(1, 1, 1, 64, 1, 1);
    p.ep = 8;
    add("NeMo25 Mixtral-8x7B 64 GB200 FP8 EP8", mixtral(32, 4096, 32, 14336, 4096, 256, 64), p, 2, 1598,
        19275);
  }
  {
    Plan p = Layout(2, 8, 4, 4, 14, 1);
    p.ep = 8;
    add("NeMo25 Mixtral-8x22B 256 GB200 FP8 TP2 PP4 CP8 VP14 EP8 seq 64K",
        mixtral(56, 6144, 48, 16384, 65536, 64, 256), p, 1, 0, 2731);
  }
}

}  // namespace shepherd::testing
