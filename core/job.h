// Jobs, their plans, attempts, placements, checkpoints and findings: the domain records that the
// controller holds in memory and storage/ keeps durable (as JSON, see core/json.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

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
  // runs, and what the request leaves out the planner chooses (PlanJob, scheduler/planner.h).
  bool zero_stage_given = false;
  bool vpp_given = false;
  int cp = 1;                             // context parallel (sequence split across ranks in attention)
  int ep = 1;                             // expert parallel (routed experts split across ranks)
  std::optional<int> etp;                 // expert tensor parallel; absent: tp (Megatron's default)
  int vpp = 1;                            // virtual pipeline stages per rank (interleaved 1F1B)
  std::optional<bool> sequence_parallel;  // absent: on when tp > 1
  std::vector<int> pipeline_layers;       // layers per stage; empty: even, or balanced when pp ∤ layers
};

struct Resources {
  int gpus = 0;
  int gpus_per_node = 8;
  std::optional<double> gpu_memory_gib;  // GPU size when no inventory is meant (dry-run plans)
  std::string gpu;  // GPU profile name ("H100-80GB", ...); empty = H100-80GB (scheduler/gpu_profiles.h)
  // launcher "slurm": nodes of the job's Slurm allocation held back as hot spares (docs/slurm.md).
  int spare_nodes = 1;
};

struct CheckpointSpec {
  std::string dir;
  int every_steps = 0;  // 0: the job does not promise periodic checkpoints
  // Seconds training waits on one save, as the user measured it; unset: estimated for checkpoint advice
  // (goodput/plan_advice.h).
  std::optional<double> save_s;
};

// What to do when an anomaly reproduces at the same step after a restart from an earlier checkpoint (the
// data or the code, not the hardware).
enum class OnReproducible { kFail, kRecord };
const char* ToString(OnReproducible o);
enum class ExternalRemediation {
  kNone,    // record only
  kCordon,  // cordon the blamed nodes in Shepherd's inventory
  kHook,    // run the daemon's remediation hook with the finding as JSON on stdin
  // "slurm-drain": cordon the blamed nodes in Shepherd; with --slurm the inventory sync then drains them in
  // Slurm with the reason "shepherd <finding id> <kind>" (docs/slurm.md).
  kSlurmDrain,
  // "requeue": for a job bound to a Slurm job (spec.external_id = its SLURM_JOB_ID), a finding whose
  // recommended action is a restart runs `scontrol requeue <id>` (once per attempt; docs/slurm.md).
  kRequeue,
};
const char* ToString(ExternalRemediation r);
// What a persistent straggler named from arrival order leads to (jobs Shepherd launches; docs/recovery.md).
enum class StragglerAction {
  kRecord,              // "record": the finding only
  kCordonAfterRestart,  // "cordon_after_restart": the next restart, whatever its cause, replaces the node
                        // and leaves it cordoned; never restarts for it
  kReplace,             // "replace": restart from last-known-good with the node replaced by a spare
};
const char* ToString(StragglerAction a);

struct Policy {
  double heartbeat_interval_s = 1;
  double heartbeat_timeout_s = 10;
  double startup_grace_s = 120;  // heartbeats may be absent this long after an attempt starts
  double hang_timeout_s = 60;
  // No step progress while every live rank heartbeats at the same step, none in a collective: weak evidence
  // (an evaluation the client cannot see, an export after the loop, a long first compile), acted on only
  // after this long. Ranks left behind at a lower step are judged at hang_timeout_s.
  double progress_timeout_s = 1800;
  int sdc_check_every_steps = 100;
  int max_restarts = 10;
  double restart_backoff_s = 5;  // doubled per consecutive restart, capped at 300 s
  bool use_spares = true;
  double straggler_factor = 1.5;    // slower than median × factor ...
  int straggler_window_steps = 20;  // ... over this many steps is a straggler
  StragglerAction straggler_action = StragglerAction::kRecord;
  double loss_spike_factor = 3;     // loss above rolling median × factor is a spike
  int good_after_steps = 10;        // K healthy steps that make a complete checkpoint good
  // Loss judged at job level: a spike lasting this many consecutive steps is divergence (restart from
  // last-known-good); a shorter one is an outlier (recorded, no action).
  int loss_divergence_steps = 5;
  // Loop breakers (docs/recovery.md).
  OnReproducible on_reproducible_anomaly = OnReproducible::kFail;
  int no_progress_attempts = 3;       // this many consecutive attempts ...
  int min_progress_steps = 10;        // ... each ending before resume step + this: stop restarting
  int crash_step_window = 5;          // the same exit code within this many steps of an earlier one
  int poisoned_checkpoint_steps = 3;  // a resume failing within this many steps after loading it
  // Jobs our agents launch: how long every node's agent may take to start the ranks before the job is
  // re-placed onto nodes whose agents are attached (or keeps waiting, saying why).
  double launch_timeout_s = 120;
  // Jobs another launcher starts: what Shepherd does itself about a finding (it always records what it
  // would do, as recommended_actions).
  ExternalRemediation external_remediation = ExternalRemediation::kNone;
};

