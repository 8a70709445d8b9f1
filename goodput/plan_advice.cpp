#include "goodput/plan_advice.h"

#include <algorithm>
#include <cmath>

namespace shepherd {

PlanAdvice AdviseForPlan(const JobSpec& spec, const PlanEstimate& e, double interruptions_per_node_hour) {
  const int gpus = e.plan.world_size();
  const int per_node = std::max(1, spec.resources.gpus_per_node);
  const double nodes = std::ceil(double(gpus) / per_node);
  PlanAdvice out;
  double save_s = 0;
  if (spec.checkpoint.save_s) {
    save_s = *spec.checkpoint.save_s;
  } else {
    save_s = e.model_parameters * kCheckpointBytesPerParameter / (nodes * kCheckpointWriteBytesPerSecondPerNode);
    out.save_estimated = true;
  }
  save_s = std::max(save_s, 1e-3);  // a toy model saves in no measurable time; the formulas need δ > 0
  AdviceInput in{.save_s = save_s,
                 .restart_s = kDefaultRestartSeconds,
                 .load_s = save_s,
                 .nodes = nodes,
                 .interruptions_per_node_hour = interruptions_per_node_hour};
  if (spec.checkpoint.every_steps > 0 && e.step_time_s > 0)
    in.current_interval_s = spec.checkpoint.every_steps * e.step_time_s;
  out.advice = AdviseCheckpoints(in);
  return out;
}

Json ToJson(const CheckpointAdvice& a) {
  auto opt = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
  return {{"interval_s", a.interval_s},
          {"young_interval_s", a.young_interval_s},
          {"current_interval_s", opt(a.current_interval_s)},
          {"ettr_now", opt(a.ettr_now)},
          {"ettr_advised", a.ettr_advised},
          {"mtbf_s", a.mtbf_s},
          {"inputs",
           {{"save_s", a.inputs.save_s},
            {"restart_s", a.inputs.restart_s},
            {"load_s", a.inputs.load_s},
            {"nodes", a.inputs.nodes},
            {"interruptions_per_node_hour", a.inputs.interruptions_per_node_hour}}}};
}

}  // namespace shepherd
