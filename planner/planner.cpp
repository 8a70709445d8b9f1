#include "planner/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <optional>

#include "planner/comm_model.h"
#include "planner/gpu_profiles.h"
#include "planner/layout_costs.h"
#include "planner/memory_model.h"
#include "planner/model_arch.h"
#include "planner/pipeline_layout.h"
#include "planner/planner_internal.h"

namespace shepherd {

namespace planner_internal {

namespace {

using Require = std::function<void(bool ok, const char* field, std::string message)>;

// The model's sizes, its attention's heads and its embeddings against model.parameters.
void ModelErrors(const ModelSpec& m, const Require& require) {
  require(m.parameters >= 0, "model.parameters", "must be positive when given");
  require(m.layers > 0, "model.layers", "must be positive");
  require(m.hidden > 0, "model.hidden", "must be positive");
  require(m.heads > 0, "model.heads", "must be positive");
  require(m.seq_len > 0, "model.seq_len", "must be positive");
  require(m.vocab >= 0, "model.vocab", "must not be negative");
  require(m.mtp_layers >= 0, "model.mtp_layers", "must not be negative");
  require(m.kv_heads >= 0 && m.ffn_hidden >= 0 && m.head_dim >= 0, "model",
          "kv_heads, head_dim and ffn_hidden must be positive when given");
  if (m.mla.enabled()) {
    const MlaSpec& a = m.mla;
    require(a.q_lora_rank >= 0 && a.qk_nope_head_dim >= 0 && a.qk_rope_head_dim >= 0 && a.v_head_dim > 0 &&
                a.qk_head_dim() > 0,
            "model.mla", "head widths must be positive (qk_nope_head_dim + qk_rope_head_dim, v_head_dim)");
    require(m.kv_heads == 0 || m.kv_heads == m.heads, "model.kv_heads",
            "multi-head latent attention gives every head its own K and V: leave kv_heads out");
    require(m.head_dim == 0, "model.head_dim", "give model.mla's head widths instead");
  } else if (m.hidden > 0 && m.heads > 0) {
    require(m.head_dim > 0 || m.hidden % m.heads == 0, "model.heads",
            "must divide model.hidden (or give model.head_dim)");
    require(m.heads % m.kv() == 0, "model.kv_heads", "must divide model.heads");
  }
  if (m.parameters > 0 && m.hidden > 0 && m.vocab > 0) {
    const double embeddings = (m.tied_embeddings ? 1.0 : 2.0) * m.vocab * m.hidden;
    require(embeddings < m.parameters, "model.vocab",
            "the embedding and output layer (vocab·hidden each) exceed model.parameters");
  }
  if (m.moe.enabled()) {
    require(m.moe.top_k >= 1 && m.moe.top_k <= m.moe.experts, "model.moe.top_k",
            "must be between 1 and model.moe.experts");
    require(m.moe.count(m.layers) <= m.layers, "model.moe.moe_layers", "must not exceed model.layers");
    require(m.moe.expert_ffn_hidden >= 0 && m.moe.shared_experts >= 0, "model.moe",
            "expert_ffn_hidden and shared_experts must not be negative");
  }
}

// Training options against the model and the GPU, for every layout.
void TrainingErrors(const JobSpec& spec, const Hardware& hw, const Require& require) {
  const ModelSpec& m = spec.model;
  const TrainingSpec& t = spec.training;
  require(t.precision != Precision::kFp8 || hw.peak_fp8_flops > 0, "training.precision",
          "\"fp8\" needs FP8 tensor cores, which " + hw.gpu + " does not have");
  require(!t.fp8_param_gather || t.precision == Precision::kFp8, "training.fp8_param_gather",
          "needs training.precision \"fp8\"");
  require(!t.recompute_modules.mla_up_proj || m.mla.enabled(), "training.recompute_modules",
          "\"mla_up_proj\" needs model.mla (multi-head latent attention)");
  require(t.global_batch_size > 0, "training.global_batch_size", "must be positive");
  require(t.moe_dispatcher == MoeDispatcher::kAllToAll || m.moe.enabled(), "training.moe_dispatcher",
          "needs a mixture-of-experts model (model.moe)");
  if (t.moe_a2a_overlap) {
    // Megatron-Core's TransformerConfig asserts these for overlap_moe_expert_parallel_comm.
    require(m.moe.enabled(), "training.moe_a2a_overlap", "needs a mixture-of-experts model (model.moe)");
    require(t.framework == Framework::kMegatron, "training.moe_a2a_overlap",
            "is Megatron-Core's combined 1F1B schedule: needs training.framework \"megatron\"");
    require(t.precision != Precision::kFp32, "training.moe_a2a_overlap",
            "needs a 16-bit model (training.precision bf16, fp16 or fp8)");
    require(m.mtp_layers <= 1, "training.moe_a2a_overlap", "supports at most one MTP depth (model.mtp_layers)");
  }
  const int offload = t.cpu_offload_layers;
  require(offload >= 0 && (offload == 0 || offload < m.layers), "training.cpu_offload_layers",
          "must be below model.layers (the last layer's activations stay on the GPU)");
  require(offload == 0 || t.activation_recompute == Recompute::kNone, "training.cpu_offload_layers",
          "needs training.activation_recompute \"none\"");
}

// The GPUs and the hardware profile.
void ResourceErrors(const JobSpec& spec, const Hardware& hw, const Require& require) {
  require(spec.resources.gpus > 0, "resources.gpus", "must be positive");
  require(hw.gpu_memory_bytes > 0, "resources.gpu_memory_gib", "must be positive");
  require(hw.nvlink_domain_gpus > 0, "resources.gpus_per_node", "must be positive");
  require(hw.nvlink_bytes_per_s > 0 && hw.ib_bytes_per_s > 0 && hw.peak_flops > 0 && hw.peak_fp8_flops >= 0 &&
              hw.matmul_efficiency > 0 && hw.matmul_half_size >= 0 && hw.memory_headroom > 0,
          "hardware", "bandwidths, peak FLOP/s, matmul efficiency and memory_headroom must be positive");
}

}  // namespace

std::vector<FieldError> ValidateSpec(const JobSpec& spec, const Hardware& hw) {
  std::vector<FieldError> errors;
  const Require require = [&errors](bool ok, const char* field, std::string message) {
    if (!ok) errors.push_back({field, std::move(message)});
  };
  ModelErrors(spec.model, require);
  TrainingErrors(spec, hw, require);
  ResourceErrors(spec, hw, require);
  return errors;
}

namespace {

// Tensor and context parallelism against the model and the NVLink domain.
void TensorAndContextErrors(const JobSpec& spec, const Plan& p, const Hardware& hw,
                            std::vector<FieldError>* errors) {
  const ModelSpec& m = spec.model;
  auto fail = [errors](const char* field, std::string message) {
    errors->push_back({field, std::move(message)});
  };
  if (m.heads % p.tp != 0)
    fail("parallelism.tp", Format("%d does not divide model.heads (%d)", p.tp, m.heads));
  else if (m.kv() % p.tp != 0)
    fail("parallelism.tp",
         Format("%d does not divide model.kv_heads (%d): each TP rank needs whole KV heads", p.tp, m.kv()));
  if (p.tp > hw.nvlink_domain_gpus) {
    fail("parallelism.tp", Format("%d exceeds the NVLink domain (%d GPUs); TP groups must stay inside one",
                                  p.tp, hw.nvlink_domain_gpus));
  }
  if (p.cp > 1 && m.seq_len % (2 * p.cp) != 0) {
    fail("parallelism.cp",
         Format("2·cp = %d does not divide model.seq_len (%d) (load-balanced causal chunks)", 2 * p.cp,
                m.seq_len));
  }
}

// Training options that need (or refuse) a particular layout.
void TrainingOptionErrors(const JobSpec& spec, const Plan& p, const Hardware& hw,
                          std::vector<FieldError>* errors) {
  const ModelSpec& m = spec.model;
  auto fail = [errors](const char* field, std::string message) {
    errors->push_back({field, std::move(message)});
  };
  if (spec.training.fp8_param_gather && p.zero_stage < 1) {
    fail("training.fp8_param_gather",
         "needs the distributed optimizer (zero_stage >= 1) or fsdp: FP8 parameters are gathered from the "
         "optimizer's shards");
  }
  if (spec.training.cpu_offload_layers > 0 && p.pp > 1) {
    fail("training.cpu_offload_layers",
         "needs parallelism.pp 1 (Megatron-Core offloads activations only without pipeline parallelism)");
  }
  if (spec.training.tp_comm_overlap && p.tp > 1 && !p.sequence_parallel) {
    fail("training.tp_comm_overlap",
         "needs sequence parallelism (the overlapped collectives are its all-gathers and reduce-scatters)");
  }
  if (spec.training.moe_a2a_overlap) {
    if (p.ep < 2)
      fail("training.moe_a2a_overlap", "needs parallelism.ep > 1 (it overlaps the EP all-to-alls)");
    if (p.pp > 1 && p.vpp < 2)
      fail("training.moe_a2a_overlap",
           "with pp > 1 needs parallelism.vpp > 1 (Megatron-Core pairs the chunks of the interleaved "
           "schedule)");
    if (spec.training.activation_recompute == Recompute::kFull)
      fail("training.moe_a2a_overlap", "does not run with training.activation_recompute \"full\"");
  }
  if (spec.training.framework == Framework::kDeepSpeed && p.pp > 1) {
    // DeepSpeed's PipelineEngine asserts ZeRO stage < 2 and runs one (non-interleaved) 1F1B schedule.
    if (p.zero_stage >= 2)
      fail("parallelism.zero_stage",
           Format("ZeRO-%d with pp > 1: DeepSpeed's pipeline engine supports ZeRO stage 0 or 1",
                  p.zero_stage));
    if (p.vpp > 1)
      fail("parallelism.vpp", "DeepSpeed's pipeline schedule is not interleaved (vpp must be 1)");
  }
  if (spec.training.framework == Framework::kMegatron && m.moe.enabled() && p.ep > 1 && p.tp > 1 &&
      !p.sequence_parallel) {
    fail("parallelism.sequence_parallel",
         "expert parallelism with tensor parallelism needs sequence parallelism (Megatron-Core refuses it "
         "without)");
  }
  if (p.cp > 1 && spec.training.attention == Attention::kEager) {
    fail("parallelism.cp",
         "context parallelism needs training.attention \"flash\" (ring attention exchanges "
         "K/V blocks inside a fused attention kernel)");
  }
}

// Expert parallelism: ep and etp against the experts and the ranks of a stage.
void ExpertErrors(const JobSpec& spec, const Plan& p, const Hardware& hw, std::vector<FieldError>* errors) {
  const ModelSpec& m = spec.model;
  auto fail = [errors](const char* field, std::string message) {
    errors->push_back({field, std::move(message)});
  };
  if (p.ep > 1) {
    if (!m.moe.enabled())
      fail("parallelism.ep", "ep > 1 needs a mixture-of-experts model (model.moe)");
    else if (m.moe.experts % p.ep != 0)
      fail("parallelism.ep", Format("%d does not divide model.moe.experts (%d)", p.ep, m.moe.experts));
  }
  const int etp = p.expert_tp();
  if (etp != p.tp) {
    if (!m.moe.enabled())
      fail("parallelism.etp", "an expert tensor parallel size other than tp needs model.moe");
    else if (p.tp > 1 && !p.sequence_parallel)
      fail("parallelism.etp",
           "an expert tensor parallel size other than tp needs sequence parallelism (the experts take the "
           "tokens each rank holds)");
    if (etp > hw.nvlink_domain_gpus)
      fail("parallelism.etp", Format("%d exceeds the NVLink domain (%d GPUs)", etp, hw.nvlink_domain_gpus));
  }
  const long long stage_ranks = static_cast<long long>(p.tp) * p.cp * p.dp;
  if (m.moe.enabled() && p.ep >= 1 && m.moe.experts % p.ep == 0 &&
      stage_ranks % (static_cast<long long>(etp) * p.ep) != 0) {
    const std::string why =
        Format("etp·ep = %d·%d does not divide tp·cp·dp = %lld: the experts' grid folds the ranks of a stage",
               etp, p.ep, stage_ranks);
    if (p.ep > 1) fail("parallelism.ep", why);
    if (etp != p.tp) fail("parallelism.etp", why);
  }
}

// Pipeline stages, their layers and the virtual stages they can hold.
void PipelineErrors(const JobSpec& spec, const Plan& p, const Hardware& hw, std::vector<FieldError>* errors) {
  const ModelSpec& m = spec.model;
  auto fail = [errors](const char* field, std::string message) {
    errors->push_back({field, std::move(message)});
  };
  if (p.pp > m.layers) fail("parallelism.pp", Format("%d stages exceed model.layers (%d)", p.pp, m.layers));
  if (!p.pipeline_layers.empty()) {
    long long sum = 0;
    bool positive = true;
    for (int l : p.pipeline_layers) {
      sum += l;
      positive = positive && l >= 1;
    }
    if (static_cast<int>(p.pipeline_layers.size()) != p.pp || sum != m.layers || !positive) {
      fail("parallelism.pipeline_layers",
           Format("must list pp = %d positive layer counts summing to model.layers (%d)", p.pp, m.layers));
    }
  }
  if (p.vpp > 1) {
    if (p.pp == 1) {
      fail("parallelism.vpp", "interleaving needs pp > 1");
    } else if (p.pp <= m.layers &&
               (p.pipeline_layers.empty() || static_cast<int>(p.pipeline_layers.size()) == p.pp)) {
      const int most = MaxVirtualStages(StageLayers(m.layers, p.pp, p.pipeline_layers));
      if (p.vpp > most) {
        fail("parallelism.vpp", Format("%d virtual stages exceed the %d a stage can hold (its layers; the "
                                       "embedding and the output layer count as one each)",
                                       p.vpp, most));
      }
    }
  }
}

// The layout against resources.gpus and the batch.
void SizeErrors(const JobSpec& spec, const Plan& p, const Hardware& hw, std::vector<FieldError>* errors) {
  auto fail = [errors](const char* field, std::string message) {
    errors->push_back({field, std::move(message)});
  };
  const long long world = static_cast<long long>(p.tp) * p.cp * p.pp * p.dp;
  if (world != spec.resources.gpus) {
    fail("parallelism.dp",
         Format("tp·cp·pp·dp = %lld must equal resources.gpus (%d)", world, spec.resources.gpus));
  }
  const long long per_micro_step = static_cast<long long>(p.micro_batch_size) * p.dp;
  if (spec.training.global_batch_size % per_micro_step != 0) {
    fail("training.global_batch_size", Format("%d is not divisible by micro_batch_size·dp = %lld",
                                              spec.training.global_batch_size, per_micro_step));
  } else if (p.vpp > 1 && p.pp > 1 && spec.training.global_batch_size / per_micro_step < p.pp) {
    // Megatron-Core's interleaved schedule raises unless pp <= its micro-batch group <= M; with fewer
    // micro-batches than stages every chunk runs in turn and interleaving removes no bubble.
    fail("parallelism.vpp",
         Format("interleaving needs at least pp = %d micro-batches per step; global_batch_size / "
                "(micro_batch_size·dp) = %lld",
                p.pp, spec.training.global_batch_size / per_micro_step));
  }
}

}  // namespace

std::vector<FieldError> ValidateLayout(const JobSpec& spec, const Plan& p, const Hardware& hw) {
  std::vector<FieldError> errors;
  auto fail = [&errors](const char* field, std::string message) {
    errors.push_back({field, std::move(message)});
  };
  if (p.tp < 1) fail("parallelism.tp", "must be at least 1");
  if (p.cp < 1) fail("parallelism.cp", "must be at least 1");
  if (p.pp < 1) fail("parallelism.pp", "must be at least 1");
  if (p.dp < 1) fail("parallelism.dp", "must be at least 1");
  if (p.vpp < 1) fail("parallelism.vpp", "must be at least 1");
  if (p.ep < 1) fail("parallelism.ep", "must be at least 1");
  if (p.etp < 0) fail("parallelism.etp", "must be at least 1");
  if (p.zero_stage < 0 || p.zero_stage > 3) fail("parallelism.zero_stage", "must be 0, 1, 2 or 3");
  if (p.micro_batch_size < 1) fail("training.micro_batch_size", "must be positive");
  if (!errors.empty()) return errors;
  TensorAndContextErrors(spec, p, hw, &errors);
  TrainingOptionErrors(spec, p, hw, &errors);
  ExpertErrors(spec, p, hw, &errors);
  PipelineErrors(spec, p, hw, &errors);
  SizeErrors(spec, p, hw, &errors);
  return errors;
}

double UsableBytes(const Hardware& hw) {
  return hw.gpu_memory_bytes * hw.memory_headroom;
}

PlanEstimate Estimate(const JobSpec& spec, const Plan& plan, const Hardware& hw) {
  return Estimate(spec, plan, hw, ModelCountsOf(spec.model));
}

PlanEstimate Estimate(const JobSpec& spec, const Plan& plan, const Hardware& hw, const ModelCounts& counts) {
  PlanEstimate e;
  e.plan = plan;
  e.activation_recompute = spec.training.activation_recompute;
  e.recompute_num_layers = spec.training.recompute_num_layers;
  const LayoutCosts costs = LayoutCostsOf(spec, plan, hw, counts);  // the candidate's table, built once
  e.memory = WorstStageMemory(spec, plan, costs.stage_layers, costs.memory);
  e.stage_layers = costs.stage_layers;
  e.gpu_memory_bytes = hw.gpu_memory_bytes;
  e.nvlink_domain_gpus = hw.nvlink_domain_gpus;
  e.usable_memory_bytes = UsableBytes(hw);
  e.fits = e.memory.total <= UsableBytes(hw);
  e.comm = costs.comm;
  const StepTime t = StepTimeOf(spec, plan, hw, costs);
  e.bubble_fraction = t.bubble / (t.compute + t.bubble);
  e.compute_time_s = t.compute;
  e.comm_time_s = t.comm();
  e.exposed_comm_s = t.exposed;
  e.step_time_s = t.step;
  e.model_parameters = counts.parameters;
  e.activated_parameters = counts.activated;
  const double tokens = static_cast<double>(spec.training.global_batch_size) * spec.model.seq_len;
  e.tokens_per_s = tokens / t.step;
  e.tflops_per_gpu = counts.flops_per_token * e.tokens_per_s / plan.world_size() / 1e12;
  const double peak = spec.training.precision == Precision::kFp8 ? hw.peak_fp8_flops : hw.peak_flops;
  e.mfu = e.tflops_per_gpu * 1e12 / peak;
  return e;
}

std::string ParameterNote(const ModelSpec& m) {
  const std::string activated =
      m.moe.enabled() ? Format(" (%.4g activated per token)", CountActivatedParams(m)) : "";
  if (!m.parameters_given()) {
    return Format("model_parameters %.4g%s counted from the architecture. ", CountParams(m),
                  activated.c_str());
  }
  const double counted = CountParams(m);
  const double off = m.parameters / counted - 1;
  if (std::abs(off) <= 0.05) return "";
  return Format(
      "model.parameters %.4g is %+.1f%% off the %.4g the architecture counts (layers, hidden, "
      "heads, kv_heads, head_dim, mla, ffn_hidden, mlp, moe, vocab); the planner uses the given value. ",
      m.parameters, 100 * off, counted);
}

std::string Format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? n : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

std::string Describe(const Plan& p) {
  std::string s = Format("tp=%d", p.tp);
  if (p.cp > 1) s += Format(" cp=%d", p.cp);
  if (p.ep > 1) s += Format(" ep=%d", p.ep);
  if (p.expert_tp() != p.tp) s += Format(" etp=%d", p.expert_tp());
  s += Format(" pp=%d", p.pp);
  if (p.vpp > 1) s += Format(" vpp=%d", p.vpp);
  s += Format(" dp=%d ZeRO-%d, %d micro-batch%s of %d", p.dp, p.zero_stage, p.micro_batches,
              p.micro_batches == 1 ? "" : "es", p.micro_batch_size);
  return s;
}

std::string DescribeEstimate(const PlanEstimate& e, const Hardware& hw) {
  const MemoryBreakdown& m = e.memory;
  constexpr double kGB = 1e9;
  std::string s = Format(
      "memory per GPU %.1f GB on stage %d, the worst (weights %.1f, gradients %.1f, optimizer %.1f, master "
      "%.1f, activations %.1f, working %.1f GB) %s the %.1f GB usable (%.0f%% of %.1f GB)",
      m.total / kGB, m.stage, m.weights / kGB, m.gradients / kGB, m.optimizer / kGB, m.master_weights / kGB,
      m.activations / kGB, m.working / kGB, e.fits ? "fits in" : "exceeds", UsableBytes(hw) / kGB,
      hw.memory_headroom * 100, hw.gpu_memory_bytes / kGB);
  s += Format(
      "; step %.3g s = compute %.3g s + bubble (%.1f%%) + exposed communication %.3g s (of %.3g s in "
      "total); %.0f TFLOP/s per GPU of model FLOPs, MFU %.1f%%, %.3g tokens/s",
      e.step_time_s, e.compute_time_s, e.bubble_fraction * 100, e.exposed_comm_s, e.comm_time_s,
      e.tflops_per_gpu, 100 * e.mfu, e.tokens_per_s);
  return s;
}

}  // namespace planner_internal

using namespace planner_internal;

Hardware HardwareForResources(const Resources& r, double default_gpu_memory_gib) {
  Hardware hw;
  hw.gpu_memory_bytes = r.gpu_memory_gib.value_or(default_gpu_memory_gib) * (1ull << 30);
  hw.nvlink_domain_gpus = r.gpus_per_node;
  if (std::optional<GpuProfile> g = FindGpuProfile(r.gpu.empty() ? kH100Sxm.name : r.gpu)) {
    hw.gpu = g->name;
    hw.peak_flops = g->peak_bf16_flops;
    hw.peak_fp8_flops = g->peak_fp8_flops;
    hw.nvlink_bytes_per_s = g->nvlink_bytes_per_s;
    hw.ib_bytes_per_s = g->net_bytes_per_s;
    hw.hbm_bytes_per_s = g->hbm_bytes_per_s;
    hw.matmul_efficiency *= g->sustained * g->gemm_bf16 / kReferenceGemmShare;
    hw.fp8_gemm_ratio = g->gemm_fp8 > 0 ? g->gemm_fp8 / g->gemm_bf16 : 1;  // no fp8: never used
    hw.attention_efficiency = g->attention_efficiency * g->sustained;
    hw.host_bytes_per_s = g->host_bytes_per_s;
    if (!r.gpu.empty() && !r.gpu_memory_gib) hw.gpu_memory_bytes = g->memory_bytes;
    if (!r.gpu.empty()) hw.nvlink_domain_gpus = std::max(r.gpus_per_node, g->nvlink_domain_gpus);
  }
  return hw;
}

namespace {

// For a layout that does not fit: the memory per GPU with each single change that needs no other layout
// (full activation recompute, ZeRO-3, micro-batch size 1), and which of them fit, so the answer says what to
// change rather than only that it does not fit.
std::string FitHints(const JobSpec& spec, const Plan& plan, const Hardware& hw) {
  std::vector<std::pair<std::string, PlanEstimate>> hints;
  const TrainingSpec& t = spec.training;
  if (t.activation_recompute != Recompute::kFull) {
    JobSpec full = spec;
    full.training.activation_recompute = Recompute::kFull;
    hints.emplace_back("full activation recompute", Estimate(full, plan, hw));
  }
  if (t.framework != Framework::kFsdp && plan.zero_stage < 3 && plan.dp * plan.cp > 1 &&
      !(t.framework == Framework::kDeepSpeed && plan.pp > 1)) {
    Plan z = plan;
    z.zero_stage = 3;
    hints.emplace_back("ZeRO-3", Estimate(spec, z, hw));
  }
  if (plan.micro_batch_size > 1) {
    Plan m = plan;
    m.micro_batch_size = 1;
    m.micro_batches = t.global_batch_size / plan.dp;
    hints.emplace_back("micro-batch size 1", Estimate(spec, m, hw));
  }
  if (hints.empty()) return "";
  std::string out = " Each change alone:";
  bool any = false;
  for (const auto& [what, e] : hints) {
    out += Format(" %s %.1f GB%s;", what.c_str(), e.memory.total / 1e9, e.fits ? " (fits)" : "");
    any = any || e.fits;
  }
  out.back() = '.';
  if (!any) out += " None fits alone: combine them, or give each model replica more GPUs (tp, pp or cp).";
  return out;
}

}  // namespace

Result<PlanEstimate> EvaluatePlan(const JobSpec& spec, const Plan& given, const Hardware& hw) {
  std::vector<FieldError> errors = ValidateSpec(spec, hw);
  if (errors.empty()) errors = ValidateLayout(spec, given, hw);
  if (!errors.empty()) return InvalidContent("invalid parallel plan", std::move(errors));
  Plan plan = given;
  plan.micro_batches = spec.training.global_batch_size / (plan.micro_batch_size * plan.dp);
  if (spec.training.framework == Framework::kFsdp) plan.zero_stage = 3;  // FSDP2 always shards everything
  PlanEstimate e = Estimate(spec, plan, hw);
  e.explanation = ParameterNote(spec.model) + Describe(plan) + ": " + DescribeEstimate(e, hw) + ".";
  if (!e.fits) e.explanation += FitHints(spec, plan, hw);
  if (plan.vpp > 1 && !EvenVirtualStages(e.stage_layers, plan.vpp))
    e.explanation += Format(
        " vpp %d does not split every stage into equal chunks: Megatron-Core needs a "
        "pipeline_model_parallel_layout for it, and the bubble is priced as if the chunks were equal.",
        plan.vpp);
  return e;
}

bool LeavesOpen(const JobSpec& spec) {
  const ParallelismSpec& p = spec.parallelism;
  const TrainingSpec& t = spec.training;
  return !p.automatic &&
         ((!p.vpp_given && p.pp > 1 && t.framework != Framework::kDeepSpeed) ||
          (!p.zero_stage_given && t.framework != Framework::kFsdp) || !t.micro_batch_size_given ||
          (!t.activation_recompute_given && t.activation_recompute != Recompute::kFull));
}

Result<PlanEstimate> PlanJob(const JobSpec& spec, const Hardware& hw) {
  if (spec.parallelism.automatic) return AutoPlan(spec, hw);
  Plan plan;
  plan.tp = spec.parallelism.tp;
  plan.pp = spec.parallelism.pp;
  plan.dp = spec.parallelism.dp;
  plan.zero_stage = spec.training.framework == Framework::kFsdp ? 3 : spec.parallelism.zero_stage;
  plan.micro_batch_size = spec.training.micro_batch_size;
  plan.cp = spec.parallelism.cp;
  plan.ep = spec.parallelism.ep;
  plan.etp = spec.parallelism.etp.value_or(plan.tp) == plan.tp ? 0 : *spec.parallelism.etp;
  plan.vpp = spec.parallelism.vpp;
  plan.sequence_parallel = spec.parallelism.sequence_parallel.value_or(plan.tp > 1);
  plan.pipeline_layers = spec.parallelism.pipeline_layers;
  return LeavesOpen(spec) ? CompleteLayout(spec, plan, hw) : EvaluatePlan(spec, plan, hw);
}

}  // namespace shepherd