// How the agent shows GPUs to a job's ranks on one node (scheduler/rank_env.h).
enum class GpuBinding {
  kPerNode,     // torchrun's way: every rank sees all of the job's GPUs on its node, LOCAL_RANK indexes them
  kPerProcess,  // each rank sees only its own GPU (CUDA_VISIBLE_DEVICES=<gpu>, device 0 in the process)
};

// Who starts a job's ranks. Decided once, when the spec is parsed (ParseJobSpec: no `command` is kExternal;
// a command with "launcher": "slurm" is kSlurm, else kAgents), stored with the job and shown as its
// `launch.mode`. Everything that differs by mode lives in that mode's Launcher (control/launch/).
enum class LaunchMode {
  kAgents,    // "agents": Shepherd's node agents start the ranks (docs/agent-protocol.md)
  kSlurm,     // "slurm": one srun step per attempt inside the job's Slurm allocation (docs/slurm.md)
  kExternal,  // "external": someone else starts the ranks; Shepherd watches their reports
};
const char* ToString(LaunchMode m);
std::optional<LaunchMode> LaunchModeFromString(std::string_view s);

// launcher "slurm": the allocation to run in.
struct SlurmLaunchSpec {
  std::string allocation;                // adopt this running Slurm job; empty: Shepherd requests one
  std::vector<std::string> sbatch_args;  // site options for the allocation Shepherd requests (--account=...)
  bool operator==(const SlurmLaunchSpec&) const = default;
};

struct JobSpec {
  std::string name;
  ModelSpec model;
  TrainingSpec training;
  ParallelismSpec parallelism;
  Resources resources;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  // The job's id in the launcher that starts it (jobs without `command`; e.g. SLURM_JOB_ID). Unique among
  // jobs that have not ended; "" = none.
  std::string external_id;
  CheckpointSpec checkpoint;
  Policy policy;
  GpuBinding gpu_binding = GpuBinding::kPerNode;  // "gpu_binding": "per_node" (default) | "per_process"
  // Set by the parser from `command` and "launcher"; a spec built in code is another launcher's job
  // (no command) until it says otherwise.
  LaunchMode launch_mode = LaunchMode::kExternal;
  SlurmLaunchSpec slurm;  // "slurm": {"allocation", "sbatch_args"}
  // Who submitted the job (the principal's name). Set by the API from the caller's credential, never from
  // the request body; stored with the job (top-level "owner" of its JSON); "" for jobs from before auth.
  std::string owner;
};

// A concrete parallel layout. micro_batches = global_batch / (micro_batch_size · dp).
// Rank order (Megatron): tp fastest, then cp, dp, pp: rank = tp + TP·(cp + CP·(dp + DP·pp)). The routed
// experts fold the tp·cp·dp ranks of a stage into their own grid (Megatron-Core's expert rank generator:
// etp fastest, then ep, then expert-data-parallel; no cp): with r = tp + TP·(cp + CP·dp) a rank holds the
// experts of ep rank (r / ETP) % EP, sharded ETP ways at r % ETP. With etp = tp that is ep rank
// (cp + CP·dp) % EP.
struct Plan {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int zero_stage = 0;
  int micro_batches = 1;
  int micro_batch_size = 1;
  int cp = 1;
  int vpp = 1;
  bool sequence_parallel = false;
  std::vector<int> pipeline_layers;  // transformer layers per stage (size pp); empty = layers / pp each
  // Expert parallel: routed experts split over ep ranks, each expert sharded over etp ranks (0: etp = tp,
  // Megatron's default); expert data parallel = tp·cp·dp/(etp·ep).
  int ep = 1;
  int etp = 0;
  int world_size() const { return tp * cp * pp * dp; }
  int expert_tp() const { return etp > 0 ? etp : tp; }
  bool operator==(const Plan&) const = default;
};

