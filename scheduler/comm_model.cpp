#include "scheduler/comm_model.h"

#include <algorithm>

#include "scheduler/memory_model.h"

namespace shepherd {

namespace {

double ActivationElementBytes(Precision p) {
  return p == Precision::kFp32 ? 4 : 2;
}

}  // namespace

double BubbleFraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / (stages - 1 + micro_batches);
}

double RingAllReduceBytes(double bytes, int n) {
  return 2.0 * (n - 1) / n * bytes;
}

double AllGatherBytes(double bytes, int n) {
  return static_cast<double>(n - 1) / n * bytes;
}

CommBytes EstimateCommBytes(const JobSpec& spec, const Plan& plan) {
  const ModelSpec& m = spec.model;
  const TrainingSpec& t = spec.training;
  const double activation =
      static_cast<double>(m.seq_len) * plan.micro_batch_size * m.hidden * ActivationElementBytes(t.precision);
  const int layers_per_stage = m.layers / plan.pp;
  const int tp_all_reduces_per_layer = t.activation_recompute == Recompute::kFull ? 6 : 4;

  CommBytes c;
  c.tp = static_cast<double>(layers_per_stage) * plan.micro_batches * tp_all_reduces_per_layer *
         RingAllReduceBytes(activation, plan.tp);
  c.pp = plan.pp > 1 ? 2.0 * plan.micro_batches * activation : 0;

  const double params = std::max(StageParamsPerRank(m, plan.tp, plan.pp, 0),
                                 StageParamsPerRank(m, plan.tp, plan.pp, plan.pp - 1));
  const double grad_bytes = params * ModelStateBytesPerParam(t.precision, t.optimizer, 0, 1).gradients;
  const int m_batches = plan.micro_batches;
  const double passes = plan.zero_stage <= 1 ? 2 : plan.zero_stage == 2 ? m_batches + 1 : 2 * m_batches + 1;
  c.dp = passes * AllGatherBytes(grad_bytes, plan.dp);
  return c;
}

StepTime EstimateStepTime(const JobSpec& spec, const Plan& plan, const CommBytes& comm, double bubble,
                          const Hardware& hw) {
  const double flops_per_param_token = spec.training.activation_recompute == Recompute::kFull ? 8 : 6;
  const double tokens = static_cast<double>(spec.training.global_batch_size) * spec.model.seq_len;
  const double gpus = plan.world_size();
  StepTime s;
  s.compute = flops_per_param_token * spec.model.parameters * tokens / (gpus * hw.peak_flops * hw.mfu);

  // Contiguous placement: a group stays inside one NVLink domain when its rank span does.
  const bool dp_in_domain = plan.tp * plan.dp <= hw.nvlink_domain_gpus;
  const bool pp_in_domain = plan.world_size() <= hw.nvlink_domain_gpus;
  s.tp = comm.tp / hw.nvlink_bytes_per_s;
  s.pp = comm.pp / (pp_in_domain ? hw.nvlink_bytes_per_s : hw.ib_bytes_per_s);
  s.dp = comm.dp / (dp_in_domain ? hw.nvlink_bytes_per_s : hw.ib_bytes_per_s);

  // DP traffic hides behind the backward of the last micro-batch (ZeRO 0/1: one reduction at the end of
  // the step), behind every backward (ZeRO-2: a reduce-scatter per micro-batch) or behind all compute
  // (ZeRO-3: all-gathers prefetched during forward and backward).
  const double backward = 2.0 / 3.0 * s.compute;
  const double overlap = plan.zero_stage <= 1   ? backward / plan.micro_batches
                         : plan.zero_stage == 2 ? backward
                                                : s.compute;
  s.dp_exposed = std::max(0.0, s.dp - overlap);
  s.step = s.compute / (1 - bubble) + s.tp + s.pp + s.dp_exposed;
  return s;
}

}  // namespace shepherd
