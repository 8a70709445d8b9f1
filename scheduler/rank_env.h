// The environment a node agent gives each rank of a job on one node: torchrun's variables (so scripts
// written for torchrun run unchanged), the rendezvous, Shepherd's own SHEPHERD_* variables, and NCCL
// defaults aligned with the job's hang timeout. Pure: no I/O, no clock.
//
// Contract (docs/integration.md, "The environment contract"):
// - gpu_binding per_node (default, as torchrun): every local rank sees CUDA_VISIBLE_DEVICES = the job's
//   GPUs on this node in ascending order, and LOCAL_RANK is the index of its own GPU in that list, so
//   torch.device(f"cuda:{LOCAL_RANK}") is the rank's GPU. per_process: CUDA_VISIBLE_DEVICES = its own GPU
//   alone (device 0 inside the process); LOCAL_RANK is still the index among local ranks.
// - GROUP_RANK is the node's index among the job's nodes ordered by their lowest rank, GROUP_WORLD_SIZE
//   the node count; ROLE_NAME "default", ROLE_RANK = RANK, ROLE_WORLD_SIZE = WORLD_SIZE (torchrun's one
//   role); TORCHELASTIC_RESTART_COUNT = attempt − 1, TORCHELASTIC_MAX_RESTARTS = policy.max_restarts,
//   TORCHELASTIC_RUN_ID = the job id.
// - NCCL defaults (TORCH_NCCL_ASYNC_ERROR_HANDLING, the flight recorder, a process-group timeout well
//   above policy.hang_timeout_s) are set only where the job's env does not set the variable: a user's
//   value wins. TORCH_FR_DUMP_TEMP_FILE is left to the agent, which knows its state directory.
// - SHEPHERD_* variables and the rendezvous always come from here (the job spec cannot set SHEPHERD_*).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/job.h"

namespace shepherd {

// SHEPHERD_PARALLELISM gives the layout sizes "TP,PP,DP" and SHEPHERD_RANK_COORDS the rank's "tp,pp,dp"
// (rank = tp + TP·(dp + DP·pp)), from which clients name process groups. With context parallelism
// (plan.cp > 1) both carry a fourth value, "TP,PP,DP,CP" and "tp,pp,dp,cp" (rank = tp + TP·(cp + CP·(dp +
// DP·pp))).
using EnvMap = std::map<std::string, std::string>;

// One placement's nodes, indexed once so a node's environment costs O(its ranks), not O(the job's ranks):
// a 131,072-rank job's agents ask for theirs about 560 times a second (every long poll's answer).
struct PlacementNodes {
  struct Entry {
    int group_rank = 0;      // the node's index among the job's nodes ordered by their lowest rank
    std::vector<int> ranks;  // indices into placement.ranks of the ranks on the node, ascending
  };
  std::unordered_map<std::string, Entry> by_node;
};
// O(placement.ranks).
PlacementNodes IndexPlacementNodes(const Placement& placement);

struct RankEnvInput {
  std::string job_id;
  const JobSpec* spec = nullptr;         // REQUIRES: non-null
  Plan plan;                             // the layout: SHEPHERD_PARALLELISM = "tp,pp,dp[,cp]" sizes
  int attempt = 1;                       // 1-based
  const Placement* placement = nullptr;  // REQUIRES: non-null, ranks indexed by rank
  std::string node;                      // the node whose ranks are wanted
  std::string master_addr;               // host of rank 0
  int master_port = 0;
  std::string resume_path;  // checkpoint path to resume from, empty for a fresh start
  int64_t resume_step = 0;
  int resume_attempt = 0;  // the attempt whose reports completed that checkpoint (0: none or unknown)
  // Optional: IndexPlacementNodes(*placement), e.g. kept by the caller for the attempt; null: the node's
  // ranks and group rank are found by a scan of the whole placement.
  const PlacementNodes* nodes = nullptr;
};

struct RankEnvOptions {
  std::string advertise_url;  // SHEPHERD_URL
  std::string rank_token;     // SHEPHERD_TOKEN
};

struct LocalRankEnv {
  int rank = 0;
  int gpu = 0;  // physical GPU index on the node
  EnvMap env;
};

// Seconds the process-group (NCCL/gloo) timeout defaults to: well above the hang timeout, so Shepherd
// names the culprit before PyTorch's own watchdog aborts every rank.
double DefaultProcessGroupTimeoutS(const Policy& policy);

// The ranks of `in.placement` on `in.node`, ordered by LOCAL_RANK, each with its full environment
// (the job's env plus everything above).
std::vector<LocalRankEnv> ComposeRankEnv(const RankEnvInput& in, const RankEnvOptions& options);

}  // namespace shepherd