// kLaunching: an attempt holds its GPUs but its ranks are not known to run yet (no agent has started them,
// no rank has reported). Nothing about a launching attempt's ranks is judged: ranks never launched are never
// lost. kRunning: launched.
enum class JobState { kQueued, kLaunching, kRunning, kRecovering, kSucceeded, kFailed, kCancelled };
const char* ToString(JobState s);
std::optional<JobState> JobStateFromString(const std::string& s);
// An attempt is under way (holding its GPUs): launching or running.
inline bool IsActive(JobState s) {
  return s == JobState::kLaunching || s == JobState::kRunning;
}
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

// Rank order (Megatron default): rank = tp + TP·(dp + DP·pp). TP fastest, then DP, then PP.
struct RankSlot {
  int rank = 0;
  std::string node;
  int gpu = 0;
  int tp = 0;
  int pp = 0;
  int dp = 0;
  int cp = 0;  // context-parallel coordinate (0 when plan.cp = 1)
  bool operator==(const RankSlot&) const = default;
};

// Sets slot->tp, cp, dp, pp from slot->rank in `plan`'s rank order (Plan).
inline void SetRankCoords(const Plan& plan, RankSlot* slot) {
  const int r = slot->rank;
  slot->tp = r % plan.tp;
  slot->cp = (r / plan.tp) % plan.cp;
  slot->dp = (r / (plan.tp * plan.cp)) % plan.dp;
  slot->pp = r / (plan.tp * plan.cp * plan.dp);
}

struct Placement {
  int attempt = 0;
  std::vector<RankSlot> ranks;  // indexed by rank
};

struct Job {
  std::string id;
  int64_t seq = 0;  // submission order, for FIFO
  JobSpec spec;
  Plan plan;
  JobState state = JobState::kQueued;
  int attempt = 0;   // current attempt number; 0 while never started
  int restarts = 0;  // automatic restarts used against policy.max_restarts
  std::string reason;
  Time created_at{};
  Time updated_at{};
};

struct Attempt {
  std::string job;
  int number = 0;
  Time started_at{};
  std::optional<Time> ended_at;
  std::string reason;             // why this attempt was started
  std::string resume_checkpoint;  // checkpoint id, empty when starting from scratch
  int64_t resume_step = 0;
  Placement placement;
  // Goodput marks (goodput/accounting.h reads them), recorded by the controller from the ranks' reports and
  // persisted with the attempt (at its end, and at most once a minute while it runs).
  std::optional<Time> first_step_at;  // daemon clock: the first step report of this attempt
  std::optional<Time> last_step_at;   // daemon clock: the newest step report
  int64_t last_step = 0;              // the newest step reported (meaningful when last_step_at is set)
  double load_s = 0;                  // seconds the ranks spent loading a checkpoint before the first step
  double save_s = 0;                  // seconds training waited on checkpoint saves during the attempt
  // A restart's backoff: the earliest start the recovery policy allowed (RecoveryDecision::not_before).
  // The gap between the previous attempt's end and this one's start is backoff up to here, and waiting
  // (for spares, placement, the queue) after it. Unset for a first attempt and a forced restart.
  std::optional<Time> not_before;
  // The finding that ended this attempt: the root finding of its incident (Finding::incident), re-pointed
  // when a later finding of the same incident turns out to be its root cause. Empty when no fault ended
  // it (cancelled, finished, still running).
  std::string ended_by;
};

enum class CheckpointStatus { kPending, kComplete, kGood, kBad };
const char* ToString(CheckpointStatus s);

struct Checkpoint {
  std::string id;  // "<job>/<attempt>/<step>"
  std::string job;
  int attempt = 0;
  int64_t step = 0;
  std::string path;
  CheckpointStatus status = CheckpointStatus::kPending;
  std::string reason;
  int ranks_reported = 0;
  Time created_at{};
  Time updated_at{};
};

