// Launcher: everything about a job that depends on who starts its ranks (core/job.h LaunchMode). One
// implementation per mode: AgentsLauncher (Shepherd's node agents), SlurmLauncher (one srun step per attempt
// in the job's Slurm allocation), ExternalLauncher (someone else starts the ranks; Shepherd watches their
// reports). The Controller picks one by the job's mode (LauncherFor) and asks it instead of looking at the
// spec: nothing outside the spec parser asks what a job's command is to know who launches it.
// Launchers hold no state and never call the Controller: each answer depends only on its arguments. The
// instances are immutable and shared by every thread (the control thread and the API's readers alike).
// A new launcher (Kubernetes, say) is a new file set here, a LaunchMode value and its name in the parser.
#pragma once

#include "control/job_health.h"
#include "core/job.h"
#include "core/status.h"

namespace shepherd {

// What holds an attempt's ranks back at the node agents when it starts (control/agent_board.h).
struct LaunchGates {
  bool wait_for_older_attempt = false;  // until no live agent runs an older attempt (HoldLaunch)
  bool wait_until_saved = false;        // until the attempt is durable (HoldUntilSaved)
  bool bump_nodes = false;              // the nodes' desired ranks changed: answer their long polls
  bool operator==(const LaunchGates&) const = default;
};

// How a job's ranks prove who they are (control/rank_tokens.h).
enum class RankCredential {
  kPerRank,  // minted per attempt, one token per rank, handed to each rank in its environment
  kPerStep,  // minted per attempt, one token for every task of the attempt's step
  kPerJob,   // one token for the job, handed out once in the submit answer
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual LaunchMode mode() const = 0;

  // Admission: whether a daemon may take a job of this mode (`daemon_slurm`: started with --slurm). A
  // refusal names the spec's field.
  virtual Status Admit(bool daemon_slurm) const;
  // Launch gates of attempt number `attempt`, just started.
  virtual LaunchGates GatesFor(int attempt) const = 0;
  // Whether node agents start its ranks: they are the agents' desired ranks, the launch's progress is shown
  // and timed out (policy.launch_timeout_s), and an agent's silence loses them.
  virtual bool AgentsStartRanks() const { return false; }
  // Whether each attempt runs in an allocation the job holds (wanted when an attempt starts, given back
  // when the job ends or is queued) as one step.
  virtual bool HoldsAllocation() const { return false; }
  virtual RankCredential Credential() const = 0;
  // How an attempt's detectors are armed (control/job_health.h).
  virtual JobHealth::Launch Arming() const = 0;
  // Whether Shepherd starts its attempts (restarts them, so recovery acts on a fault) rather than following
  // the attempts another launcher starts (named by its ranks' reports).
  virtual bool StartsAttempts() const { return true; }
  // Whether a finding blames the nodes its ranks reported from (its slots are only bookkeeping) rather than
  // the placement's (where the agents' listing of running ranks counts).
  virtual bool BlamesReportedNodes() const { return false; }
  // Whether the job has ended once every rank reported finished. `daemon_slurm`: the daemon watches the
  // job's Slurm record, which says when a job with an external_id ends.
  virtual bool EndsWhenEveryRankFinished(const JobSpec& spec, bool daemon_slurm) const;
};

const Launcher& LauncherFor(LaunchMode mode);
inline const Launcher& LauncherFor(const Job& job) {
  return LauncherFor(job.spec.launch_mode);
}

}  // namespace shepherd
