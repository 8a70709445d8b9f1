// Encoding of job specs (ToJson: what GET /v1/jobs shows and what the store keeps, read back by
// ParseJobSpec in job_spec.cpp: a spec read back is the same spec) and the enums' names.

#include "core/json.h"

namespace shepherd {

Json ToJson(const JobSpec& s) {
  Json par = s.parallelism.automatic
                 ? Json("auto")
                 : Json{{"tp", s.parallelism.tp},  {"pp", s.parallelism.pp},
                        {"dp", s.parallelism.dp},  {"zero_stage", s.parallelism.zero_stage},
                        {"cp", s.parallelism.cp},  {"ep", s.parallelism.ep},
                        {"vpp", s.parallelism.vpp}};
  if (!s.parallelism.automatic && s.parallelism.etp) par["etp"] = *s.parallelism.etp;
  if (!s.parallelism.automatic && s.parallelism.sequence_parallel)
    par["sequence_parallel"] = *s.parallelism.sequence_parallel;
  if (!s.parallelism.automatic && !s.parallelism.pipeline_layers.empty())
    par["pipeline_layers"] = s.parallelism.pipeline_layers;
  Json res = {{"gpus", s.resources.gpus}, {"gpus_per_node", s.resources.gpus_per_node}};
  if (s.resources.gpu_memory_gib) res["gpu_memory_gib"] = *s.resources.gpu_memory_gib;
  if (!s.resources.gpu.empty()) res["gpu"] = s.resources.gpu;
  res["spare_nodes"] = s.resources.spare_nodes;
  Json checkpoint = {{"dir", s.checkpoint.dir}, {"every_steps", s.checkpoint.every_steps}};
  if (s.checkpoint.save_s) checkpoint["save_s"] = *s.checkpoint.save_s;
  Json model = {{"layers", s.model.layers},
                {"hidden", s.model.hidden},
                {"heads", s.model.heads},
                {"seq_len", s.model.seq_len},
                {"vocab", s.model.vocab},
                {"mlp", s.model.mlp == Mlp::kSwiglu ? "swiglu" : "gelu"},
                {"norm", s.model.norm == Norm::kRmsNorm ? "rmsnorm" : "layernorm"},
                {"tied_embeddings", s.model.tied_embeddings}};
  if (s.model.parameters_given()) model["parameters"] = s.model.parameters;
  if (s.model.kv_heads > 0) model["kv_heads"] = s.model.kv_heads;
  if (s.model.head_dim > 0) model["head_dim"] = s.model.head_dim;
  if (s.model.ffn_hidden > 0) model["ffn_hidden"] = s.model.ffn_hidden;
  if (s.model.dropout) model["dropout"] = *s.model.dropout;
  if (s.model.window > 0) model["window"] = s.model.window;
  if (s.model.full_attention_every > 0) model["full_attention_every"] = s.model.full_attention_every;
  if (const MoeSpec& e = s.model.moe; e.enabled()) {
    Json moe = {{"experts", e.experts}, {"top_k", e.top_k}, {"shared_experts", e.shared_experts}};
    if (e.expert_ffn_hidden > 0) moe["expert_ffn_hidden"] = e.expert_ffn_hidden;
    if (e.moe_layers > 0) moe["moe_layers"] = e.moe_layers;
    if (e.moe_layer_freq > 0) moe["moe_layer_freq"] = e.moe_layer_freq;
    model["moe"] = moe;
  }
  if (s.model.mtp_layers > 0) model["mtp_layers"] = s.model.mtp_layers;
  if (const MlaSpec& a = s.model.mla; a.enabled())
    model["mla"] = {{"q_lora_rank", a.q_lora_rank},
                    {"kv_lora_rank", a.kv_lora_rank},
                    {"qk_nope_head_dim", a.qk_nope_head_dim},
                    {"qk_rope_head_dim", a.qk_rope_head_dim},
                    {"v_head_dim", a.v_head_dim}};
  const Policy& p = s.policy;
  Json out = {
      {"name", s.name},
      {"model", model},
      {"training",
       {{"micro_batch_size", s.training.micro_batch_size},
        {"global_batch_size", s.training.global_batch_size},
        {"precision", ToString(s.training.precision)},
        {"optimizer", ToString(s.training.optimizer)},
        {"activation_recompute", ToString(s.training.activation_recompute)},
        {"framework", ToString(s.training.framework)},
        {"attention", s.training.attention == Attention::kEager ? "eager" : "flash"},
        {"cross_entropy_fp32", s.training.cross_entropy_fp32},
        {"tp_comm_overlap", s.training.tp_comm_overlap},
        {"moe_a2a_overlap", s.training.moe_a2a_overlap},
        {"moe_dispatcher", ToString(s.training.moe_dispatcher)},
        {"fp8_param_gather", s.training.fp8_param_gather}}},
      {"parallelism", par},
      {"resources", res},
      {"command", s.command},
      {"env", s.env},
      {"external_id", s.external_id},
      {"checkpoint", checkpoint},
      {"policy",
       {{"heartbeat_interval_s", p.heartbeat_interval_s},
        {"heartbeat_timeout_s", p.heartbeat_timeout_s},
        {"startup_grace_s", p.startup_grace_s},
        {"hang_timeout_s", p.hang_timeout_s},
        {"progress_timeout_s", p.progress_timeout_s},
        {"sdc_check_every_steps", p.sdc_check_every_steps},
        {"max_restarts", p.max_restarts},
        {"restart_backoff_s", p.restart_backoff_s},
        {"use_spares", p.use_spares},
        {"straggler_factor", p.straggler_factor},
        {"straggler_window_steps", p.straggler_window_steps},
        {"straggler_action", ToString(p.straggler_action)},
        {"loss_spike_factor", p.loss_spike_factor},
        {"good_after_steps", p.good_after_steps},
        {"loss_divergence_steps", p.loss_divergence_steps},
        {"on_reproducible_anomaly", ToString(p.on_reproducible_anomaly)},
        {"no_progress_attempts", p.no_progress_attempts},
        {"min_progress_steps", p.min_progress_steps},
        {"crash_step_window", p.crash_step_window},
        {"poisoned_checkpoint_steps", p.poisoned_checkpoint_steps},
        {"launch_timeout_s", p.launch_timeout_s},
        {"external_remediation", ToString(p.external_remediation)}}},
      {"gpu_binding", s.gpu_binding == GpuBinding::kPerProcess ? "per_process" : "per_node"},
      {"launcher", s.launch_mode == LaunchMode::kSlurm ? "slurm" : "agents"},
  };
  if (s.training.grad_reduce_in_fp32)
    out["training"]["grad_reduce_in_fp32"] = *s.training.grad_reduce_in_fp32;
  if (s.training.cpu_offload_layers > 0)
    out["training"]["cpu_offload_layers"] = s.training.cpu_offload_layers;
  if (s.training.bf16_optimizer_states) out["training"]["optimizer_dtype"] = "bf16";
  if (s.training.recompute_num_layers > 0)
    out["training"]["recompute_num_layers"] = s.training.recompute_num_layers;
  if (s.training.activation_recompute == Recompute::kSelective &&
      s.training.recompute_modules != RecomputeModules{}) {
    const RecomputeModules& m = s.training.recompute_modules;
    Json modules = Json::array();
    if (m.core_attn) modules.push_back("core_attn");
    if (m.layernorm) modules.push_back("layernorm");
    if (m.moe_act) modules.push_back("moe_act");
    if (m.mla_up_proj) modules.push_back("mla_up_proj");
    if (m.mlp) modules.push_back("mlp");
    out["training"]["recompute_modules"] = modules;
  }
  if (s.launch_mode == LaunchMode::kSlurm)
    out["slurm"] = {{"allocation", s.slurm.allocation}, {"sbatch_args", s.slurm.sbatch_args}};
  return out;
}

const char* ToString(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}
const char* ToString(Framework f) {
  return f == Framework::kFsdp ? "fsdp" : f == Framework::kDeepSpeed ? "deepspeed" : "megatron";
}
const char* ToString(Optimizer o) {
  return o == Optimizer::kAdam ? "adam" : "sgd";
}
const char* ToString(Recompute r) {
  return r == Recompute::kNone ? "none" : r == Recompute::kFull ? "full" : "selective";
}
const char* ToString(MoeDispatcher d) {
  return d == MoeDispatcher::kDeepEp ? "deepep" : d == MoeDispatcher::kHybridEp ? "hybridep" : "alltoall";
}

}  // namespace shepherd
