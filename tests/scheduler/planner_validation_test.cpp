// The planner against published training runs (docs/planner.md, "Validation"). Each row is a layout that
// was run, with the throughput its authors measured, from a primary source. For every row:
//   - the explicit layout is accepted and fits;
//   - the predicted model-FLOP throughput per GPU is within ±25 % of the published figure (rows marked
//     throughput_within_band = false miss it; they are kept and reported, not tuned away);
//   - AutoPlan's choice fits and is predicted no slower than the published layout.
// What each source does not publish (virtual stages, recompute, micro-batch) is stated per row as an
// assumption; the published figures are typed in from the sources, never computed here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/memory_model.h"
#include "scheduler/planner.h"

namespace shepherd {
namespace {

struct PublishedRun {
  const char* name;
  const char* source;
  JobSpec spec;
  Plan layout;
  Hardware hw;
  double published_tflops_per_gpu;
  // false: the prediction misses the ±25 % band and the row documents it (docs/planner.md, Validation)
  // rather than the model being tuned to it; accepted, fits and auto no slower are still checked.
  bool throughput_within_band = true;
};

JobSpec Llama405B(int gpus, int seq_len, int global_batch) {
  JobSpec s;
  s.model.layers = 126;
  s.model.hidden = 16384;
  s.model.heads = 128;
  s.model.kv_heads = 8;
  s.model.ffn_hidden = 53248;
  s.model.mlp = Mlp::kSwiglu;
  s.model.norm = Norm::kRmsNorm;
  s.model.vocab = 128256;
  s.model.seq_len = seq_len;
  s.training.global_batch_size = global_batch;
  // Not in the paper's table: full recompute assumed (with 1F1B over 16 stages the stage-1 rank would
  // otherwise hold 15 micro-batches of activations, about 68 GB in this model).
  s.training.activation_recompute = Recompute::kFull;
  s.resources.gpus = gpus;
  s.resources.gpu = "H100-80GB";
  return s;
}

Plan Layout(int tp, int cp, int pp, int dp, int vpp, int zero) {
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
// parallelism, and eager attention (Megatron's fused masked softmax; flash attention came later).
Plan Historic(Plan p) {
  p.sequence_parallel = false;
  return p;
}

std::vector<PublishedRun> Runs() {
  std::vector<PublishedRun> runs;
  // Llama 3 paper (Grattafiori et al. 2024, arXiv:2407.21783), Table 4: 405B on H100-80GB, 16M tokens
  // per batch; BF16 MFU 43 %, 41 %, 38 %. Not published: virtual stages (the paper describes an
  // interleaved schedule; vpp 7 assumed, the most the 7-layer end stages allow), micro-batch 1 assumed.
  const char* llama = "Llama 3 paper arXiv:2407.21783 Table 4";
  {
    JobSpec s = Llama405B(8192, 8192, 2048);
    runs.push_back({"Llama3-405B 8192 GPUs TP8 CP1 PP16 DP64", llama, s, Layout(8, 1, 16, 64, 7, 1),
                    HardwareForResources(s.resources), 430});
  }
  {
    JobSpec s = Llama405B(16384, 8192, 2048);
    runs.push_back({"Llama3-405B 16384 GPUs TP8 CP1 PP16 DP128", llama, s, Layout(8, 1, 16, 128, 7, 1),
                    HardwareForResources(s.resources), 400});
  }
  {
    JobSpec s = Llama405B(16384, 131072, 128);
    runs.push_back({"Llama3-405B 16384 GPUs TP8 CP16 PP16 DP8 seq 131072", llama, s,
                    Layout(8, 16, 16, 8, 7, 1), HardwareForResources(s.resources), 380});
  }
  // BLOOM-176B (BigScience, "BigScience 176B Model" training page, bigscience.notion.site; BLOOM paper
  // arXiv:2211.05100 §3.4): 384 A100-80GB, one replica on 48 GPUs (TP 4 × PP 12), DP 8, 70 layers,
  // h 14336, 112 heads, seq 2048, tied embeddings, vocab 250,880 (padded), 2048 sequences, Megatron-
  // DeepSpeed with ZeRO-1, "about 150 TFLOPs". Network: 4 × 100 Gb/s Omni-Path per 8-GPU node, i.e.
  // 6.25 GB/s per GPU, 80 % achievable. Not published here: micro-batch (1 assumed), recompute
  // (selective assumed).
  {
    JobSpec s;
    s.model.layers = 70;
    s.model.hidden = 14336;
    s.model.heads = 112;
    s.model.vocab = 250880;
    s.model.seq_len = 2048;
    s.model.tied_embeddings = true;
    s.training.global_batch_size = 2048;
    s.training.framework = Framework::kDeepSpeed;
    s.training.attention = Attention::kEager;
    s.resources.gpus = 384;
    s.resources.gpu = "A100-80GB";
    Hardware hw = HardwareForResources(s.resources);
    hw.ib_bytes_per_s = 0.8 * 4 * 100e9 / 8 / 8;
    runs.push_back({"BLOOM-176B 384 GPUs TP4 PP12 DP8", "bigscience.notion.site BigScience 176B Model", s,
                    Historic(Layout(4, 1, 12, 8, 1, 1)), hw, 150});
  }
  // Megatron-Turing NLG 530B (Smith et al. 2022, arXiv:2201.11990 §2.4; the figures as reproduced in
  // github.com/cli99/llm-analysis examples/megatron-turing-nlg): 105 layers, h 20480, 128 heads, seq 2048,
  // global batch 1920 on 280, 350 and 420 DGX A100 (80 GB) servers, 60.1, 50.2 and 44.4 s per iteration,
  // "126, 121 and 113 TFLOP/s per GPU". Layout: 8-way tensor slicing within a node and 35-way pipeline
  // per replica (Microsoft/NVIDIA announcement, Oct 2021), so DP 8, 10 and 12. Convention: those figures
  // are Narayanan et al.'s 96·B·s·l·h²·(1 + s/6h + V/16lh), which counts the recomputed forward pass
  // (60.1 s at 2240 GPUs gives 125.7 with it); model FLOPs (72·..., no recompute) are 3/4 of it to
  // 0.05 %: 94.5, 90.8 and 84.8. Assumed: full recompute (what that formula implies), micro-batch 1,
  // DeepSpeed ZeRO-1, vocabulary 50,272 (from the reproduction; < 0.2 % of the FLOPs), HDR 200 Gb/s per
  // GPU (the A100 profile).
  const int nodes[] = {280, 350, 420};
  const double mtnlg_model_tflops[] = {126 * 0.75, 121 * 0.75, 113 * 0.75};
  for (int i = 0; i < 3; ++i) {
    JobSpec s;
    s.model.layers = 105;
    s.model.hidden = 20480;
    s.model.heads = 128;
    s.model.vocab = 50272;
    s.model.seq_len = 2048;
    s.training.global_batch_size = 1920;
    s.training.framework = Framework::kDeepSpeed;
    s.training.activation_recompute = Recompute::kFull;
    s.training.attention = Attention::kEager;
    s.resources.gpus = nodes[i] * 8;
    s.resources.gpu = "A100-80GB";
    runs.push_back({nodes[i] == 280   ? "MT-NLG-530B 2240 GPUs TP8 PP35 DP8"
                    : nodes[i] == 350 ? "MT-NLG-530B 2800 GPUs TP8 PP35 DP10"
                                      : "MT-NLG-530B 3360 GPUs TP8 PP35 DP12",
                    "MT-NLG paper arXiv:2201.11990 §2.4", s, Historic(Layout(8, 1, 35, nodes[i] / 35, 1, 1)),
                    HardwareForResources(s.resources), mtnlg_model_tflops[i],
                    /*throughput_within_band=*/false});
  }
  return runs;
}

TEST(Validation, PublishedLayoutsFitAndPredictThroughputWithin25Percent) {
  for (const PublishedRun& r : Runs()) {
    auto e = EvaluatePlan(r.spec, r.layout, r.hw);
    ASSERT_TRUE(e.ok()) << r.name << ": " << e.status().message();
    EXPECT_TRUE(e->fits) << r.name << ": " << e->explanation;
    const double ratio = e->tflops_per_gpu / r.published_tflops_per_gpu;
    if (r.throughput_within_band) {
      EXPECT_GE(ratio, 0.75) << r.name << " (" << r.source << "): predicted " << e->tflops_per_gpu;
      EXPECT_LE(ratio, 1.25) << r.name << " (" << r.source << "): predicted " << e->tflops_per_gpu;
    }
    std::printf(
        "[validation] %s | published %.0f | predicted %.0f TFLOP/s (%+.0f%%%s) | %.1f GB on stage %d\n",
        r.name, r.published_tflops_per_gpu, e->tflops_per_gpu, 100 * (ratio - 1),
        r.throughput_within_band ? "" : ", outside the band, documented", e->memory.total / 1e9,
        e->memory.stage);
  }
}

TEST(Validation, AutoFitsAndIsNoSlowerThanEachPublishedLayout) {
  for (const PublishedRun& r : Runs()) {
    auto published = EvaluatePlan(r.spec, r.layout, r.hw);
    ASSERT_TRUE(published.ok()) << r.name;
    auto chosen = AutoPlan(r.spec, r.hw);
    ASSERT_TRUE(chosen.ok()) << r.name << ": " << chosen.status().message();
    EXPECT_TRUE(chosen->fits) << r.name << ": " << chosen->explanation;
    EXPECT_LE(chosen->step_time_s, published->step_time_s * (1 + 1e-9))
        << r.name << ": " << chosen->explanation;
    std::printf("[auto] %s | chose tp=%d cp=%d pp=%d vpp=%d dp=%d ZeRO-%d mbs=%d | %.0f TFLOP/s\n", r.name,
                chosen->plan.tp, chosen->plan.cp, chosen->plan.pp, chosen->plan.vpp, chosen->plan.dp,
                chosen->plan.zero_stage, chosen->plan.micro_batch_size, chosen->tflops_per_gpu);
  }
}

// Model state and activations against Megatron-LM's theoretical estimator, re-derived from its formulas,
// for the Llama 3 405B 16k layout (expressible in Megatron with uneven first/last stages):
// - state on the 8-layer stage: 8 · 3,187,703,808 / TP 8 = 3,187,703,808 parameters per rank at
//   6 + 12/128 = 6.09375 B (distributed optimizer over DP 128) = 19,425,070,080 bytes;
// - activations per layer, selective recompute, sequence parallel: Megatron's s·b·h·(18 + 4·F/h)/t with
//   F/h = 53248/16384 = 3.25: 31 · 8192 · 16384 / 8 = 520,093,696 bytes. (This model adds SwiGLU's third
//   matrix and subtracts GQA's narrower K/V: 33.75 units, +8.9 %.)
TEST(Validation, MemoryWithinTenPercentOfMegatronsEstimator) {
  JobSpec s = Llama405B(16384, 8192, 2048);
  const Plan p = [] {
    Plan l = Layout(8, 1, 16, 128, 7, 1);
    l.micro_batches = 16;
    return l;
  }();
  const MemoryBreakdown m =
      StageMemory(s, p, std::vector<int>{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}, 1);
  const double state = m.weights + m.gradients + m.optimizer + m.master_weights;
  EXPECT_NEAR(state / 19'425'070'080.0, 1, 0.10);
  s.training.activation_recompute = Recompute::kSelective;
  EXPECT_NEAR(ActivationBytesPerLayer(s.model, s.training, p) / 520'093'696.0, 1, 0.10);
}

}  // namespace
}  // namespace shepherd
