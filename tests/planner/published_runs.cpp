// Published training runs: see published_runs.h. Sources and assumptions per row; docs/planner.md
// "Validation" has the table of predicted vs published.
#include "tests/planner/published_runs.h"

#include <cctype>
#include <tuple>

#include "tests/planner/published_runs_builders.h"

namespace shepherd::testing {
namespace {

// Llama 3 / 3.1 405B (126 layers, h 16384, 128 heads, 8 KV heads, SwiGLU 53248, vocabulary 128,256).
JobSpec Llama3_405B(int gpus, int seq_len, int global_batch, const char* gpu) {
  JobSpec s = LlamaStyle(126, 16384, 128, 8, 128256, seq_len, global_batch, gpus, gpu);
  s.model.ffn_hidden = 53248;
  return s;
}

// The Llama 3 paper's 405B runs on H100s, with full recompute: the nearest configuration the planner fits.
// The paper (§3.3.2) trained at 8K tokens without activation checkpointing, on its own pipeline schedule
// (a tunable number N of consecutive micro-batches per virtual stage, stage inputs and outputs freed early);
// under Megatron-Core's interleaved schedule, which the planner models, stage 1 would hold 16 (16,384 GPUs)
// or 17.9 (8,192) micro-batches of 8 layers, 64 and 71 GB of activations (docs/planner.md, Validation).
JobSpec Llama405B(int gpus, int seq_len, int global_batch) {
  JobSpec s = Llama3_405B(gpus, seq_len, global_batch, "H100-80GB");
  s.training.activation_recompute = Recompute::kFull;
  return s;
}

// gpt-oss (see the rows below) at sequence 4096: 120b has 36 layers of 128 experts, 20b 24 of 32.
JobSpec GptOss(int layers, int experts, int gpus, int global_batch, const char* gpu) {
  JobSpec s = LlamaStyle(layers, 2880, 64, 8, 201088, 4096, global_batch, gpus, gpu);
  s.model.head_dim = 64;
  s.model.window = 128;  // layers 1, 3, 5, … (Megatron-Bridge's window_size (128, 0), skip frequency 2)
  s.model.full_attention_every = 2;
  s.model.moe = {.experts = experts, .top_k = 4, .expert_ffn_hidden = 2880};
  return s;
}

JobSpec GptOss120B(int gpus, int global_batch, const char* gpu) {
  return GptOss(36, 128, gpus, global_batch, gpu);
}

// NeMo Automodel's MoE benchmark setup (its rows below): FSDP2 over all the GPUs, expert parallelism `ep`
// through DeepEP, MaskedCrossEntropy without the fp32 upcast, local batch `micro_batch`.
Plan AutomodelMoe(JobSpec* s, int ep, int micro_batch) {
  s->training.framework = Framework::kFsdp;
  s->training.cross_entropy_fp32 = false;
  s->training.moe_dispatcher = MoeDispatcher::kDeepEp;
  Plan p = Layout(1, 1, 1, static_cast<int>(s->resources.gpus), 1, 3);
  p.ep = ep;
  p.micro_batch_size = micro_batch;
  return p;
}

}  // namespace

std::string TestName(const PublishedRun& r) {
  std::string out;
  bool separator = false;
  for (const char* c = r.name; *c != '\0'; ++c) {
    if (std::isalnum(static_cast<unsigned char>(*c))) {
      if (separator && !out.empty()) out += '_';
      out += *c;
      separator = false;
    } else {
      separator = true;
    }
  }
  return out;
}

bool PublishedByTokens(const PublishedRun& r) {
  return r.published_tokens_per_s_per_gpu > 0;
}

double PredictedOverPublished(const PublishedRun& r, const PlanEstimate& e) {
  return PublishedByTokens(r) ? e.tokens_per_s / r.spec.resources.gpus / r.published_tokens_per_s_per_gpu
                              : e.tflops_per_gpu / r.published_tflops_per_gpu;
}

std::vector<PublishedRun> PublishedRuns() {
  std::vector<PublishedRun> runs;
  // Llama 3 paper (Grattafiori et al. 2024, arXiv:2407.21783), Table 4: 405B on H100-80GB, 16M tokens
  // per batch; BF16 MFU 43 %, 41 %, 38 %. Not published: virtual stages (the paper describes an
  // interleaved schedule; vpp 7 assumed, the most the 7-layer end stages allow), micro-batch 1 assumed.
  // Recompute: see Llama405B above.
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
  for (PublishedRun& r : runs) r.convention = "the table's BF16 MFU × 989, compared as ours";
  // BLOOM-176B (BigScience's training repository, github.com/bigscience-workshop/bigscience,
  // train/tr11-176B-ml: README.md and tr11-176B-ml.slurm; BLOOM paper arXiv:2211.05100 §3.4): 384
  // A100-80GB, one replica on 48 GPUs (TP 4 × PP 12), DP 8, 70 layers, h 14336, 112 heads, seq 2048, tied
  // embeddings, vocab 250,880 (padded), 2048 sequences in micro-batches of 2, --checkpoint-activations (full
  // recompute), Megatron-DeepSpeed with its BF16 optimizer (ZeRO-1 equivalent). Its "about 150 TFLOPs" are
  // hardware FLOPs (8·N per token: recompute counted, attention not; README "Throughput"), so the band is
  // checked on tokens per second: the log line at the end of the first epoch (iteration 85376, 104.70 s per
  // iteration, 19.561 samples per second, "TFLOPs: 149.77") gives 19.561 · 2048 / 384 = 104.3 per GPU.
  // Network: 4 × 100 Gb/s Omni-Path per 8-GPU node, i.e. 6.25 GB/s per GPU, 80 % achievable.
  {
    JobSpec s = GptStyle(70, 14336, 112, 250880, 2048, 2048, 384, "A100-80GB");
    s.model.tied_embeddings = true;
    s.training.framework = Framework::kDeepSpeed;
    s.training.attention = Attention::kEager;
    s.training.activation_recompute = Recompute::kFull;
    Hardware hw = HardwareForResources(s.resources);
    hw.ib_bytes_per_s = 0.8 * 4 * 100e9 / 8 / 8;
    Plan layout = Historic(Layout(4, 1, 12, 8, 1, 1));
    layout.micro_batch_size = 2;
    runs.push_back({"BLOOM-176B 384 GPUs TP4 PP12 DP8",
                    "github.com/bigscience-workshop/bigscience tr11-176B-ml", s, layout, hw, 0,
                    19.561 * 2048 / 384});
    runs.back().convention =
        "hardware FLOPs, 8·N per token with recompute, \"TFLOPs: 149.77\" logged: compared on tokens/s";
  }
  // Megatron-Turing NLG 530B (Smith et al. 2022, arXiv:2201.11990 §2.4, and the NVIDIA/Microsoft
  // announcement of Oct 2021: "We observed iteration time of 60.1, 50.2, and 44.4 seconds, respectively.
  // These correspond to 126, 121, and 113 teraFLOP/s per GPU"): 105 layers, h 20480, 128 heads, seq 2048,
  // global batch 1920 on 280, 350 and 420 DGX A100 (80 GB) servers; 8-way tensor slicing within a node and
  // 35-way pipeline across nodes, so DP 8, 10 and 12. 2021 software: no sequence parallelism, eager
  // attention, DeepSpeed's pipeline engine. Convention: those figures
  // are Narayanan et al.'s 96·B·s·l·h²·(1 + s/6h + V/16lh), which counts the recomputed forward pass
  // (60.1 s at 2240 GPUs gives 125.7 with it); model FLOPs (72·..., no recompute) are 3/4 of it to
  // 0.05 %: 94.5, 90.8 and 84.8. Assumed: full recompute (what that formula implies), micro-batch 1,
  // DeepSpeed ZeRO-1, vocabulary 50,272 (GPT-2's, padded; < 0.2 % of the FLOPs), HDR 200 Gb/s per
  // GPU (the A100 profile).
  const int nodes[] = {280, 350, 420};
  const double mtnlg_stated_tflops[] = {126, 121, 113};
  const double mtnlg_model_tflops[] = {126 * 0.75, 121 * 0.75, 113 * 0.75};
  for (int i = 0; i < 3; ++i) {
    JobSpec s = GptStyle(105, 20480, 128, 50272, 2048, 1920, nodes[i] * 8, "A100-80GB");
    s.training.framework = Framework::kDeepSpeed;
    s.training.activation_recompute = Recompute::kFull;
    s.training.attention = Attention::kEager;
    runs.push_back({nodes[i] == 280   ? "MT-NLG-530B 2240 GPUs TP8 PP35 DP8"
                    : nodes[i] == 350 ? "MT-NLG-530B 2800 GPUs TP8 PP35 DP10"
                                      : "MT-NLG-530B 3360 GPUs TP8 PP35 DP12",
                    "MT-NLG arXiv:2201.11990 §2.4; NVIDIA/Microsoft blog", s,
                    Historic(Layout(8, 1, 35, nodes[i] / 35, 1, 1)), HardwareForResources(s.resources),
                    mtnlg_model_tflops[i]});
    runs.back().convention = "Narayanan et al. eq. 3, the recomputed forward pass counted: × 3/4";
    runs.back().published_as_stated = mtnlg_stated_tflops[i];
  }

  AddMegatronLmReadmeRuns(&runs);  // published_runs_megatron.cpp
  // OPT-175B (Zhang et al. 2022, arXiv:2205.01068 §2.3-2.4 and Table 1): 96 layers, h 12288, 96 heads,
  // sequence 2048, batch "2M" tokens, 992 A100-80GB, "Fully Sharded Data Parallel with Megatron-LM Tensor
  // Parallelism", "up to 147 TFLOP/s per GPU", FP16 weights and FP32 Adam state sharded across all hosts.
  // GPT-2 BPE vocabulary 50,272 with tied embeddings and a ReLU MLP of 4h (a two-matrix MLP: counted as
  // "gelu"), learned positions (25M, left out). Layout: tensor parallel 8 (metaseq's released OPT-175B
  // checkpoint is 992 shards: 8 model-parallel parts × 124 FSDP shards), FSDP over dp 124. Not published,
  // assumed: 992 sequences (8 per data-parallel rank, 2.03M tokens), one micro-batch of 8 per step, the
  // 147 counted as model FLOPs (the paper does not say). From metaseq's OPT launcher
  // (metaseq/launcher/opt_baselines.py, opt_job_constants.py: 175b at model_parallel 8): FairScale FSDP
  // with --memory-efficient-fp16 and without --fp32-reduce-scatter (fp16 gradient reduce-scatters:
  // grad_reduce_in_fp32 false), --checkpoint-activations (full recompute), and --no-reshard-after-forward
  // (one parameter gather per micro-batch, where the planner's FSDP prices two: pessimistic here).
  {
    JobSpec s = GptStyle(96, 12288, 96, 50272, 2048, 992, 992, "A100-80GB");
    s.model.tied_embeddings = true;
    s.training.precision = Precision::kFp16;
    s.training.framework = Framework::kFsdp;
    s.training.activation_recompute = Recompute::kFull;
    s.training.grad_reduce_in_fp32 = false;
    Plan p = Layout(8, 1, 1, 124, 1, 3);
    p.micro_batch_size = 8;
    runs.push_back({"OPT-175B 992 A100 TP8 FSDP124", "OPT paper arXiv:2205.01068 §2.4", s, p,
                    HardwareForResources(s.resources), 147});
    runs.back().convention = "not stated; taken as model FLOPs";
  }
  // Mixture of experts: gpt-oss-120b (OpenAI gpt-oss model card): 36 layers, residual width 2880, 64 query
  // heads and 8 KV heads of dimension 64, 128 SwiGLU experts of width 2880, 4 per token, RMSNorm, vocabulary
  // 201,088, untied; attention alternates 128-token windows and full attention (model.window,
  // model.full_attention_every). The sources count FLOPs their own way (Megatron-Bridge's flop_utils.py),
  // so the band is checked on tokens per second per GPU, and the published TFLOP/s is their own count. All
  // the runs force-balance the routing and drop no tokens.
  //
  // Megatron-Bridge (docs/performance-summary-archive.md, "26.02 NeMo Container", Model: GPT OSS 120B, BF16;
  // the layouts are the 26.02 workload configs, scripts/performance/configs/gpt_oss/
  // gpt_oss_workload_base_configs.py at cfeddcd94: alltoall dispatcher). Megatron-Core, distributed
  // optimizer; the perf scripts (gpt_oss_llm_pretrain.py, set_gpt_oss_common_configs) set
  // grad_reduce_in_fp32 false, so gradients are kept and reduced in bf16. H100, B200 and GB200 recompute the
  // norms and the experts' activation (recompute_modules ["layernorm", "moe_act"]); B300 and GB300 capture
  // CUDA graphs of the attention and router and recompute nothing.
  const char* bridge = "Megatron-Bridge performance summary, 26.02";
  const char* gpt_oss_bridge_miss =
      "gpt-oss-120b in Megatron-Bridge runs 1.6-1.9x slower than predicted on every system and layout "
      "published except B200 with EP 64 across the network (+20 %), H100 included: about 7 ms per MoE layer "
      "pass there that the model does not have (docs/planner.md, Validation)";
  auto gpt_oss_bridge = [](const char* gpu) {
    JobSpec s = GptOss120B(64, 1280, gpu);
    s.training.cross_entropy_fp32 = false;
    s.training.grad_reduce_in_fp32 = false;
    if (std::string(gpu) == "B300" || std::string(gpu) == "GB300-NVL72") {
      s.training.activation_recompute = Recompute::kNone;
    } else {
      s.training.recompute_modules = {.core_attn = false, .layernorm = true, .moe_act = true};
    }
    return s;
  };
  {
    JobSpec s = gpt_oss_bridge("H100-80GB");
    Plan p = Layout(1, 1, 4, 16, 1, 1);
    p.ep = 8;
    runs.push_back({"gpt-oss-120b 64 H100 TP1 PP4 EP8 DP16", bridge, s, p, HardwareForResources(s.resources),
                    163, 5993, gpt_oss_bridge_miss});
  }
  // The 8-GPU-node and NVL72 systems: GBS 1280, MBS 4, TP 1, PP 1, EP 64 in 26.02 (on B200 and B300 the
  // all-to-all crosses the 8 nodes, on GB200 and GB300 it stays in the NVL72), EP 8 inside each node in
  // 26.02.01 (configs at 7260d6214, with the hybridep dispatcher). B200 went from 8,047 to 13,722 tokens/s
  // (1.71×) by keeping the all-to-all on NVLink, where the model predicts 2.3×.
  const char* bridge_2602_01 = "Megatron-Bridge performance summary, 26.02.01";
  auto gpt_oss_mbs4 = [&](const char* name, const char* source, const char* gpu, int ep, double tflops,
                          double tokens, const char* known_miss) {
    JobSpec s = gpt_oss_bridge(gpu);
    if (source == bridge_2602_01) s.training.moe_dispatcher = MoeDispatcher::kHybridEp;
    Plan p = Layout(1, 1, 1, 64, 1, 1);
    p.ep = ep;
    p.micro_batch_size = 4;
    runs.push_back({name, source, s, p, HardwareForResources(s.resources), tflops, tokens, known_miss});
  };
  gpt_oss_mbs4("gpt-oss-120b 64 B200 TP1 PP1 EP64 DP64", bridge, "B200", 64, 219, 8047, nullptr);
  gpt_oss_mbs4("gpt-oss-120b 64 GB200 TP1 PP1 EP64 DP64", bridge, "GB200-NVL72", 64, 428, 15784,
               gpt_oss_bridge_miss);
  gpt_oss_mbs4("gpt-oss-120b 64 GB300 TP1 PP1 EP64 DP64", bridge, "GB300-NVL72", 64, 527, 19412,
               gpt_oss_bridge_miss);
  gpt_oss_mbs4("gpt-oss-120b 64 B300 TP1 PP1 EP64 DP64", bridge, "B300", 64, 228, 8359, gpt_oss_bridge_miss);
  gpt_oss_mbs4("gpt-oss-120b 64 B200 TP1 PP1 EP8 DP64", bridge_2602_01, "B200", 8, 373, 13722,
               gpt_oss_bridge_miss);
  gpt_oss_mbs4("gpt-oss-120b 64 B300 TP1 PP1 EP8 DP64", bridge_2602_01, "B300", 8, 412, 15031,
               gpt_oss_bridge_miss);
  // Llama 3 70B on 64 H100s, FP8 (Megatron-Bridge performance summary, "26.02 NeMo Container", LLAMA3_70B,
  // DGX-H100 FP8: GBS 256, MBS 1, sequence 8192, TP 4, PP 8, VP 5, 1,621 tokens/s per GPU; 1,664 in
  // 26.04.01). Config (scripts/performance/configs/llama/ and src/megatron/bridge/recipes/llama/llama3.py at
  // cfeddcd94): FP8 current scaling with FP8 parameters (bf16_with_fp8_current_scaling_mixed), TP overlap
  // (CommOverlapConfig tp_comm_overlap, userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192), grad_reduce_in_fp32
  // false, Transformer Engine's fused loss, no recompute. With FP8 counted as 16-bit it needed 80.2 GB.
  {
    JobSpec s = LlamaStyle(80, 8192, 64, 8, 128256, 8192, 256, 64, "H100-80GB");
    s.model.ffn_hidden = 28672;
    BridgeFp8(&s);
    s.training.tp_comm_overlap = true;
    s.training.activation_recompute = Recompute::kNone;
    runs.push_back({"Bridge Llama3-70B 64 H100 FP8 TP4 PP8 VP5", bridge, s, Layout(4, 1, 8, 2, 5, 1),
                    HardwareForResources(s.resources), 728, 1621});
  }
  // Qwen3-235B-A22B (Qwen3Moe above) on 256 H100s, FP8 (Megatron-Bridge performance summary, "26.02 NeMo
  // Container", Qwen3_235B_a22B, DGX-H100 FP8: GBS 8192, MBS 1, sequence 4096, TP 2, PP 8, VP 4, EP 32, 1,633
  // tokens/s per GPU; 1,712 in 26.04.01). Config (scripts/performance/configs/qwen/ at cfeddcd94):
  // expert_tensor_parallel_size 1 (the 32 ranks of a stage split the experts whole: parallelism.etp 1),
  // the alltoall dispatcher, moe_a2a_overlap (training.moe_a2a_overlap), no recompute, grad_reduce_in_fp32
  // false, no TP overlap.
  {
    JobSpec s = Qwen3_235B(256, 8192, "H100-80GB");
    BridgeFp8(&s);
    s.training.activation_recompute = Recompute::kNone;
    s.training.moe_a2a_overlap = true;
    Plan p = Layout(2, 1, 8, 16, 4, 1);
    p.ep = 32;
    p.etp = 1;
    runs.push_back({"Qwen3-235B-A22B 256 H100 FP8 TP2 PP8 VP4 EP32 ETP1", bridge, s, p,
                    HardwareForResources(s.resources), 242, 1633});
  }
  // NeMo Automodel (github.com/NVIDIA-NeMo/Automodel docs/performance-summary.md, DGX-H100 BF16, updated
  // 2025-10-02; examples/benchmark/configs/gptoss_120b_te_deepep.yaml): 64 GPUs, GBS 512, local batch 2
  // (4 accumulation steps), sequence 4096, FSDP2 over 64 ranks, ep_size 64 with DeepEP, TE linear layers and
  // norms, FlexAttention, no activation checkpointing, the loss without an fp32 upcast; 4.30 s per step,
  // 7,626 tokens/s per GPU. DeepEP sends a token once per destination node (NVLink forwarding inside it), so
  // pricing every one of the top-4 copies over the network, as the model does, is an upper bound here.
  {
    JobSpec s = GptOss120B(64, 512, "H100-80GB");
    s.training.activation_recompute = Recompute::kNone;
    const Plan p = AutomodelMoe(&s, 64, 2);
    runs.push_back({"gpt-oss-120b 64 H100 FSDP64 EP64 (Automodel)", "NeMo Automodel performance summary", s,
                    p, HardwareForResources(s.resources), 231, 7626});
  }
  // More NeMo Automodel rows of the same table (docs/performance-summary.md at 037e04a6, DGX-H100 BF16;
  // configs examples/benchmark/configs/*.yaml at 037e04a6): FSDP2 with expert parallelism through DeepEP,
  // a fake balanced gate, TE linear layers, MaskedCrossEntropy with fp32_upcast false, torch.optim.Adam.
  // Qwen3-30B-A3B (architecture: MoeArch.HeadDimWiderThanHiddenOverHeadsMatchesQwen3Counts): 8 GPUs (one
  // node: the all-to-all stays on NVLink), GBS 512, local batch 4 (16 accumulation steps), ep_size 8, TE
  // attention, activation_checkpointing true; 21.773 s per step, 12,040 tokens/s per GPU.
  {
    JobSpec s = Qwen3_30B(8, 512, "H100-80GB");
    s.training.activation_recompute = Recompute::kFull;
    const Plan p = AutomodelMoe(&s, 8, 4);
    runs.push_back({"Qwen3-30B-A3B 8 H100 FSDP8 EP8 (Automodel)", "NeMo Automodel performance summary", s, p,
                    HardwareForResources(s.resources), 277, 12040});
  }
  // gpt-oss-20b (model card: 24 layers, 32 experts, otherwise as gpt-oss-120b): 8 GPUs, GBS 256, local
  // batch 2 (16 accumulation steps), ep_size 8, FlexAttention, no activation checkpointing; 10.04 s per
  // step, 13,058 tokens/s per GPU.
  {
    JobSpec s = GptOss(24, 32, 8, 256, "H100-80GB");
    s.training.activation_recompute = Recompute::kNone;
    const Plan p = AutomodelMoe(&s, 8, 2);
    runs.push_back({"gpt-oss-20b 8 H100 FSDP8 EP8 (Automodel)", "NeMo Automodel performance summary", s, p,
                    HardwareForResources(s.resources), 279, 13058,
                    "gpt-oss with its all-to-all inside one NVLink domain again (+44 % tokens/s), where "
                    "Qwen3-30B-A3B on the same software and node is within the band (docs/planner.md, "
                    "Validation)"});
  }
  // Llama 3.1 70B, dense (Automodel's table at 36044ad3d, docs/performance-summary.mdx; config
  // examples/llm_benchmark/llama3_3/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml): 64 H100, GBS 128,
  // local batch 1 (4 accumulation steps), sequence 8192, FSDP2 over dp 32 × cp 2 (SDPA), activation
  // checkpointing, reshard after forward, gradients reduce-scattered every micro-batch
  // (defer_fsdp_grad_sync false), TE FusedAdam, torch.compile, the loss with its default fp32 upcast;
  // 18.90 s per step, 866.77 tokens/s per GPU ("389" TFLOP/s in their count).
  {
    JobSpec s = LlamaStyle(80, 8192, 64, 8, 128256, 8192, 128, 64, "H100-80GB");
    s.model.ffn_hidden = 28672;
    s.training.framework = Framework::kFsdp;
    s.training.activation_recompute = Recompute::kFull;
    runs.push_back({"Llama3-70B 64 H100 FSDP32 CP2 (Automodel)", "NeMo Automodel performance summary", s,
                    Layout(1, 2, 1, 32, 1, 3), HardwareForResources(s.resources), 389, 866.77});
  }
  // NeMo 24.07 on DGX-H100, FP8 (NVIDIA/NeMo docs/source/performance/performance_summary.md, removed in
  // d31653f792 of Dec 2024: "Container: NeMo24.07", GBS, MBS, sequence, TP, PP, CP, VP, tokens/s per GPU
  // and model TFLOP/s per GPU per row). Transformer Engine FP8 (hybrid E4M3/E5M2) in the transformer
  // layers; NeMo's own FLOP count, so the band is on tokens/s. The GPT-3 rows' configs are the launcher's
  // (NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/gpt3/{5b,20b,175b}_fp8_performance.yaml):
  // sequence parallelism with tp > 1, Apex's distributed Adam with
  // grad_sync_dtype bf16 (so grad_reduce_in_fp32 false), ub_tp_comm_overlap with tp > 1
  // (training.tp_comm_overlap), GPT-2 BPE vocabulary padded to 50,304. The launcher's nemotron_8b.yaml and
  // llama3_70b.yaml also set ub_tp_comm_overlap (the Llama 2 70B row is assumed to); llama3_70b.yaml fuses
  // the loss (cross_entropy_loss_fusion, so cross_entropy_fp32 false), the GPT-3 and Nemotron ones do not.
  // Assumed for the Llama and Nemotron rows (their FP8 configs at 24.07 were not found): bf16 gradients as
  // the GPT-3 FP8 configs (the Llama 3 8B layout fits only with them: 81.7 GB with fp32 ones). No recompute:
  // the launcher's base configs at these layouts (conf/training/{gpt3,llama,nemotron}/*.yaml at 26e42fa9,
  // e.g. gpt3/175b.yaml TP 4, PP 8, VP 6) all set activations_checkpoint_granularity null. Assumed for every
  // row (the launcher's GPT-3 FP8 configs are of 2023 and predate the option): FP8 parameters
  // (fp8_param_gather), as NVIDIA's performance configs of the time set them (the launcher's MLPerf GPT-3
  // 175B configs of March and July 2024, ac5833c3 and 3a9382e5: "fp8_params: true # performance param
  // all-gather in fp8"; NeMo's first FP8 recipes, NeMo 3e251a0418 of September 2024); with Transformer
  // Engine's FP8 weight cache beside bf16 weights instead GPT-3 20B would need 81.4 GB. Architectures: Llama
  // 2 (vocabulary 32,000; 7B 32 × 4096, 32 heads, F 11,008; 13B 40 × 5120, 40 heads, F 13,824; 70B 80 × 8192,
  // 64 heads, 8 KV, F 28,672), Llama 3 (vocabulary 128,256; 8B 32 × 4096, 32 heads, 8 KV, F 14,336),
  // Nemotron-3 8B (launcher conf/training/nemotron/nemotron_8b.yaml: 32 × 4096, 32 heads, F 16,384 squared
  // ReLU — a two-matrix MLP, counted as "gelu" — LayerNorm, vocabulary 256,000, untied), Nemotron-22B
  // (launcher conf/training/nemotron/nemotron_22b.yaml: 40 × 6144, 48 heads, F 24,576 squared ReLU, no bias,
  // no dropout, ub_tp_comm_overlap; the table's GBS 256, MBS 2, TP 2, PP 4, VP 10; 4,312 tokens/s, 562
  // TFLOP/s in this revision, 4,256 and 554 in an earlier one). Nemotron-340B (over memory in the planner
  // with these assumptions: docs/planner.md, Left out) is not a row.
  const char* nemo = "NeMo 24.07 performance summary, DGX-H100 FP8";
  struct NemoRun {
    const char* name;
    JobSpec spec;
    int tp, pp, cp, vpp, micro_batch;
    double tflops, tokens;
    bool tp_comm_overlap = false;
    bool fused_cross_entropy = false;
  };
  auto nemo_llama = [](int layers, int hidden, int heads, int kv, int ffn, int vocab, int seq, int batch,
                       int gpus) {
    JobSpec s = LlamaStyle(layers, hidden, heads, kv, vocab, seq, batch, gpus, "H100-80GB");
    s.model.ffn_hidden = ffn;
    return s;
  };
  const NemoRun nemo_runs[] = {
      {"NeMo GPT3-5B 64 H100 FP8 TP1", GptStyle(24, 4096, 32, 50304, 2048, 2048, 64, "H100-80GB"), 1, 1, 1, 1,
       4, 765, 23406},
      {"NeMo GPT3-20B 64 H100 FP8 TP2", GptStyle(44, 6144, 48, 50304, 2048, 256, 64, "H100-80GB"), 2, 1, 1, 1,
       2, 750, 5851, true},
      {"NeMo GPT3-175B 128 H100 FP8 TP4 PP8 VP6", GptStyle(96, 12288, 96, 50304, 2048, 256, 128, "H100-80GB"),
       4, 8, 1, 6, 1, 771, 716, true},
      {"NeMo GPT3-175B 512 H100 FP8 TP4 PP8 VP6",
       GptStyle(96, 12288, 96, 50304, 2048, 2048, 512, "H100-80GB"), 4, 8, 1, 6, 2, 888, 825, true},
      {"NeMo Llama2-7B 8 H100 FP8 TP1", nemo_llama(32, 4096, 32, 32, 11008, 32000, 4096, 128, 8), 1, 1, 1, 1,
       1, 780, 16934},
      {"NeMo Llama2-13B 16 H100 FP8 TP1 PP4 VP10", nemo_llama(40, 5120, 40, 40, 13824, 32000, 4096, 128, 16),
       1, 4, 1, 10, 1, 760, 8715},
      {"NeMo Llama2-70B 64 H100 FP8 TP4 PP4 VP20", nemo_llama(80, 8192, 64, 8, 28672, 32000, 4096, 128, 64),
       4, 4, 1, 20, 1, 768, 1728, true},
      {"NeMo Nemotron-8B 64 H100 FP8 TP2", GptStyle(32, 4096, 32, 256000, 4096, 256, 64, "H100-80GB"), 2, 1,
       1, 1, 4, 643, 12507, true},
      {"NeMo Nemotron-22B 64 H100 FP8 TP2 PP4 VP10",
       [] {
         JobSpec s = GptStyle(40, 6144, 48, 256000, 4096, 256, 64, "H100-80GB");
         s.model.dropout = 0.0;
         return s;
       }(),
       2, 4, 1, 10, 2, 562, 4312, true},
      {"NeMo Llama3-8B 8 H100 FP8 TP1 CP2", nemo_llama(32, 4096, 32, 8, 14336, 128256, 8192, 128, 8), 1, 1, 2,
       1, 1, 711, 12273},
      {"NeMo Llama3-70B 64 H100 FP8 TP4 PP4 CP2 VP5",
       nemo_llama(80, 8192, 64, 8, 28672, 128256, 8192, 128, 64), 4, 4, 2, 5, 1, 734, 1524, true, true},
  };
  for (const NemoRun& n : nemo_runs) {
    JobSpec s = n.spec;
    s.training.precision = Precision::kFp8;
    s.training.fp8_param_gather = true;
    s.training.grad_reduce_in_fp32 = false;
    s.training.tp_comm_overlap = n.tp_comm_overlap;
    s.training.cross_entropy_fp32 = !n.fused_cross_entropy;
    s.training.activation_recompute = Recompute::kNone;
    Plan p = Layout(n.tp, n.cp, n.pp, static_cast<int>(s.resources.gpus) / (n.tp * n.cp * n.pp), n.vpp, 1);
    p.micro_batch_size = n.micro_batch;
    runs.push_back({n.name, nemo, s, p, HardwareForResources(s.resources), n.tflops, n.tokens});
  }
  // Llama 3.1 405B on 1,024 H100, FP8 (Megatron-Bridge performance summary, "26.02 NeMo Container",
  // LLAMA3.1_405B, DGX-H100 FP8: GBS 1536, MBS 1, sequence 8192, TP 8, PP 8, CP 2, VP 8, 311 tokens/s per
  // GPU; 784 TFLOP/s in their count). Config (src/megatron/bridge/perf_recipes/llama/h100/llama31.py and the
  // 405B base recipe at 067f987df): FP8 current scaling, grad_reduce_in_fp32 false (_perf_precision), TP
  // communication overlap (userbuffers), the embedding and the loss counted in the pipeline split (the
  // planner's balanced rule), no recompute (recompute_granularity None).
  {
    JobSpec s = Llama3_405B(1024, 8192, 1536, "H100-80GB");
    BridgeFp8(&s);
    s.training.activation_recompute = Recompute::kNone;
    s.training.tp_comm_overlap = true;
    runs.push_back({"Bridge Llama3.1-405B 1024 H100 FP8 TP8 PP8 CP2 VP8", bridge, s, Layout(8, 2, 8, 8, 8, 1),
                    HardwareForResources(s.resources), 784, 311});
  }
  // Blackwell, dense, FP8 current scaling (Megatron-Bridge performance summary, "25.11 NeMo Container",
  // DGX-GB200 and DGX-B200 tables, FP8-CS figures; configs at 97ad8cc6f, the commit that published them:
  // scripts/performance/configs/llama/llama3{,1}_workload_base_configs.py and *_llm_pretrain.py,
  // get_precision_config("fp8_cs") = bf16_with_fp8_current_scaling_mixed with fp8_param_gather,
  // grad_reduce_in_fp32 false, the recipes' TE cross-entropy fusion, no recompute).
  const char* bridge_2511 = "Megatron-Bridge performance summary, 25.11";
  // Llama 3 8B on one node, GBS 128, MBS 2, TP 1, PP 1, CP 1 (full-iteration CUDA graphs): GB200 31,508
  // and B200 30,624 tokens/s per GPU (1622 and 1576 TFLOP/s in their count).
  for (const auto& [name, gpu, tflops, tokens] :
       {std::tuple{"Bridge Llama3-8B 8 GB200 FP8 TP1", "GB200-NVL72", 1622.0, 31508.0},
        std::tuple{"Bridge Llama3-8B 8 B200 FP8 TP1", "B200", 1576.0, 30624.0}}) {
    JobSpec s = LlamaStyle(32, 4096, 32, 8, 128256, 8192, 128, 8, gpu);
    s.model.ffn_hidden = 14336;
    BridgeFp8(&s);
    s.training.activation_recompute = Recompute::kNone;
    Plan p = Layout(1, 1, 1, 8, 1, 1);
    p.micro_batch_size = 2;
    runs.push_back({name, bridge_2511, s, p, HardwareForResources(s.resources), tflops, tokens});
  }
  // Llama 3.1 405B on 128 B200s, GBS 64, MBS 1, TP 4, PP 8, CP 2, VP 8, TP communication overlap
  // (userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192), the embedding and the loss counted in the
  // pipeline split: 661 tokens/s per GPU (1667 TFLOP/s in their count).
  {
    JobSpec s = Llama3_405B(128, 8192, 64, "B200");
    BridgeFp8(&s);
    s.training.activation_recompute = Recompute::kNone;
    s.training.tp_comm_overlap = true;
    runs.push_back({"Bridge Llama3.1-405B 128 B200 FP8 TP4 PP8 CP2 VP8", bridge_2511, s,
                    Layout(4, 2, 8, 2, 8, 1), HardwareForResources(s.resources), 1667, 661});
  }
  // Llama 3.1 405B on 256 Blackwell GPUs (Megatron-Bridge performance summary, "26.06 NeMo Container",
  // LLAMA3.1_405B, MXFP8, GBS 1536, MBS 1, sequence 8192; the table and configs at 63b08b397:
  // scripts/performance/configs/llama/llama31_workload_base_configs.py *_FP8_MX_V2 and
  // llama31_llm_pretrain.py: fp8_mx precision (fp8_param_gather, grad_reduce_in_fp32 false; counted as fp8),
  // TP overlap with userbuffers, no recompute, Megatron-Core's embedding and loss counted in the pipeline
  // split). They fit only with HBM at the size the driver reports (planner/gpu_profiles.cpp): 168 GB and
  // 254 GB.
  const char* bridge_2606 = "Megatron-Bridge performance summary, 26.06";
  for (const auto& [name, gpu, layout, tflops, tokens] :
       {std::tuple{"Bridge Llama3.1-405B 256 GB200 MXFP8 TP4 PP16 VP8", "GB200-NVL72",
                   Layout(4, 1, 16, 4, 8, 1), 1976.0, 783.0},
        std::tuple{"Bridge Llama3.1-405B 256 GB300 MXFP8 TP2 PP8 CP2 VP4", "GB300-NVL72",
                   Layout(2, 2, 8, 8, 4, 1), 2403.0, 952.0}}) {
    JobSpec s = Llama3_405B(256, 8192, 1536, gpu);
    BridgeFp8(&s);
    s.training.activation_recompute = Recompute::kNone;
    s.training.tp_comm_overlap = true;
    runs.push_back({name, bridge_2606, s, layout, HardwareForResources(s.resources), tflops, tokens});
  }
  // Llama 3 70B on 64 GB200s and on 64 GB300s, FP8 (Megatron-Bridge performance summary, "26.04.01 NeMo
  // Container", LLAMA3_70B, FP8 current scaling, GBS 256, MBS 2, sequence 8192; configs at 21d102f5e, the
  // commit that published the table: llama3_workload_base_configs.py *_FP8_CS_V2, llama3_llm_pretrain.py and
  // utils/overrides.py): Megatron-FSDP over all 64 ranks (optim_grads_params, ZeRO-3), TP 1, no recompute,
  // and CPU activation offloading of 40 of the 80 layers on GB200, 20 on GB300 (cpu_offloading_num_layers):
  // 4,224 and 5,248 tokens/s per GPU (1892 and 2348 TFLOP/s in their count). Without the offloading the
  // layout needs 334 GB per GPU in the planner.
  for (const auto& [name, gpu, offload, tflops, tokens] :
       {std::tuple{"Bridge Llama3-70B 64 GB200 FP8 FSDP64 offload 40", "GB200-NVL72", 40, 1892.0, 4224.0},
        std::tuple{"Bridge Llama3-70B 64 GB300 FP8 FSDP64 offload 20", "GB300-NVL72", 20, 2348.0, 5248.0}}) {
    JobSpec s = LlamaStyle(80, 8192, 64, 8, 128256, 8192, 256, 64, gpu);
    s.model.ffn_hidden = 28672;
    BridgeFp8(&s);
    s.training.activation_recompute = Recompute::kNone;
    s.training.cpu_offload_layers = offload;
    Plan p = Layout(1, 1, 1, 64, 1, 3);
    p.micro_batch_size = 2;
    runs.push_back({name, "Megatron-Bridge performance summary, 26.04.01", s, p,
                    HardwareForResources(s.resources), tflops, tokens});
  }
  AddBridgeMoeRuns(&runs);
  AddNemoLongSequenceRuns(&runs);
  AddNemo25Runs(&runs);
  return runs;
}

}  // namespace shepherd::testing
