// Running Slurm's command-line tools: fork/exec with argv vectors (never a shell), bounded by a timeout.
// Stateless functions, thread-safe. Linux/POSIX.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace shepherd::slurm {

// Environment entries "KEY=VALUE".
using Envp = std::vector<std::string>;

struct RunOutput {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;  // stdout, at most max_output bytes (the rest is read and dropped)
  std::string err;  // stderr, likewise
  bool ok() const { return exit_code == 0; }
};

// Runs argv[0] (searched in PATH from `env`) with `env`, stdin from /dev/null, in its own process group,
// and collects its output. Returns once it exited, or after `timeout`: then the whole group gets SIGKILL,
// is reaped, and the result is kUnavailable ("... timed out after N ms"). Blocks at most timeout plus the
// reaping of a killed child. kInternal: fork, pipe or exec failed (exec failure is exit code 127 from the
// child, reported as kInternal with "cannot execute").
Result<RunOutput> RunCommand(const std::vector<std::string>& argv, const Envp& env,
                             std::chrono::milliseconds timeout, std::size_t max_output = 8 << 20);

// Starts argv[0] (searched in PATH from `env`) in a new session (sid = pgid = pid, no controlling terminal)
// with stdin from /dev/null and stdout+stderr appended to `log_path` (created 0644): a long-lived child such
// as a step's srun is out of reach of signals sent to the caller's process group or session (a terminal's
// ^C or hangup, a kill of the caller's group), and outlives the caller (it is then init's or the nearest
// subreaper's child). Returns once the session exists. The caller reaps it (PollExit) while it lives.
// kInternal: the log cannot be opened, or fork/exec failed.
Result<pid_t> SpawnLogged(const std::vector<std::string>& argv, const Envp& env, const std::string& log_path,
                          const std::string& cwd);

struct ExitStatus {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
};
// waitpid(pid, WNOHANG): nullopt while the child runs. A pid that is not (or no longer) our child yields
// ExitStatus{-1, 0}.
std::optional<ExitStatus> PollExit(pid_t pid);

// Whether `name` is one Slurm's commands read as input (SLURM_*, SBATCH_*, SRUN_*, SALLOC_*): options,
// the job to act in, the configuration file to load.
bool IsSlurmInputVariable(const std::string& name);

// The calling process's environment with every SLURM_* and SBATCH_/SRUN_/SALLOC_ variable removed except
// SLURM_CONF, then `overlay` applied (later entries win). Shepherd may itself run inside an allocation; an
// inherited SLURM_JOB_ID would silently redirect srun and sbatch.
Envp CleanEnvironment(const std::vector<std::pair<std::string, std::string>>& overlay = {});

}  // namespace shepherd::slurm
