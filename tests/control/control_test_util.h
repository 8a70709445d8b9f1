// Builders shared by the control/ owner tests.
#pragma once

#include <string>

#include "core/job.h"
#include "core/node.h"
#include "planner/planner.h"

namespace shepherd::testing {

inline Node MakeNode(const std::string& id, const std::string& leaf, bool spare = false, int gpus = 8) {
  Node n;
  n.id = id;
  n.hostname = id;
  n.gpus = gpus;
  n.topology = {{"spine", "s0"}, {"leaf", leaf}};
  n.nvlink_domain = id;
  n.spare = spare;
  return n;
}

// A small explicit-layout job: `gpus` GPUs, TP `tp`, DP gpus/tp, launched by our agents.
inline JobSpec MakeSpec(int gpus, int tp) {
  JobSpec s;
  s.name = "t";
  s.model = {1e9, 8, 1024, 8, 1024, 32000};
  s.training.global_batch_size = 64;
  s.resources.gpus = gpus;
  s.parallelism = {false, tp, 1, gpus / tp, 0};
  s.command = {"python3", "train.py"};
  s.launch_mode = LaunchMode::kAgents;
  return s;
}

}  // namespace shepherd::testing
