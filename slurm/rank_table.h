// The rank table of a Slurm step: every rank's own variables (RANK, LOCAL_RANK, CUDA_VISIBLE_DEVICES,
// SHEPHERD_RANK_COORDS, ...) in a file, one fixed-size record per rank, so a task reads only its own entry
// (at an offset computed from SLURM_PROCID) and the step's environment carries no per-rank strings (one
// environment string is capped at 128 KiB and argv + environment at ARG_MAX: per-rank tables in the
// environment stopped at about 10,000 ranks). Written by the daemon's launch worker before srun
// (slurm/job_runner.h), read by `shepherd-slurm-rank` as every task starts (slurm/rank_exec_main.cpp).
// Encoding and parsing are pure; WriteRankTable and ReadRankEntry do the file I/O and touch nothing else.
//
// File format (text, docs/slurm.md "The per-rank environment"):
//   shepherd-rank-table v1 ranks=<W> record=<L> keys=<K1>,<K2>,...\n      (the header line)
//   then W records of exactly L bytes each; record r (rank r) is
//   <node>\t<value of K1>\t...\t<value of Kn>\t<spaces>\n
// Record r starts at byte (header length + r·L). The node is where the placement put rank r: a task that
// runs elsewhere refuses to start (the step was laid out wrongly).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "slurm/step_env.h"

namespace shepherd::slurm {

// Environment variable naming the table file of the step (set in srun's environment).
inline constexpr const char* kRankTableVar = "SHEPHERD_SLURM_TABLE";

struct RankTableHeader {
  std::size_t ranks = 0;
  std::size_t record_len = 0;  // bytes per record, '\n' included
  std::vector<std::string> keys;
};

// The table's contents for `placement` (ranks[r].rank == r) and each rank's variables `per_rank` (same
// size, every map with the same keys). kInvalidArgument: sizes differ, a rank lacks a key rank 0 has (or has
// one more), a key is empty or holds ',', '=' or a control character, or a value or node name holds a tab,
// a line feed or a NUL.
Result<std::string> EncodeRankTable(const Placement& placement, const std::vector<EnvMap>& per_rank);

// The variables a rank gets when no caller composed them (StepSpec::rank_env empty), derived from the
// placement alone: RANK, SHEPHERD_RANK, WORLD_SIZE, LOCAL_RANK (position among the ranks on its node, in rank
// order), LOCAL_WORLD_SIZE, CUDA_VISIBLE_DEVICES (its GPU) and SHEPHERD_RANK_COORDS ("tp,pp,dp"). Linear in
// the number of ranks.
std::vector<EnvMap> DeriveRankEnv(const Placement& placement);

// The header line (without its '\n'). kInvalidArgument when it is not one this version writes.
Result<RankTableHeader> ParseRankTableHeader(std::string_view line);
// Rank `rank`'s variables from its record (exactly header.record_len bytes). kInvalidArgument: malformed.
// kConflict: `node` (SLURMD_NODENAME) is not the node the placement chose for the rank.
Result<EnvMap> ParseRankRecord(const RankTableHeader& header, std::string_view record, int rank,
                               const std::string& node);

// Writes `contents` to `path` atomically (`path`.tmp, then rename), mode 0600 (the step's tasks run as the
// daemon's user). kInternal naming the path on failure.
Status WriteRankTable(const std::string& path, const std::string& contents);
// Reads the header and record `rank` only (two bounded reads, whatever the table's size), then
// ParseRankRecord. kInvalidArgument also when `rank` is outside the table or the file is short; kNotFound
// when the file cannot be opened; kFailedPrecondition when another user owns it.
Result<EnvMap> ReadRankEntry(const std::string& path, int rank, const std::string& node);

}  // namespace shepherd::slurm
