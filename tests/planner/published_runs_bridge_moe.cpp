// Megatron-Bridge's MoE rows with HybridEP and the all-to-all overlap: see published_runs.h. Sources and
// assumptions per row; docs/planner.md "Validation" has the table of predicted vs published.
#include <tuple>

#include "tests/planner/published_runs_builders.h"

namespace shepherd::testing {

void AddBridgeMoeRuns(std::vector<PublishedRun>* runs) {
  // Blackwell MoE, inside one NVL72 domain (Megatron-Bridge performance summary, "26.08 NeMo Container",
  // DGX-GB200 MXFP8; configs src/megatron/bridge/perf_recipes/qwen/gb200/qwen3_moe.py at 4ab94dfad, the
  // commit that published the table): _perf_precision("fp8_mx") (bf16_with_mxfp8_mixed: fp8_param_gather,
  // grad_reduce_in_fp32 false), no recompute, HybridEP dispatcher with the all-to-alls overlapped
  // (overlap_moe_expert_parallel_comm: training.moe_a2a_overlap), full-iteration CUDA graphs, force-balanced
  // routing. MXFP8 (block-scaled FP8) is counted as the planner's fp8. The same layouts ran 35-50 % slower
  // in the 26.02 container (Qwen3-30B-A3B: 26,084 tokens/s); the planner predicts the mature figure.
  auto add_2608 = [&](const char* name, JobSpec s, const Plan& p, double tflops, double tokens) {
    BridgeFp8(&s);
    s.training.moe_a2a_overlap = true;
    s.training.moe_dispatcher = MoeDispatcher::kHybridEp;
    runs->push_back({name, "Megatron-Bridge performance summary, 26.08", s, p,
                     HardwareForResources(s.resources), tflops, tokens});
  };
  {
    // Qwen3-30B-A3B on 8 GPUs, GBS 512, MBS 4, EP 8: 39,936 tokens/s per GPU (923 TFLOP/s in their count).
    JobSpec s = Qwen3_30B(8, 512, "GB200-NVL72");
    s.training.activation_recompute = Recompute::kNone;
    Plan p = Layout(1, 1, 1, 8, 1, 1);
    p.ep = 8;
    p.micro_batch_size = 4;
    add_2608("Bridge Qwen3-30B-A3B 8 GB200 MXFP8 EP8", s, p, 923, 39936);
  }
  {
    // Qwen3-235B-A22B on 256 GPUs, GBS 8192, MBS 1, PP 8, VP 3, EP 32: 7,280 tokens/s per GPU (1077).
    JobSpec s = Qwen3_235B(256, 8192, "GB200-NVL72");
    s.training.activation_recompute = Recompute::kNone;
    Plan p = Layout(1, 1, 8, 32, 3, 1);
    p.ep = 32;
    add_2608("Bridge Qwen3-235B-A22B 256 GB200 MXFP8 PP8 VP3 EP32", s, p, 1077, 7280);
  }
  {
    // DeepSeek-V3 on 256 GPUs, GBS 4096, MBS 1, PP 4, VP 4, EP 64: 4,912 tokens/s per GPU (1,276 TFLOP/s in
    // their count: 259.8 GFLOP per token, with causal attention; the planner's convention, attention without
    // the mask, gives 291.9, MTP included). Recipe deepseek/gb200/deepseek_v3.py
    // (deepseek_v3_pretrain_256gpu_gb200_fp8mx_config): one multi-token-prediction depth, recompute_modules
    // ["mla_up_proj"], HybridEP with the all-to-alls overlapped (training.moe_a2a_overlap), full-iteration
    // CUDA graphs, the precision-aware optimizer (bf16 moments and main
    // gradients: the planner's fp32 state is heavier), pipeline layout embedding + 4 layers, 14 × 4, 1 layer
    // + MTP + loss over the 16 virtual stages: physical stages of 16, 16, 16 and 13 layers.
    JobSpec s = DeepSeekV3(256, 4096, "GB200-NVL72");
    s.model.mtp_layers = 1;
    s.training.recompute_modules = {.core_attn = false, .mla_up_proj = true};
    Plan p = Layout(1, 1, 4, 64, 4, 1);
    p.ep = 64;
    p.pipeline_layers = {16, 16, 16, 13};
    add_2608("Bridge DeepSeek-V3 256 GB200 MXFP8 PP4 VP4 EP64", s, p, 1276, 4912);
  }
  {
    // The same on 256 GB300s, PP 2, VP 8, EP 32: 6,288 tokens/s per GPU (1,635 in their count). Recipe
    // deepseek_v3_pretrain_256gpu_gb300_fp8mx_config: no recompute (recompute_modules []), the all-to-alls
    // overlapped as on GB200, FP8 attention
    // (fp8_dot_product_attention: faster kernels than the planner's 16-bit ones), the experts' activations in
    // a paged stash partly in host memory (moe_paged_stash: the planner keeps them all on the GPU), pipeline
    // layout "Et*4|(t*4|)*14tmL": virtual stages alternate over the two physical ones, 32 and 29 layers.
    JobSpec s = DeepSeekV3(256, 4096, "GB300-NVL72");
    s.model.mtp_layers = 1;
    s.training.activation_recompute = Recompute::kNone;
    Plan p = Layout(1, 1, 2, 128, 8, 1);
    p.ep = 32;
    p.pipeline_layers = {32, 29};
    add_2608("Bridge DeepSeek-V3 256 GB300 MXFP8 PP2 VP8 EP32", s, p, 1635, 6288);
  }
  // Qwen3-30B-A3B on 16 H100s (two nodes), Megatron-Bridge's controlled A/B of the all-to-all overlap
  // (skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md at 067f987df, measured 2026-07-25): the
  // recipe qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config (recipes/qwen/h100/qwen3_moe.py): TP 1, PP 1, CP 1,
  // EP 16 (across the two nodes) over HybridEP (flex dispatcher), GBS 1024, MBS 1, sequence 4096, BF16, no
  // recompute, grad_reduce_in_fp32 false, Transformer Engine's fused loss (_benchmark_common),
  // force-balanced routing, CUDA graphs of the router and the dispatcher's preprocessing, delayed wgrad off.
  // Only the overlap changed: 24.7138 s per step without (10,608 tokens/s per GPU, "244.039" model TFLOP/s
  // in their count), 20.9920 s with it (12,487; "287.305", the independent validation run).
  for (const auto& [name, overlap, tflops, step_s] :
       {std::tuple{"Bridge Qwen3-30B-A3B 16 H100 EP16 HybridEP", false, 244.039, 24.7138},
        std::tuple{"Bridge Qwen3-30B-A3B 16 H100 EP16 HybridEP + overlap", true, 287.305, 20.9920}}) {
    JobSpec s = Qwen3_30B(16, 1024, "H100-80GB");
    s.training.activation_recompute = Recompute::kNone;
    s.training.grad_reduce_in_fp32 = false;
    s.training.cross_entropy_fp32 = false;
    s.training.moe_dispatcher = MoeDispatcher::kHybridEp;
    s.training.moe_a2a_overlap = overlap;
    Plan p = Layout(1, 1, 1, 16, 1, 1);
    p.ep = 16;
    runs->push_back({name, "Megatron-Bridge expert-parallel overlap A/B", s, p,
                     HardwareForResources(s.resources), tflops, 1024 * 4096 / 16 / step_s});
  }
}

}  // namespace shepherd::testing
