// SlurmCli: Slurm's command-line tools (scontrol, sinfo, sbatch, srun, scancel) found in PATH, talking to
// the cluster that SLURM_CONF (from the environment, or Options::slurm_conf) names. Every call runs one
// command with an argv vector (no shell: node names, reasons and job names are passed as they are) and
// returns within Options::timeout (the command is killed then: kUnavailable).
//
// Threading: a SlurmCli holds only immutable options; every method may be called from any thread,
// concurrently. Calls block (fork, exec, wait): do not call them on a latency-critical thread.
//
// Errors: a command that exits non-zero is kUnavailable with its stderr (Slurm unreachable, permission
// denied, ...), except where a method says otherwise (kNotFound for an unknown job).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "slurm/jobs.h"
#include "slurm/nodes.h"
#include "slurm/subprocess.h"
#include "slurm/topology.h"

namespace shepherd::slurm {

class SlurmCli {
 public:
  struct Options {
    std::chrono::milliseconds timeout{30000};  // per command
    std::string slurm_conf;  // empty: SLURM_CONF from the environment (or Slurm's default config)
  };
  SlurmCli();
  explicit SlurmCli(Options options);

  // `scontrol show nodes --oneliner`.
  Result<std::vector<SlurmNode>> ShowNodes() const;
  // `scontrol show topology`; no switches when the cluster has no topology plugin (topology/none).
  Result<std::vector<SlurmSwitch>> ShowTopology() const;
  // `scontrol update NodeName=N State=DRAIN Reason=R`. REQUIRES: reason not empty (Slurm demands one).
  // Needs Slurm operator rights (root, SlurmUser, or AdminLevel=Operator in slurmdbd).
  Status DrainNode(const std::string& node, const std::string& reason) const;
  // `scontrol update NodeName=N State=RESUME`.
  Status ResumeNode(const std::string& node) const;

  // `sbatch --parsable ARGS...` → the job id. ARGS are sbatch options and the script (e.g. --wrap=...).
  Result<std::string> Submit(const std::vector<std::string>& args) const;
  // `scontrol show job ID --oneliner`. kNotFound: Slurm no longer knows the job (MinJobAge passed).
  // kInvalidArgument, nothing run: ID is not a job id (ValidJobId); so for ShowSteps.
  Result<SlurmJob> ShowJob(const std::string& job_id) const;
  // `scontrol show step JOB --oneliner`: the job's steps (none when it has none or is gone).
  Result<std::vector<SlurmStep>> ShowSteps(const std::string& job_id) const;
  // `scancel [--signal=SIG] [--full] TARGET` where TARGET is "JOB" or "JOB.STEP". signal empty: cancel.
  // `full` also signals the batch shell of a job.
  Status Cancel(const std::string& target, const std::string& signal = "", bool full = false) const;

  // The environment Slurm commands (and srun) run with: CleanEnvironment plus SLURM_CONF when set.
  Envp Environment(const std::vector<std::pair<std::string, std::string>>& overlay = {}) const;
  // Runs one Slurm tool within Options::timeout; exposed for the launcher and tests.
  Result<RunOutput> Run(const std::vector<std::string>& argv) const;
  // The same within `timeout` (a command whose work grows with the allocation, e.g. sbcast).
  Result<RunOutput> Run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) const;

 private:
  Result<std::string> RunOk(const std::vector<std::string>& argv) const;
  Options options_;
};

}  // namespace shepherd::slurm
