#include "scheduler/planner.h"

#include <cstdarg>
#include <cstdio>

#include "scheduler/comm_model.h"
#include "scheduler/memory_model.h"
#include "scheduler/planner_internal.h"

namespace shepherd {

namespace planner_internal {

std::vector<FieldError> ValidateSpec(const JobSpec& spec, const Hardware& hw) {
  std::vector<FieldError> errors;
  auto require = [&errors](bool ok, const char* field, std::string message) {
    if (!ok) errors.push_back({field, std::move(message)});
  };
  const ModelSpec& m = spec.model;
  require(m.parameters > 0, "model.parameters", "must be positive");
  require(m.layers > 0, "model.layers", "must be positive");
  require(m.hidden > 0, "model.hidden", "must be positive");
  require(m.heads > 0, "model.heads", "must be positive");
  require(m.seq_len > 0, "model.seq_len", "must be positive");
  require(m.vocab >= 0, "model.vocab", "must not be negative");
  if (m.hidden > 0 && m.heads > 0) {
    require(m.hidden % m.heads == 0, "model.heads", "must divide model.hidden");
  }
  if (m.parameters > 0 && m.hidden > 0 && m.vocab > 0) {
    require(2.0 * m.vocab * m.hidden < m.parameters, "model.vocab",
            "embedding and untied output layer (2·vocab·hidden) exceed model.parameters");
  }
  require(spec.training.global_batch_size > 0, "training.global_batch_size", "must be positive");
  require(spec.resources.gpus > 0, "resources.gpus", "must be positive");
  require(hw.gpu_memory_bytes > 0, "resources.gpu_memory_gib", "must be positive");
  require(hw.nvlink_domain_gpus > 0, "resources.gpus_per_node", "must be positive");
  require(hw.nvlink_bytes_per_s > 0 && hw.ib_bytes_per_s > 0 && hw.peak_flops > 0 && hw.mfu > 0 &&
              hw.memory_headroom > 0,
          "hardware", "bandwidths, peak_flops, mfu and memory_headroom must be positive");
  return errors;
}

std::vector<FieldError> ValidateLayout(const JobSpec& spec, const Plan& p, const Hardware& hw) {
  std::vector<FieldError> errors;
  auto fail = [&errors](const char* field, std::string message) {
    errors.push_back({field, std::move(message)});
  };
  const ModelSpec& m = spec.model;
  if (p.tp < 1) fail("parallelism.tp", "must be at least 1");
  if (p.pp < 1) fail("parallelism.pp", "must be at least 1");
  if (p.dp < 1) fail("parallelism.dp", "must be at least 1");
  if (p.zero_stage < 0 || p.zero_stage > 3) fail("parallelism.zero_stage", "must be 0, 1, 2 or 3");
  if (p.micro_batch_size < 1) fail("training.micro_batch_size", "must be positive");
  if (!errors.empty()) return errors;
  if (m.heads % p.tp != 0)
    fail("parallelism.tp", Format("%d does not divide model.heads (%d)", p.tp, m.heads));
  if (p.tp > hw.nvlink_domain_gpus) {
    fail("parallelism.tp", Format("%d exceeds the NVLink domain (%d GPUs); TP groups must stay inside one",
                                  p.tp, hw.nvlink_domain_gpus));
  }
  if (m.layers % p.pp != 0) {
    fail("parallelism.pp", Format("%d does not divide model.layers (%d)", p.pp, m.layers));
  }
  const long long world = static_cast<long long>(p.tp) * p.pp * p.dp;
  if (world != spec.resources.gpus) {
    fail("parallelism.dp",
         Format("tp·pp·dp = %lld must equal resources.gpus (%d)", world, spec.resources.gpus));
  }
  const long long per_micro_step = static_cast<long long>(p.micro_batch_size) * p.dp;
  if (spec.training.global_batch_size % per_micro_step != 0) {
    fail("training.global_batch_size", Format("%d is not divisible by micro_batch_size·dp = %lld",
                                              spec.training.global_batch_size, per_micro_step));
  }
  return errors;
}

double UsableBytes(const Hardware& hw) {
  return hw.gpu_memory_bytes * hw.memory_headroom;
}

PlanEstimate Estimate(const JobSpec& spec, const Plan& plan, const Hardware& hw) {
  PlanEstimate e;
  e.plan = plan;
  e.memory = WorstStageMemory(spec, plan);
  e.gpu_memory_bytes = hw.gpu_memory_bytes;
  e.fits = e.memory.total <= UsableBytes(hw);
  e.bubble_fraction = BubbleFraction(plan.pp, plan.micro_batches);
  e.comm = EstimateCommBytes(spec, plan);
  const StepTime t = EstimateStepTime(spec, plan, e.comm, e.bubble_fraction, hw);
  e.compute_time_s = t.compute;
  e.comm_time_s = t.comm();
  e.step_time_s = t.step;
  return e;
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
  return Format("tp=%d pp=%d dp=%d ZeRO-%d, %d micro-batch%s of %d", p.tp, p.pp, p.dp, p.zero_stage,
                p.micro_batches, p.micro_batches == 1 ? "" : "es", p.micro_batch_size);
}

std::string DescribeEstimate(const PlanEstimate& e, const Hardware& hw) {
  const MemoryBreakdown& m = e.memory;
  constexpr double kGB = 1e9;
  std::string s = Format(
      "memory per GPU %.1f GB on the worst stage (weights %.1f, gradients %.1f, optimizer %.1f, master "
      "%.1f, activations %.1f GB) %s the %.1f GB usable (%.0f%% of %.1f GB)",
      m.total / kGB, m.weights / kGB, m.gradients / kGB, m.optimizer / kGB, m.master_weights / kGB,
      m.activations / kGB, e.fits ? "fits in" : "exceeds", UsableBytes(hw) / kGB, hw.memory_headroom * 100,
      hw.gpu_memory_bytes / kGB);
  s += Format(
      "; step %.3g s = compute %.3g s / (1 - bubble %.1f%%) + communication on the critical path "
      "(%.3g s of %.3g s in total)",
      e.step_time_s, e.compute_time_s, e.bubble_fraction * 100,
      e.step_time_s - e.compute_time_s / (1 - e.bubble_fraction), e.comm_time_s);
  return s;
}

}  // namespace planner_internal

using namespace planner_internal;

Hardware HardwareForResources(const Resources& r, double default_gpu_memory_gib) {
  Hardware hw;
  hw.gpu_memory_bytes = r.gpu_memory_gib.value_or(default_gpu_memory_gib) * (1ull << 30);
  hw.nvlink_domain_gpus = r.gpus_per_node;
  return hw;
}

Result<PlanEstimate> EvaluatePlan(const JobSpec& spec, const Plan& given, const Hardware& hw) {
  std::vector<FieldError> errors = ValidateSpec(spec, hw);
  if (errors.empty()) errors = ValidateLayout(spec, given, hw);
  if (!errors.empty()) return InvalidContent("invalid parallel plan", std::move(errors));
  Plan plan = given;
  plan.micro_batches = spec.training.global_batch_size / (plan.micro_batch_size * plan.dp);
  PlanEstimate e = Estimate(spec, plan, hw);
  e.explanation = Describe(plan) + ": " + DescribeEstimate(e, hw) + ".";
  return e;
}

Result<PlanEstimate> PlanJob(const JobSpec& spec, const Hardware& hw) {
  if (spec.parallelism.automatic) return AutoPlan(spec, hw);
  Plan plan;
  plan.tp = spec.parallelism.tp;
  plan.pp = spec.parallelism.pp;
  plan.dp = spec.parallelism.dp;
  plan.zero_stage = spec.parallelism.zero_stage;
  plan.micro_batch_size = spec.training.micro_batch_size;
  return EvaluatePlan(spec, plan, hw);
}

}  // namespace shepherd
