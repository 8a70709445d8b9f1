// The per-rank environment of a rank started by srun. srun starts every task of a step with the same
// environment plus its own SLURM_PROCID; Shepherd's ranks need more (LOCAL_RANK, LOCAL_WORLD_SIZE,
// CUDA_VISIBLE_DEVICES, SHEPHERD_RANK_COORDS, ...). So the launcher puts the whole placement into a few
// step-wide variables (EncodeLayout) and runs each task through `shepherd-slurm-rank`, which derives its
// rank's variables (RankEnvironment) and execs the command. Pure.
//
// Step-wide variables (values are comma lists indexed by rank):
//   SHEPHERD_SLURM_NODES   node of each rank        e.g. "n3,n1,n0,n2"
//   SHEPHERD_SLURM_GPUS    local GPU of each rank   e.g. "0,0,1,0"
//   SHEPHERD_SLURM_COORDS  tp.pp.dp of each rank    e.g. "0.0.0,1.0.0,0.0.1,1.0.1"
// Linux caps one environment string at 128 KiB (MAX_ARG_STRLEN), which bounded a step to about 10,000
// ranks with short node names. The launcher now writes a rank table file instead (slurm/rank_table.h);
// shepherd-slurm-rank still reads these variables when no table is named (a step an older daemon started).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace shepherd::slurm {

using EnvMap = std::map<std::string, std::string>;

// REQUIRES: placement.ranks[r].rank == r for every r.
EnvMap EncodeLayout(const Placement& placement);

// Variables that differ between ranks, composed by the controller with scheduler/rank_env.h's
// ComposeRankEnv (the definition the node agents use), as step-wide tables: SHEPHERD_SLURM_KEYS = "K1,K2"
// and SHEPHERD_SLURM_V_<K> = "value of rank 0;value of rank 1;...". With them, RankEnvironment returns
// exactly the tables' values for the rank (srun's environment already holds what all ranks share) and
// derives nothing. kInvalidArgument: a key is not in every rank's map, or a value contains
// ';'.
Result<EnvMap> EncodeRankTables(const std::vector<EnvMap>& per_rank);

// From the task's environment (SLURM_PROCID, SLURMD_NODENAME and the SHEPHERD_SLURM_* tables), the
// variables to add for rank r = SLURM_PROCID: RANK, WORLD_SIZE, LOCAL_RANK (position among the ranks on
// the same node, in rank order), LOCAL_WORLD_SIZE, CUDA_VISIBLE_DEVICES, SHEPHERD_RANK_COORDS ("tp,pp,dp"
// as the agents give it) and SHEPHERD_RANK. kInvalidArgument: a table is missing or malformed, or the
// tables disagree in length, or SLURM_PROCID is out of range. kConflict: SLURMD_NODENAME is not the node
// the placement chose for this rank (the step was laid out wrongly; the rank must not run).
Result<EnvMap> RankEnvironment(const EnvMap& task_env);

}  // namespace shepherd::slurm
