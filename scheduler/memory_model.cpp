#include "scheduler/memory_model.h"

#include <algorithm>

namespace shepherd {

namespace {

bool Is16Bit(Precision p) {
  return p == Precision::kBf16 || p == Precision::kFp16;
}

}  // namespace

StateBytesPerParam ModelStateBytesPerParam(Precision precision, Optimizer optimizer, int zero_stage, int dp) {
  const double n = dp;
  StateBytesPerParam b;
  b.weights = Is16Bit(precision) ? 2 : 4;
  b.gradients = b.weights;
  b.master_weights = Is16Bit(precision) ? 4 : 0;
  b.optimizer = optimizer == Optimizer::kAdam ? 8 : 4;
  if (zero_stage >= 1) {
    b.optimizer /= n;
    b.master_weights /= n;
  }
  if (zero_stage >= 2) b.gradients /= n;
  if (zero_stage >= 3) b.weights /= n;
  return b;
}

double StageParamsPerRank(const ModelSpec& m, int tp, int pp, int stage) {
  const double vocab_params = static_cast<double>(m.vocab) * m.hidden;
  const double layer_params = (m.parameters - 2 * vocab_params) / m.layers;
  double params = layer_params * (m.layers / pp);
  if (stage == 0) params += vocab_params;
  if (stage == pp - 1) params += vocab_params;
  return params / tp;
}

double ActivationBytesPerLayer(const ModelSpec& m, int micro_batch_size, int tp, Recompute recompute,
                               Precision precision) {
  const double sbh = static_cast<double>(m.seq_len) * micro_batch_size * m.hidden;
  const double scale = Is16Bit(precision) ? 1 : 2;
  switch (recompute) {
    case Recompute::kNone:
      return scale * sbh * (34 + 5.0 * m.heads * m.seq_len / m.hidden) / tp;
    case Recompute::kSelective:
      return scale * sbh * 34 / tp;
    case Recompute::kFull:
      return scale * 2 * sbh;
  }
  return 0;
}

int InFlightMicroBatches(int pp, int stage, int micro_batches) {
  return std::min(pp - stage, micro_batches);
}

MemoryBreakdown StageMemory(const JobSpec& spec, const Plan& plan, int stage) {
  const TrainingSpec& t = spec.training;
  const double params = StageParamsPerRank(spec.model, plan.tp, plan.pp, stage);
  const StateBytesPerParam b = ModelStateBytesPerParam(t.precision, t.optimizer, plan.zero_stage, plan.dp);
  MemoryBreakdown mem;
  mem.weights = params * b.weights;
  mem.gradients = params * b.gradients;
  mem.optimizer = params * b.optimizer;
  mem.master_weights = params * b.master_weights;
  mem.activations = ActivationBytesPerLayer(spec.model, plan.micro_batch_size, plan.tp,
                                            t.activation_recompute, t.precision) *
                    (spec.model.layers / plan.pp) * InFlightMicroBatches(plan.pp, stage, plan.micro_batches);
  mem.total = mem.weights + mem.gradients + mem.optimizer + mem.master_weights + mem.activations;
  return mem;
}

MemoryBreakdown WorstStageMemory(const JobSpec& spec, const Plan& plan) {
  MemoryBreakdown first = StageMemory(spec, plan, 0);
  if (plan.pp == 1) return first;
  MemoryBreakdown last = StageMemory(spec, plan, plan.pp - 1);
  return last.total > first.total ? last : first;
}

}  // namespace shepherd
