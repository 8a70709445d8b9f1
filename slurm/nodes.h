// Slurm's node records as `scontrol show nodes --oneliner` prints them, and their GPU Gres. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "slurm/node_state.h"

namespace shepherd::slurm {

struct GresGpus {
  int count = 0;      // sum over every gpu entry
  std::string model;  // the type of the first typed gpu entry (`gpu:a100:4` → "a100"), empty if none
  bool operator==(const GresGpus&) const = default;
};

// `gpu:2`, `gpu:a100:4(S:0-1)`, `gpu:tesla:2,gpu:k80:2`, `gpu:4,mps:400`, `(null)` or empty → GPUs.
// Entries of other Gres names are ignored. kInvalidArgument: a gpu entry whose count is not a number.
Result<GresGpus> ParseGresGpus(std::string_view gres);

struct SlurmNode {
  std::string name;      // NodeName
  std::string address;   // NodeAddr (what ranks use to reach it); NodeHostName when absent
  std::string hostname;  // NodeHostName
  int cpus = 0;          // CPUTot
  long long real_memory_mb = 0;
  GresGpus gpus;
  SlurmNodeState state;
  std::string state_text;             // as printed, e.g. "IDLE+DRAIN"
  std::string reason;                 // without the "[user@time]" suffix scontrol appends; empty when none
  std::string reason_user;            // "root" from "[root@2026-11-23T08:19:00]"
  std::vector<std::string> features;  // AvailableFeatures; empty for "(null)"
  std::vector<std::string> partitions;
};

// Parses `scontrol show nodes --oneliner` (or the multi-line form). kInvalidArgument when a record lacks
// NodeName or State, or State, CPUTot, RealMemory or Gres does not parse; the message names the node.
Result<std::vector<SlurmNode>> ParseNodes(std::string_view scontrol_output);

}  // namespace shepherd::slurm