// What a finding is about. Strings ("heartbeat_lost", ...) exist only at the JSON edge (ToString and
// FindingKindFromString, core/enums.cpp).
enum class FindingKind {
  kHeartbeatLost,     // a rank went silent
  kNodeLost,          // a node's agent went silent
  kHang,              // a collective open past the hang timeout, or no progress outside collectives
  kStraggler,         // a rank persistently slower than the job's median
  kSdcSuspected,      // replicas disagree on their parameter hash
  kSdcConfirmed,      // an operator or a replay confirmed corruption on a node
  kSdcTransient,      // a replay's hashes agreed: the earlier mismatch was transient
  kLossSpike,         // loss above the rolling median × factor
  kNonfiniteLoss,     // NaN or Inf loss
  kGradNormSpike,     // gradient norm over 10× its rolling maximum with a normal loss
  kProcessExit,       // a rank process exited non-zero or was killed
  kGpuFault,          // an agent reported a GPU fault
  kRestartRequested,  // a user forced a restart (POST /v1/jobs/{id}/restart)
  kLossDivergence,    // the job-level loss stayed off its baseline for policy.loss_divergence_steps
};
const char* ToString(FindingKind k);
std::optional<FindingKind> FindingKindFromString(std::string_view s);

// How a replica-set mismatch was judged (sdc_suspected only): by majority vote (the odd one out is named),
// or without a majority (two replicas, or an even split), so that a replay must decide.
// kNoAgreement: 3+ replicas and no two hashes equal. One corrupt node leaves the others agreeing, so this
// is state that is not replicated (software), not corruption: recorded only.
enum class SdcVerdict { kNone, kMajority, kNeedsReplay, kNoAgreement };
const char* ToString(SdcVerdict v);

// A PyTorch flight-recorder dump file a rank left on its node, as the node's agent found it.
struct FlightRecorderDump {
  std::string path;
  uint64_t size = 0;  // bytes
  bool operator==(const FlightRecorderDump&) const = default;
};

// A straggler named from arrival order (health/arrival_stragglers.h): the finding's rank held up its group.
struct StragglerEvidence {
  std::string group;         // "tp", "cp", "dp" or "world"
  double lateness_s = 0;     // mean seconds per collective the others waited for it, in windows it held up
  double share_held_up = 0;  // the share of its collectives (in judged windows) that it held up
  int windows = 0;           // judged windows the evidence covers
  bool operator==(const StragglerEvidence&) const = default;
};

struct Finding {
  std::string id;
  std::string job;
  int attempt = 0;
  FindingKind kind = FindingKind::kHang;
  SdcVerdict sdc_verdict = SdcVerdict::kNone;  // set by the SDC detector for kSdcSuspected
  std::vector<int> ranks;
  std::vector<std::string> nodes;
  std::optional<int64_t> step;
  std::optional<int64_t> onset_step;
  Time detected_at{};
  // When the fault began, as far as the evidence shows (daemon clock): a lost node's or rank's last
  // heartbeat, a hung collective's start, a process's exit as its agent saw it, the onset step's time.
  // Unset: not known; goodput accounting then counts no detection time for it.
  std::optional<Time> onset_at;
  // The incident this finding belongs to: the id of the incident's root finding (its own id when it is
  // the root). Findings that follow one fault (a node dies, its peers' collectives fail) share one
  // incident: one restart, one unit of restart budget, one cause of badput. Empty on findings recorded
  // before incidents existed: each is then its own incident.
  std::string incident;
  std::string detail;
  std::vector<std::string> actions;
  // What Shepherd would do, for jobs it does not launch (it acts only as policy.external_remediation says).
  std::vector<std::string> recommended_actions;
  // process_exit: how the rank ended, and the last lines of its log when the agent sent them.
  std::optional<int> exit_code;
  std::optional<int> signal;
  // SIGKILL: whether the node's kernel OOM-killed a process just before (the agent's evidence; empty:
  // not known). A SIGKILL that was not an OOM kill came from a person or a program, not from the node.
  std::optional<bool> oom_kill;
  // process_exit: the rank was stopped by its agent's fence (the daemon's lease ran out): neither the rank's
  // nor the node's doing; never evidence, never counted towards recurrence or loop breakers.
  bool fenced = false;
  std::string log_tail;
  // hang: the culprits that had stopped reporting (silent, or never reported); the others were heartbeating,
  // busy in their own work.
  std::vector<int> silent_ranks;
  // process_exit and hang: flight-recorder dumps the agents found for the attempt's ranks (docs/recovery.md).
  std::vector<FlightRecorderDump> flight_recorder;
  // straggler named from arrival order: its evidence (ranks[0] is the rank, nodes[0] its node). Absent for
  // the step-time rule's straggler findings.
  std::optional<StragglerEvidence> straggler;
};

}  // namespace shepherd
