// A plan as the launch arguments of the frameworks users run: Megatron-LM's command-line flags and
// torchtitan's job configuration keys. Pure: the estimate in, arguments out (docs/api.md, "launch_args").
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "planner/planner.h"

namespace shepherd {

struct LaunchArgs {
  // argv fragment for pretrain_gpt.py and its kin, flag then value (switches stand alone).
  std::vector<std::string> megatron;
  // torchtitan JobConfig keys in dotted form ("parallelism.tensor_parallel_degree") to their values, as a
  // TOML file or `--key value` overrides take them.
  Json torchtitan = Json::object();
};

// Global batch = micro_batch_size · micro_batches · dp (the planner's own definition). Uneven pipeline
// stages are written as Megatron's first/last stage layer counts when only the end stages differ; other
// shapes, and everything torchtitan cannot say, are left out (docs/api.md lists them).
LaunchArgs MakeLaunchArgs(const PlanEstimate& e);

}  // namespace shepherd
