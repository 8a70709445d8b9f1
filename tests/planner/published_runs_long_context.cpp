// NeMo's long-sequence pre-training tables (published_runs.h): one model, the same tokens per step, the
// sequence from 4K to 1M tokens with context parallelism.
#include <iterator>
#include <string>
#include <tuple>

#include "tests/planner/published_runs_builders.h"

namespace shepherd::testing {

// NVIDIA/NeMo docs/source/performance/performance_long_sequence.md ("Long Sequence Performance", at
// 19fadb67b0 of May 2025): the "With CP" columns, TP, PP, DP, CP and TFLOP/s per GPU per sequence length.
// Their TFLOP/s are NeMo's model FLOPs (nemo/utils/flops_formulas.py llama2 and llama3 until August 2025:
// L·h²·(12 + 12·g/a + 18·F/h + 12·s/h + 6·V/(L·h)) per token, attention without the causal discount):
// the planner's convention term by term, so the band is on TFLOP/s.
// - Llama 2 7B, FP8, DGX-H100, container NeMo 24.03.01 (32 layers, h 4096, 32 heads, F 11,008, vocabulary
//   32,000); 4M tokens per step (batch 1024 at 4K down to 4 at 1M); TP · PP · DP · CP is the GPU count.
// - Llama 3 8B, FP8, DGX-B200, container NeMo 25.04.rc2 (32 layers, h 4096, 32 heads, 8 KV, F 14,336,
//   vocabulary 128,256). Its "# of GPUs" column repeats the H100 table's (the sequence in K) while its TP ·
//   PP · DP · CP is a quarter of it on every row, and at 512K and 1M the batch (8, 4) could not fill the
//   GPU count's data-parallel width: the layout is taken as run on TP · PP · DP · CP GPUs.
// Not published, assumed: NeMo's launcher configs of the time for these models (micro-batch 1, the
// distributed optimizer, activations_checkpoint_granularity null: no recompute), FP8 parameters and bf16
// gradient reduction as NVIDIA's FP8 performance configs set them (published_runs.cpp, NeMo 24.07),
// Megatron's unfused fp32 loss for Llama 2 and Transformer Engine's fused one for Llama 3 (NeMo 2.0 recipes).
void AddNemoLongSequenceRuns(std::vector<PublishedRun>* runs) {
  struct Row {
    int seq_k, tp, pp, dp, cp;
    double tflops;
    const char* known_miss = nullptr;
  };
  const char* h100_source = "NeMo long-sequence performance, Llama 2 7B FP8 DGX-H100 (NeMo 24.03.01)";
  const Row h100[] = {
      {4, 1, 1, 4, 1, 768},
      {8, 1, 2, 4, 1, 730},
      {16, 2, 1, 8, 1, 660},
      {32, 2, 1, 8, 2, 610},
      {64, 4, 1, 8, 2, 574},
      {128, 4, 1, 8, 4, 555},
      {256, 4, 1, 8, 8, 549},
      {512, 8, 1, 4, 16, 549},
      {1024, 8, 1, 4, 32, 536,
       "the H100 rows whose time is mostly attention run 20-27 % faster than published: the planner's "
       "H100 attention efficiency, FlashAttention-2's 35 % of peak, is above what these kernels reached "
       "(docs/planner.md, Known limits)"},
  };
  const char* b200_source = "NeMo long-sequence performance, Llama 3 8B FP8 DGX-B200 (NeMo 25.04.rc2)";
  const Row b200[] = {
      {8, 1, 1, 2, 1, 1671},   {16, 1, 1, 4, 1, 1717},  {32, 1, 1, 4, 2, 1624},  {64, 1, 1, 4, 4, 1600},
      {128, 2, 1, 4, 4, 1588}, {256, 4, 1, 4, 4, 1590}, {512, 4, 1, 4, 8, 1619}, {1024, 4, 1, 4, 16, 1608},
  };
  for (const auto& [rows, count, source, llama3] : {std::tuple{h100, std::size(h100), h100_source, false},
                                                    std::tuple{b200, std::size(b200), b200_source, true}}) {
    for (size_t i = 0; i < count; ++i) {
      const Row& r = rows[i];
      const int seq = r.seq_k * 1024, gpus = r.tp * r.pp * r.dp * r.cp;
      const int batch = 4096 * 1024 / seq;  // 4M tokens per step
      JobSpec s = llama3 ? LlamaStyle(32, 4096, 32, 8, 128256, seq, batch, gpus, "B200")
                         : LlamaStyle(32, 4096, 32, 32, 32000, seq, batch, gpus, "H100-80GB");
      s.model.ffn_hidden = llama3 ? 14336 : 11008;
      s.training.precision = Precision::kFp8;
      s.training.fp8_param_gather = true;
      s.training.grad_reduce_in_fp32 = false;
      s.training.cross_entropy_fp32 = !llama3;
      s.training.activation_recompute = Recompute::kNone;
      const std::string name = std::string(llama3 ? "NeMo Llama3-8B " : "NeMo Llama2-7B ") +
                               std::to_string(gpus) + (llama3 ? " B200" : " H100") + " FP8 seq " +
                               std::to_string(r.seq_k) + "K TP" + std::to_string(r.tp) + " PP" +
                               std::to_string(r.pp) + " DP" + std::to_string(r.dp) + " CP" +
                               std::to_string(r.cp);
      runs->push_back({RunName(name), source, s, Layout(r.tp, r.cp, r.pp, r.dp, 1, 1),
                       HardwareForResources(s.resources), r.tflops, 0, r.known_miss});
      runs->back().convention = "NeMo's model FLOPs: ours";
    }
  }
}

}  // namespace shepherd::testing
