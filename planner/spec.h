// The planner's vocabulary: what a job spec says about the model, how it trains and how it is laid out
// (model, training, parallelism). Plain values with no behaviour beyond derived sizes; the planner
// (planner/planner.h) reads them, the spec parser (core/job_spec_json.cpp) fills them, and core/job.h's
// JobSpec holds them. Header only, standard library only, so that core can include it without linking the
// planner. Immutable values: safe on any thread.
#pragma once

#include <optional>
#include <vector>

namespace shepherd {

enum class Precision { kBf16, kFp16, kFp32, kFp8 };  // fp8: fp8 matmuls, bf16 weights and activations
enum class Optimizer { kAdam, kSgd };                // adam covers AdamW; sgd is SGD with momentum
enum class Recompute { kNone, kSelective, kFull };
enum class Mlp { kGelu, kSwiglu };         // 2-matrix MLP, or gated 3-matrix MLP
enum class Norm { kLayerNorm, kRmsNorm };  // RMSNorm has no bias
// Who keeps the model state: Megatron-LM (fp32 main gradients; zero_stage 1 = distributed optimizer),
// PyTorch FSDP2 (everything sharded) or DeepSpeed ZeRO 0-3 (ZeRO paper byte counts).
enum class Framework { kMegatron, kFsdp, kDeepSpeed };
enum class Attention { kFlash, kEager };  // flash/fused attention keeps no s×s score matrix
// How MoE tokens reach their experts: Megatron-Core's alltoall dispatcher (every top-k copy sent to its
// expert's rank), or its flex dispatcher over DeepEP or HybridEP, which sends a token once to each other
// node holding any of its experts and forwards the copies over NVLink there (priced alike).
enum class MoeDispatcher { kAllToAll, kDeepEp, kHybridEp };

// Mixture of experts: `moe_layers` layers (or every moe_layer_freq-th, Megatron's --moe-layer-freq) replace
// their MLP by a router (hidden·experts) and `experts` routed experts of which each token uses top_k, plus
// `shared_experts` every token uses (DeepSeekMoE); every expert is an MLP of expert_ffn_hidden width.
struct MoeSpec {
  int experts = 0;            // routed experts per MoE layer; 0 = a dense model
  int top_k = 1;              // routed experts per token
  int expert_ffn_hidden = 0;  // each expert's MLP width; 0 = the model's ffn()
  int shared_experts = 0;     // experts every token uses, each expert_ffn_hidden wide
  int moe_layers = 0;         // MoE layers; 0 = every layer (or as moe_layer_freq says)
  int moe_layer_freq = 0;     // > 0: layers 0, f, 2f, ... are MoE (ceil(layers / f) of them)
  bool enabled() const { return experts > 0; }
  // MoE layers of a model with `layers` layers.
  int count(int layers) const {
    if (!enabled()) return 0;
    if (moe_layers > 0) return moe_layers;
    return moe_layer_freq > 0 ? (layers + moe_layer_freq - 1) / moe_layer_freq : layers;
  }
  bool operator==(const MoeSpec&) const = default;
};

// Multi-head latent attention (DeepSeek-V2/V3; HF config names): queries come from a q_lora_rank-wide latent
// (0: projected from the hidden state directly), keys and values from one kv_lora_rank-wide latent shared by
// every head; each head's query and key are qk_nope_head_dim + qk_rope_head_dim wide (the rope part of the
// key is one head wide, shared by all heads), its value v_head_dim. No biases; the two latents are normed.
struct MlaSpec {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;  // 0: not MLA
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool operator==(const MlaSpec&) const = default;
};

struct ModelSpec {
  double parameters = 0;  // total parameter count; 0 = count from the architecture
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seq_len = 0;
  int vocab = 0;
  int kv_heads = 0;    // key/value heads (GQA); 0 = heads
  int head_dim = 0;    // width of one query, key or value head; 0 = hidden / heads
  int ffn_hidden = 0;  // MLP width; 0 = 4·hidden
  // Sliding-window attention (Megatron-Core's window_size (w, 0), Mistral's and gpt-oss's): each query
  // attends to the w keys before it; 0 = full causal attention. With full_attention_every = N (Megatron's
  // window_attn_skip_freq) every N-th layer (layer numbers N, 2N, …) keeps full attention; 0 = none does.
  int window = 0;
  int full_attention_every = 0;
  Mlp mlp = Mlp::kGelu;
  Norm norm = Norm::kLayerNorm;
  bool tied_embeddings = false;  // output layer shares the input embedding's weights
  // Hidden (and attention) dropout probability. Absent: 0 for rmsnorm models (the Llama lineage, and the
  // Megatron-Core, Megatron-Bridge and torchtitan configs of Llama, Qwen, DeepSeek and gpt-oss, trains
  // without), 0.1 for layernorm ones (Megatron-LM's --hidden-dropout default, GPT-3's).
  std::optional<double> dropout;
  MoeSpec moe;
  MlaSpec mla;  // enabled: the attention is multi-head latent attention (no kv_heads, no head_dim)
  // Multi-token prediction depths (DeepSeek-V3 §2.2; Megatron-Core's --mtp-num-layers, HF's
  // num_nextn_predict_layers): each predicts one more token with one more transformer layer on the last
  // pipeline stage, reusing the embedding and the output layer (model_arch.h MtpDepthSplit).
  int mtp_layers = 0;
  bool parameters_given() const { return parameters > 0; }
  int kv() const { return kv_heads > 0 ? kv_heads : heads; }
  double head() const { return head_dim > 0 ? head_dim : static_cast<double>(hidden) / heads; }
  // The attention's tensors per token: Q (and under MLA K, every head's own), K and V (kv_heads of them, or
  // every head's under MLA), and AV's output (the output projection's input).
  double q_width() const { return heads * (mla.enabled() ? mla.qk_head_dim() : head()); }
  double k_width() const { return mla.enabled() ? q_width() : kv() * head(); }
  double v_width() const { return mla.enabled() ? heads * mla.v_head_dim : kv() * head(); }
  double o_width() const { return mla.enabled() ? v_width() : q_width(); }
  int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  // Each routed (and shared) expert's MLP width: moe.expert_ffn_hidden, else ffn().
  int expert_ffn() const { return moe.expert_ffn_hidden > 0 ? moe.expert_ffn_hidden : ffn(); }
  // Layers whose attention is windowed (a window at least as long as the sequence is full attention).
  int windowed_layers() const {
    if (window <= 0 || window >= seq_len) return 0;
    return full_attention_every > 0 ? layers - layers / full_attention_every : layers;
  }
  // Whether the layers keep dropout masks for the backward (dropout 0 keeps none: PyTorch returns the input).
  bool keeps_dropout_masks() const { return dropout.value_or(norm == Norm::kRmsNorm ? 0 : 0.1) > 0; }
};

// Megatron-Core's --recompute-modules under selective recompute: the parts of each layer that keep no
// activations and run their forward again in the backward. Only with Recompute::kSelective; the default
// is Megatron's, the attention kernels alone.
struct RecomputeModules {
  bool core_attn = true;     // the attention kernels: with eager attention no score matrix is kept
  bool layernorm = false;    // the two norms' outputs (the QKV and MLP inputs), recomputed from their inputs
  bool moe_act = false;      // the routed experts' activation outputs (their second GEMM's input)
  bool mla_up_proj = false;  // MLA's up projections and rope: Q, K and V, recomputed from the two latents
  bool mlp = false;          // the dense layers' whole MLP (its norm fused in), recomputed from its input
  bool operator==(const RecomputeModules&) const = default;
};

struct TrainingSpec {
  int micro_batch_size = 1;
  bool micro_batch_size_given = false;  // the spec names it: "parallelism": "auto" keeps it, not searched
  int global_batch_size = 0;
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdam;
  // The optimizer's moments (Adam's m and v, SGD's momentum) in bf16 rather than fp32: Megatron-Core's
  // --use-precision-aware-optimizer with --exp-avg-dtype/--exp-avg-sq-dtype bf16, Apex's
  // DistributedFusedAdam dtype (NeMo's optim.dtype), DeepSeek-V3's BF16 AdamW moments.
  bool bf16_optimizer_states = false;
  Recompute activation_recompute = Recompute::kSelective;
  // The spec names it (or recompute_modules, or cpu_offload_layers, which fix it): "parallelism": "auto"
  // keeps it; otherwise auto also tries full recompute where selective leaves only slower layouts.
  bool activation_recompute_given = false;
  RecomputeModules recompute_modules;  // kSelective only
  // kFull only: Megatron-Core's --recompute-method block --recompute-num-layers N: the first N layers of each
  // virtual pipeline chunk run their forward again in the backward and keep only their input; the others
  // keep all their activations (no recompute). 0: every layer (full recompute as before).
  int recompute_num_layers = 0;
  // Megatron-Core's --cpu-offloading-num-layers (activations only, cpu_offloading_weights false): the
  // activations of that many transformer layers go to host memory after their forward and come back before
  // their backward; (layers − n) layers' worth stay on the GPU (Transformer Engine's cpu_offload.py).
  // Megatron-Core allows it only without pipeline parallelism and without recompute, and n < layers.
  int cpu_offload_layers = 0;
  Framework framework = Framework::kMegatron;
  Attention attention = Attention::kFlash;
  // The loss over logits upcast to fp32 in separate kernels (Megatron-Core's default vocab-parallel
  // cross-entropy, torchtitan); false: over 16-bit logits in fused kernels (Megatron's
  // cross_entropy_loss_fusion, Transformer Engine's) or without the upcast (NeMo Automodel's
  // MaskedCrossEntropy with fp32_upcast false).
  bool cross_entropy_fp32 = true;
  // Gradients kept and reduced in fp32 (Megatron's grad_reduce_in_fp32). Absent: the framework's default,
  // fp32 for megatron (main gradients) and fsdp (reduce_dtype), the training precision for deepspeed;
  // NVIDIA's Megatron-Bridge performance recipes set it false (16-bit gradient buffers and reductions).
  std::optional<bool> grad_reduce_in_fp32;
  // Megatron-Core's --tp-comm-overlap (Transformer Engine userbuffers): each sequence-parallel all-gather
  // and reduce-scatter is split into tp chunks pipelined with its GEMM. Needs sequence parallelism.
  bool tp_comm_overlap = false;
  // Megatron-Core's --overlap-moe-expert-parallel-comm (Megatron-Bridge's moe_a2a_overlap): the combined
  // 1F1B schedule runs each steady-state forward chunk beside another micro-batch's backward chunk, the
  // expert-parallel dispatch and combine of one on a second stream under the other's compute. Megatron-Core
  // needs ep > 1, vpp > 1 when pp > 1, no full recompute, a 16-bit (or fp8) model and at most one MTP depth.
  bool moe_a2a_overlap = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // fp8 only: the transformer layers' weights held as FP8 (Megatron-Core's --fp8-param-gather, NeMo's
  // fp8_params; Megatron-Bridge's FP8 current-scaling recipes set it): no bf16 copy beside Transformer
  // Engine's FP8 weight and transpose, and the distributed optimizer gathers 1-byte parameters. false: the
  // bf16 weights plus Transformer Engine's cached FP8 weight and transpose (2 B per parameter more).
  bool fp8_param_gather = false;
};

struct ParallelismSpec {
  bool automatic = false;  // "parallelism": "auto"
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int zero_stage = 0;
  // The request names them. An explicit layout fixes tp, cp, pp, dp, ep, etp, sequence_parallel and
  // pipeline_layers; vpp and zero_stage (with training.micro_batch_size and activation_recompute) say how it
  // runs, and what the request leaves out the planner chooses (PlanJob, planner/planner.h).
  bool zero_stage_given = false;
  bool vpp_given = false;
  int cp = 1;                             // context parallel (sequence split across ranks in attention)
  int ep = 1;                             // expert parallel (routed experts split across ranks)
  std::optional<int> etp;                 // expert tensor parallel; absent: tp (Megatron's default)
  int vpp = 1;                            // virtual pipeline stages per rank (interleaved 1F1B)
  std::optional<bool> sequence_parallel;  // absent: on when tp > 1
  std::vector<int> pipeline_layers;       // layers per stage; empty: even, or balanced when pp ∤ layers
};

}  // namespace shepherd
