// Validation of job specs: untrusted input from the API and inventory files (their encoding:
// job_spec_json.cpp). Defaults for omitted optional fields are documented in docs/api.md and must match
// core/job.h.

#include "core/fields.h"
#include "core/gpu_names.h"
#include "core/json.h"

namespace shepherd {
namespace {

constexpr long long kMaxGpus = 1 << 20;
constexpr long long kMaxLayers = 4096;

bool ValidEnvName(const std::string& k) {
  if (k.empty() || k.size() > 128 || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  for (char c : k)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// model.moe: {experts, top_k, expert_ffn_hidden, shared_experts, moe_layers | moe_layer_freq}.
void ParseMoe(FieldReader& model, ModelSpec* m, std::vector<FieldError>* errs) {
  const Json* j = model.Find("moe");
  if (!j) return;
  if (!j->is_object()) return model.Error("model.moe", "must be an object");
  FieldReader r(*j, "model.moe", errs);
  r.OnlyKnown({"experts", "top_k", "expert_ffn_hidden", "shared_experts", "moe_layers", "moe_layer_freq"});
  MoeSpec& e = m->moe;
  if (auto v = r.Int("experts", true, 1, 1 << 16)) e.experts = int(*v);
  e.top_k = int(r.Int("top_k", false, 1, 1 << 16).value_or(1));
  e.expert_ffn_hidden = int(r.Int("expert_ffn_hidden", false, 1, 1 << 22).value_or(0));
  e.shared_experts = int(r.Int("shared_experts", false, 0, 1 << 10).value_or(0));
  e.moe_layers = int(r.Int("moe_layers", false, 1, kMaxLayers).value_or(0));
  e.moe_layer_freq = int(r.Int("moe_layer_freq", false, 1, kMaxLayers).value_or(0));
  if (e.experts > 0 && e.top_k > e.experts) r.Error("model.moe.top_k", "must not exceed model.moe.experts");
  if (e.moe_layers > 0 && e.moe_layer_freq > 0)
    r.Error("model.moe.moe_layer_freq", "give model.moe.moe_layers or model.moe.moe_layer_freq, not both");
  if (m->layers > 0 && e.moe_layers > m->layers)
    r.Error("model.moe.moe_layers", "must not exceed model.layers");
}

// model.mla: {q_lora_rank (0 or absent: none), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim}.
void ParseMla(FieldReader& model, ModelSpec* m, std::vector<FieldError>* errs) {
  const Json* j = model.Find("mla");
  if (!j) return;
  if (!j->is_object()) return model.Error("model.mla", "must be an object");
  FieldReader r(*j, "model.mla", errs);
  r.OnlyKnown({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
  MlaSpec& a = m->mla;
  a.q_lora_rank = int(r.Int("q_lora_rank", false, 0, 1 << 20).value_or(0));
  if (auto v = r.Int("kv_lora_rank", true, 1, 1 << 20)) a.kv_lora_rank = int(*v);
  if (auto v = r.Int("qk_nope_head_dim", true, 0, 1 << 16)) a.qk_nope_head_dim = int(*v);
  if (auto v = r.Int("qk_rope_head_dim", true, 0, 1 << 16)) a.qk_rope_head_dim = int(*v);
  if (auto v = r.Int("v_head_dim", true, 1, 1 << 16)) a.v_head_dim = int(*v);
  if (a.enabled() && a.qk_head_dim() == 0)
    r.Error("model.mla.qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be positive");
  if (m->kv_heads > 0 && m->kv_heads != m->heads)
    model.Error("model.kv_heads",
                "multi-head latent attention gives every head its own K and V: leave it out");
  if (m->head_dim > 0) model.Error("model.head_dim", "give model.mla's head widths instead");
}

void ParseModel(FieldReader& root, ModelSpec* m, std::vector<FieldError>* errs) {
  const Json* j = root.Find("model");
  if (!j) return root.Error("model", "is required");
  FieldReader r(*j, "model", errs);
  r.OnlyKnown({"parameters", "layers", "hidden", "heads", "seq_len", "vocab", "kv_heads", "head_dim",
               "ffn_hidden", "mlp", "norm", "tied_embeddings", "dropout", "window", "full_attention_every",
               "moe", "mla", "mtp_layers"});
  // parameters may be omitted: the planner counts them from the architecture.
  if (auto v = r.Number("parameters", false, 1e3, 1e15)) m->parameters = *v;
  // At most 4096 (the deepest published models have under 200): the auto search grows with the depth, and
  // at 100,000 layers one search took 35 s.
  if (auto v = r.Int("layers", true, 1, kMaxLayers)) m->layers = int(*v);
  if (auto v = r.Int("hidden", true, 1, 1 << 20)) m->hidden = int(*v);
  if (auto v = r.Int("heads", true, 1, 1 << 16)) m->heads = int(*v);
  if (auto v = r.Int("seq_len", true, 1, 1 << 24)) m->seq_len = int(*v);
  m->vocab = int(r.Int("vocab", false, 1, 1 << 24).value_or(32000));
  m->kv_heads = int(r.Int("kv_heads", false, 1, 1 << 16).value_or(0));
  m->head_dim = int(r.Int("head_dim", false, 1, 1 << 16).value_or(0));
  m->ffn_hidden = int(r.Int("ffn_hidden", false, 1, 1 << 22).value_or(0));
  if (auto v = r.Enum("mlp", {"gelu", "swiglu"})) m->mlp = *v == "swiglu" ? Mlp::kSwiglu : Mlp::kGelu;
  if (auto v = r.Enum("norm", {"layernorm", "rmsnorm"}))
    m->norm = *v == "rmsnorm" ? Norm::kRmsNorm : Norm::kLayerNorm;
  if (auto v = r.Bool("tied_embeddings")) m->tied_embeddings = *v;
  m->dropout = r.Number("dropout", false, 0, 0.99);
  m->window = int(r.Int("window", false, 1, 1 << 24).value_or(0));
  m->full_attention_every = int(r.Int("full_attention_every", false, 1, 100000).value_or(0));
  if (m->full_attention_every > 0 && m->window == 0)
    r.Error("model.full_attention_every", "needs model.window (the other layers' attention window)");
  m->mtp_layers = int(r.Int("mtp_layers", false, 0, 64).value_or(0));
  ParseMoe(r, m, errs);
  ParseMla(r, m, errs);
  if (!m->mla.enabled() && m->head_dim == 0 && m->hidden > 0 && m->heads > 0 && m->hidden % m->heads != 0)
    r.Error("model.heads", "must divide model.hidden (or give model.head_dim)");
  if (!m->mla.enabled() && m->kv_heads > 0 && m->heads > 0 && m->heads % m->kv_heads != 0)
    r.Error("model.kv_heads", "must divide model.heads");
}

// training.recompute_modules: Megatron-Core's names, a non-empty subset of core_attn, layernorm, moe_act,
// mla_up_proj, mlp; only with activation_recompute "selective" (the default).
void ParseRecomputeModules(FieldReader& r, TrainingSpec* t) {
  const Json* j = r.Find("recompute_modules");
  if (!j) return;
  const std::string path = r.Path("recompute_modules");
  const std::string kModules = R"("core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp")";
  if (t->activation_recompute != Recompute::kSelective)
    return r.Error(path, "applies only to training.activation_recompute \"selective\"");
  if (!j->is_array() || j->empty()) return r.Error(path, "must be a non-empty array of " + kModules);
  RecomputeModules m{.core_attn = false};
  for (const Json& v : *j) {
    const std::string name = v.is_string() ? v.get<std::string>() : "";
    bool* flag = name == "core_attn"     ? &m.core_attn
                 : name == "layernorm"   ? &m.layernorm
                 : name == "moe_act"     ? &m.moe_act
                 : name == "mla_up_proj" ? &m.mla_up_proj
                 : name == "mlp"         ? &m.mlp
                                         : nullptr;
    if (!flag)
      return r.Error(
          path, "unknown module (accepted: " + kModules + "; others, such as \"moe\", are not modelled)");
    if (*flag) return r.Error(path, "lists \"" + name + "\" twice");
    *flag = true;
  }
  t->recompute_modules = m;
}

// training.recompute_num_layers: Megatron-Core's --recompute-num-layers under --recompute-method block;
// implies activation_recompute "full" (as Megatron-Bridge's override sets it), refused beside another.
void ParseRecomputeNumLayers(FieldReader& r, TrainingSpec* t) {
  const std::optional<long long> n = r.Int("recompute_num_layers", false, 1, 1 << 20);
  if (!n) return;
  if ((r.Find("activation_recompute") && t->activation_recompute != Recompute::kFull) ||
      r.Find("recompute_modules"))
    return r.Error(
        r.Path("recompute_num_layers"),
        "needs training.activation_recompute \"full\" (recompute_modules are selective recompute's)");
  t->activation_recompute = Recompute::kFull;
  t->recompute_num_layers = int(*n);
}

void ParseTraining(FieldReader& root, TrainingSpec* t, std::vector<FieldError>* errs) {
  const Json* j = root.Find("training");
  if (!j) return root.Error("training", "is required");
  FieldReader r(*j, "training", errs);
  r.OnlyKnown({"micro_batch_size", "global_batch_size", "precision", "optimizer", "activation_recompute",
               "recompute_modules", "cpu_offload_layers", "framework", "attention", "cross_entropy_fp32",
               "grad_reduce_in_fp32", "tp_comm_overlap", "fp8_param_gather", "recompute_num_layers",
               "optimizer_dtype", "moe_a2a_overlap", "moe_dispatcher"});
  t->micro_batch_size = int(r.Int("micro_batch_size", false, 1, 1 << 16).value_or(1));
  t->micro_batch_size_given = j->is_object() && j->contains("micro_batch_size");
  if (auto v = r.Int("global_batch_size", true, 1, 1 << 28)) t->global_batch_size = int(*v);
  if (auto v = r.Enum("precision", {"bf16", "fp16", "fp32", "fp8"}))
    t->precision = *v == "bf16"   ? Precision::kBf16
                   : *v == "fp16" ? Precision::kFp16
                   : *v == "fp8"  ? Precision::kFp8
                                  : Precision::kFp32;
  if (auto v = r.Enum("optimizer", {"adam", "adamw", "sgd"}))
    t->optimizer = *v == "sgd" ? Optimizer::kSgd : Optimizer::kAdam;
  if (auto v = r.Enum("optimizer_dtype", {"fp32", "bf16"})) t->bf16_optimizer_states = *v == "bf16";
  if (auto v = r.Enum("activation_recompute", {"none", "selective", "full"}))
    t->activation_recompute = *v == "none"   ? Recompute::kNone
                              : *v == "full" ? Recompute::kFull
                                             : Recompute::kSelective;
  ParseRecomputeModules(r, t);
  ParseRecomputeNumLayers(r, t);
  t->activation_recompute_given =
      j->is_object() && (j->contains("activation_recompute") || j->contains("recompute_modules") ||
                         j->contains("cpu_offload_layers") || j->contains("recompute_num_layers"));
  t->cpu_offload_layers = int(r.Int("cpu_offload_layers", false, 0, 1 << 20).value_or(0));
  if (t->cpu_offload_layers > 0) {
    // Megatron-Core refuses offloading with recompute ("CPU offloading does not work when activation
    // recomputation is enabled"); absent, the recompute default gives way.
    if ((r.Find("activation_recompute") && t->activation_recompute != Recompute::kNone) ||
        r.Find("recompute_modules") || r.Find("recompute_num_layers"))
      r.Error("training.cpu_offload_layers",
              "needs training.activation_recompute \"none\" (Megatron-Core "
              "does not offload recomputed layers)");
    t->activation_recompute = Recompute::kNone;
  }
  if (auto v = r.Enum("framework", {"megatron", "fsdp", "deepspeed"}))
    t->framework = *v == "fsdp"        ? Framework::kFsdp
                   : *v == "deepspeed" ? Framework::kDeepSpeed
                                       : Framework::kMegatron;
  // Under fsdp, selective recompute is torchtitan's per-op policy (planner/memory_model.h,
  // OpCheckpointing); Megatron-Core's module names do not apply.
  if (t->framework == Framework::kFsdp && r.Find("recompute_modules"))
    r.Error("training.recompute_modules",
            "Megatron-Core's modules; with training.framework \"fsdp\" selective recompute is torchtitan's "
            "per-op policy");
  if (auto v = r.Enum("attention", {"flash", "eager"}))
    t->attention = *v == "eager" ? Attention::kEager : Attention::kFlash;
  if (auto v = r.Bool("cross_entropy_fp32")) t->cross_entropy_fp32 = *v;
  if (auto v = r.Bool("grad_reduce_in_fp32")) t->grad_reduce_in_fp32 = *v;
  if (auto v = r.Bool("tp_comm_overlap")) t->tp_comm_overlap = *v;
  if (auto v = r.Bool("moe_a2a_overlap")) t->moe_a2a_overlap = *v;
  if (auto v = r.Enum("moe_dispatcher", {"alltoall", "deepep", "hybridep"}))
    t->moe_dispatcher = *v == "deepep"     ? MoeDispatcher::kDeepEp
                        : *v == "hybridep" ? MoeDispatcher::kHybridEp
                                           : MoeDispatcher::kAllToAll;
  if (auto v = r.Bool("fp8_param_gather")) t->fp8_param_gather = *v;
  if (t->fp8_param_gather && t->precision != Precision::kFp8)
    r.Error("training.fp8_param_gather", "needs training.precision \"fp8\"");
}

void ParseResources(FieldReader& root, Resources* res, std::vector<FieldError>* errs) {
  const Json* j = root.Find("resources");
  if (!j) return root.Error("resources", "is required");
  FieldReader r(*j, "resources", errs);
  r.OnlyKnown({"gpus", "gpus_per_node", "gpu_memory_gib", "gpu", "spare_nodes"});
  res->spare_nodes = int(r.Int("spare_nodes", false, 0, 1024).value_or(1));
  if (auto v = r.Int("gpus", true, 1, kMaxGpus)) res->gpus = int(*v);
  res->gpus_per_node = int(r.Int("gpus_per_node", false, 1, 1024).value_or(8));
  if (auto v = r.Number("gpu_memory_gib", false, 1, 1 << 20)) res->gpu_memory_gib = *v;
  // The planner's profile names, or any spelling of one (core/gpu_names.h), kept as the profile's name.
  if (auto v = r.String("gpu", false, 64)) {
    if (std::optional<std::string> name = CanonicalGpuName(*v))
      res->gpu = *name;
    else
      r.Error(r.Path("gpu"),
              "must name a GPU the planner has a profile of: A100-40GB, A100-80GB, H100-80GB (H100), "
              "H800, H200, B200, GB200-NVL72 (GB200), B300, GB300-NVL72 (GB300)");
  }
}

// "auto", absent (= auto), or {tp, cp, pp, dp, ep, etp, vpp, zero_stage, sequence_parallel,
// pipeline_layers}.
// dp defaults to gpus / (tp·cp·pp). Layout rules that need the model (tp | kv_heads, stage sizes, ...)
// are the planner's (planner/planner.h); here only what the JSON alone decides.
void ParseParallelism(FieldReader& root, JobSpec* s, std::vector<FieldError>* errs) {
  ParallelismSpec& p = s->parallelism;
  const Json* j = root.Find("parallelism");
  if (!j || (j->is_string() && j->get_ref<const std::string&>() == "auto")) {
    p.automatic = true;
    return;
  }
  if (!j->is_object()) return root.Error("parallelism", "must be \"auto\" or an object");
  FieldReader r(*j, "parallelism", errs);
  r.OnlyKnown(
      {"tp", "pp", "dp", "zero_stage", "cp", "ep", "etp", "vpp", "sequence_parallel", "pipeline_layers"});
  p.tp = int(r.Int("tp", false, 1, kMaxGpus).value_or(1));
  p.pp = int(r.Int("pp", false, 1, kMaxGpus).value_or(1));
  p.cp = int(r.Int("cp", false, 1, kMaxGpus).value_or(1));
  p.ep = int(r.Int("ep", false, 1, kMaxGpus).value_or(1));
  if (auto v = r.Int("etp", false, 1, kMaxGpus)) p.etp = int(*v);
  p.vpp_given = r.Find("vpp") != nullptr;
  p.vpp = int(r.Int("vpp", false, 1, 1024).value_or(1));
  auto dp = r.Int("dp", false, 1, kMaxGpus);
  p.zero_stage_given = r.Find("zero_stage") != nullptr;
  p.zero_stage = int(r.Int("zero_stage", false, 0, 3).value_or(0));
  if (auto v = r.Bool("sequence_parallel")) p.sequence_parallel = *v;
  if (const Json* layers = r.Find("pipeline_layers")) {
    bool ok = layers->is_array() && static_cast<long long>(layers->size()) == p.pp;
    for (size_t i = 0; ok && i < layers->size(); ++i) {
      ok = (*layers)[i].is_number_integer() && (*layers)[i].get<long long>() >= 1 &&
           (*layers)[i].get<long long>() <= kMaxLayers;
      if (ok) p.pipeline_layers.push_back(int((*layers)[i].get<long long>()));
    }
    if (!ok) {
      p.pipeline_layers.clear();
      r.Error("parallelism.pipeline_layers", "must be an array of pp positive integers (layers per stage)");
    }
  }
  int gpus = s->resources.gpus;
  const long long model_ranks = static_cast<long long>(p.tp) * p.cp * p.pp;
  p.dp = dp ? int(*dp) : (gpus > 0 && gpus % model_ranks == 0 ? int(gpus / model_ranks) : 1);
  if (gpus > 0 && model_ranks * p.dp != gpus)
    r.Error("parallelism", "tp·cp·pp·dp = " + std::to_string(model_ranks * p.dp) +
                               " must equal resources.gpus = " + std::to_string(gpus));
  if (s->model.heads > 0 && s->model.heads % p.tp != 0) r.Error("parallelism.tp", "must divide model.heads");
  if (s->model.kv_heads > 0 && s->model.kv_heads % p.tp != 0)
    r.Error("parallelism.tp", "must divide model.kv_heads");
  if (s->model.layers > 0 && p.pp > s->model.layers)
    r.Error("parallelism.pp", "must not exceed model.layers");
  const int etp = p.etp.value_or(p.tp);
  if (etp != p.tp && !s->model.moe.enabled())
    r.Error("parallelism.etp", "an expert tensor parallel size other than tp needs model.moe");
  if (p.ep > 1 && !s->model.moe.enabled())
    r.Error("parallelism.ep", "ep > 1 needs a mixture-of-experts model (model.moe)");
  else if (p.ep > 1 && s->model.moe.experts % p.ep != 0)
    r.Error("parallelism.ep", "must divide model.moe.experts");
  else if (s->model.moe.enabled() &&
           (static_cast<long long>(p.tp) * p.cp * p.dp) % (static_cast<long long>(etp) * p.ep) != 0) {
    const std::string why = "etp·ep must divide tp·cp·dp (the experts' grid folds the ranks of a stage)";
    if (p.ep > 1) r.Error("parallelism.ep", why);
    if (p.etp) r.Error("parallelism.etp", why);
  }
  long long per_step = static_cast<long long>(s->training.micro_batch_size) * p.dp;
  if (s->training.global_batch_size > 0 && s->training.global_batch_size % per_step != 0)
    r.Error("training.global_batch_size",
            "must be divisible by micro_batch_size·dp = " + std::to_string(per_step));
}

void ParsePolicy(FieldReader& root, Policy* p, std::vector<FieldError>* errs) {
  const Json* j = root.Find("policy");
  if (!j) return;
  FieldReader r(*j, "policy", errs);
  r.OnlyKnown({"heartbeat_interval_s",
               "heartbeat_timeout_s",
               "startup_grace_s",
               "hang_timeout_s",
               "progress_timeout_s",
               "sdc_check_every_steps",
               "max_restarts",
               "restart_backoff_s",
               "use_spares",
               "straggler_factor",
               "straggler_window_steps",
               "straggler_action",
               "loss_spike_factor",
               "good_after_steps",
               "loss_divergence_steps",
               "on_reproducible_anomaly",
               "no_progress_attempts",
               "min_progress_steps",
               "crash_step_window",
               "poisoned_checkpoint_steps",
               "launch_timeout_s",
               "external_remediation"});
  auto num = [&](const char* k, double* out, double lo, double hi) {
    if (auto v = r.Number(k, false, lo, hi)) *out = *v;
  };
  auto integer = [&](const char* k, int* out, int lo, int hi) {
    if (auto v = r.Int(k, false, lo, hi)) *out = int(*v);
  };
  num("heartbeat_interval_s", &p->heartbeat_interval_s, 0.01, 3600);
  num("heartbeat_timeout_s", &p->heartbeat_timeout_s, 0.05, 86400);
  num("startup_grace_s", &p->startup_grace_s, 0, 86400);
  num("hang_timeout_s", &p->hang_timeout_s, 0.05, 86400);
  num("progress_timeout_s", &p->progress_timeout_s, 0.05, 7 * 86400);
  integer("sdc_check_every_steps", &p->sdc_check_every_steps, 1, 1 << 30);
  integer("max_restarts", &p->max_restarts, 0, 100000);
  num("restart_backoff_s", &p->restart_backoff_s, 0, 3600);
  if (auto v = r.Bool("use_spares")) p->use_spares = *v;
  num("straggler_factor", &p->straggler_factor, 1.01, 1000);
  integer("straggler_window_steps", &p->straggler_window_steps, 2, 10000);
  if (auto v = r.Enum("straggler_action", {"record", "cordon_after_restart", "replace"}))
    p->straggler_action = *v == "replace"                ? StragglerAction::kReplace
                          : *v == "cordon_after_restart" ? StragglerAction::kCordonAfterRestart
                                                         : StragglerAction::kRecord;
  num("loss_spike_factor", &p->loss_spike_factor, 1.01, 1e6);
  integer("good_after_steps", &p->good_after_steps, 0, 1 << 30);
  integer("loss_divergence_steps", &p->loss_divergence_steps, 1, 100000);
  if (auto v = r.Enum("on_reproducible_anomaly", {"fail", "record"}))
    p->on_reproducible_anomaly = *v == "record" ? OnReproducible::kRecord : OnReproducible::kFail;
  integer("no_progress_attempts", &p->no_progress_attempts, 1, 1000);
  integer("min_progress_steps", &p->min_progress_steps, 0, 1 << 30);
  integer("crash_step_window", &p->crash_step_window, 0, 1 << 30);
  integer("poisoned_checkpoint_steps", &p->poisoned_checkpoint_steps, 0, 1 << 30);
  num("launch_timeout_s", &p->launch_timeout_s, 1, 86400);
  if (auto v = r.Enum("external_remediation", {"none", "cordon", "hook", "slurm-drain", "requeue"}))
    p->external_remediation = *v == "cordon"        ? ExternalRemediation::kCordon
                              : *v == "hook"        ? ExternalRemediation::kHook
                              : *v == "slurm-drain" ? ExternalRemediation::kSlurmDrain
                              : *v == "requeue"     ? ExternalRemediation::kRequeue
                                                    : ExternalRemediation::kNone;
  if (p->heartbeat_timeout_s <= p->heartbeat_interval_s)
    r.Error("policy.heartbeat_timeout_s", "must be greater than policy.heartbeat_interval_s");
}

void ParseLaunch(FieldReader& root, JobSpec* s, std::vector<FieldError>* errs) {
  if (const Json* c = root.Find("command")) {
    if (!c->is_array() || c->size() > 1024) {
      root.Error("command", "must be an array of at most 1024 strings");
    } else {
      // Program text: tab and line breaks pass (`sh -c` scripts), other control characters do not.
      for (size_t i = 0; i < c->size(); ++i) {
        const std::string path = "command[" + std::to_string(i) + "]";
        if (!(*c)[i].is_string() || (*c)[i].get_ref<const std::string&>().size() > 4096)
          root.Error(path, "must be a string of at most 4096 characters");
        else if (HasControlCharacter((*c)[i].get_ref<const std::string&>(), true))
          root.Error(path, "must not contain NUL or control characters other than tab and line breaks");
        else
          s->command.push_back((*c)[i].get<std::string>());
      }
      if (!c->empty() && s->command.size() == c->size() && s->command[0].empty())
        root.Error("command[0]", "must not be empty");
    }
  }
  if (const Json* e = root.Find("env")) {
    if (!e->is_object() || e->size() > 1024) {
      root.Error("env", "must be an object of at most 1024 string values");
    } else {
      for (const auto& [k, v] : e->items()) {
        if (HasControlCharacter(k))  // not echoed into the field name
          root.Error("env", "names must not contain control characters");
        else if (!ValidEnvName(k))
          root.Error("env." + k, "is not a valid environment variable name");
        else if (!v.is_string() || v.get_ref<const std::string&>().size() > 65536)
          root.Error("env." + k, "must be a string of at most 65536 characters");
        else if (HasControlCharacter(v.get_ref<const std::string&>(), true))
          root.Error("env." + k, "must not contain NUL or control characters other than tab and line breaks");
        else if (k == "SHEPHERD_WORKDIR" && v.get_ref<const std::string&>().rfind('/', 0) != 0)
          root.Error("env." + k, "must be an absolute path (the ranks' working directory)");
        else if (k.rfind("SHEPHERD_", 0) == 0 && k != "SHEPHERD_WORKDIR")
          root.Error("env." + k, "SHEPHERD_* variables are set by the agent (except SHEPHERD_WORKDIR)");
        else
          s->env[k] = v.get<std::string>();
      }
    }
  }
  if (const Json* c = root.Find("checkpoint")) {
    FieldReader r(*c, "checkpoint", errs);
    r.OnlyKnown({"dir", "every_steps", "save_s"});
    s->checkpoint.dir = r.String("dir", false, 4096).value_or("");
    s->checkpoint.every_steps = int(r.Int("every_steps", false, 0, 1 << 30).value_or(0));
    s->checkpoint.save_s = r.Number("save_s", false, 1e-3, 86400);
  }
}

// external_id names the job in the launcher that starts it, so only a job Shepherd does not launch has one;
// "requeue" asks that launcher (Slurm) to requeue it, so it needs one.
void ParseExternalId(FieldReader& root, JobSpec* s) {
  s->external_id = root.String("external_id", false, 128).value_or("");  // "" = none
  if (!s->external_id.empty() && !s->command.empty())
    root.Error("external_id", "only a job Shepherd does not launch (no command) has an external id");
  if (s->policy.external_remediation == ExternalRemediation::kRequeue && s->external_id.empty())
    root.Error("policy.external_remediation", "\"requeue\" needs the job's external_id (its SLURM_JOB_ID)");
}

// The one place a job's launch mode is decided: without a command someone else starts the ranks; with one,
// "launcher" says whose they are. A fourth launcher adds its name here and to LaunchMode.
void ParseLauncher(FieldReader& root, JobSpec* s, std::vector<FieldError>* errs) {
  const bool slurm = root.Enum("launcher", {"agents", "slurm"}) == std::optional<std::string>("slurm");
  if (slurm && s->command.empty())
    root.Error("launcher", "\"slurm\" needs a command: Shepherd starts the ranks with srun");
  s->launch_mode = s->command.empty() ? LaunchMode::kExternal
                   : slurm               ? LaunchMode::kSlurm
                                         : LaunchMode::kAgents;
  if (const Json* j = root.Find("slurm")) {
    FieldReader r(*j, "slurm", errs);
    r.OnlyKnown({"allocation", "sbatch_args"});
    s->slurm.allocation = r.String("allocation", false, 64).value_or("");
    if (!s->slurm.allocation.empty() &&
        s->slurm.allocation.find_first_not_of("0123456789") != std::string::npos)
      r.Error("allocation", "must be a Slurm job id (digits)");
    if (const Json* a = r.Find("sbatch_args")) {
      if (!a->is_array() || a->size() > 64) {
        r.Error("sbatch_args", "must be an array of at most 64 strings");
      } else {
        for (size_t i = 0; i < a->size(); ++i) {
          const Json& x = (*a)[i];
          // Which options may pass, and in which forms, is the site's job policy (core/sbatch_policy.h).
          if (!x.is_string() || x.get_ref<const std::string&>().size() > 1024)
            r.Error("sbatch_args[" + std::to_string(i) + "]", "must be a string of at most 1024 bytes");
          else
            s->slurm.sbatch_args.push_back(x.get<std::string>());
        }
      }
    }
    if (!slurm) root.Error("slurm", "is only for \"launcher\": \"slurm\"");
  }
}

Result<JobSpec> Finish(JobSpec spec, std::vector<FieldError> errs) {
  if (!errs.empty()) return InvalidContent("the job spec is invalid", std::move(errs));
  return spec;
}

// The planning parts (model, training, resources, parallelism); `full` adds the rest of a job.
Result<JobSpec> ParseSpec(const Json& j, bool full) {
  std::vector<FieldError> errs;
  JobSpec s;
  FieldReader root(j, "", &errs);
  if (!root.ok()) return Finish(s, errs);
  root.OnlyKnown({"name", "model", "training", "parallelism", "resources", "command", "env", "checkpoint",
                  "policy", "gpu_binding", "external_id", "launcher", "slurm"});
  s.name = root.String("name", full, 128).value_or("");  // a plan's (a dry run's) is optional, checked alike
  ParseModel(root, &s.model, &errs);
  ParseTraining(root, &s.training, &errs);
  ParseResources(root, &s.resources, &errs);
  ParseParallelism(root, &s, &errs);
  // A plan request may be a whole job body (a dry run): what it has is checked as a submit would.
  ParseLaunch(root, &s, &errs);
  ParsePolicy(root, &s.policy, &errs);
  ParseExternalId(root, &s);
  std::string binding = root.String("gpu_binding", false, 32).value_or("per_node");
  if (binding == "per_process")
    s.gpu_binding = GpuBinding::kPerProcess;
  else if (binding != "per_node")
    root.Error("gpu_binding", "must be \"per_node\" or \"per_process\"");
  ParseLauncher(root, &s, &errs);
  return Finish(std::move(s), std::move(errs));
}

}  // namespace

Result<JobSpec> ParsePlanRequest(const Json& j) {
  return ParseSpec(j, false);
}
Result<JobSpec> ParseJobSpec(const Json& j) {
  return ParseSpec(j, true);
}

}  // namespace shepherd
