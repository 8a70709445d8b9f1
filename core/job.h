// Jobs, their plans, attempts, placements, checkpoints and findings: the domain records that the
// controller holds in memory and storage/ keeps durable (as JSON, see core/json.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "planner/spec.h"  // ModelSpec, TrainingSpec, ParallelismSpec: the planner's vocabulary

namespace shepherd {

struct Resources {
  int gpus = 0;
  int gpus_per_node = 8;
  std::optional<double> gpu_memory_gib;  // GPU size when no inventory is meant (dry-run plans)
  std::string gpu;  // GPU profile name ("H100-80GB", ...); empty = H100-80GB (planner/gpu_profiles.h)
  // launcher "slurm": nodes of the job's Slurm allocation held back as hot spares (docs/slurm.md).
  int spare_nodes = 1;
};

struct CheckpointSpec {
  std::string dir;
  int every_steps = 0;  // 0: the job does not promise periodic checkpoints
  // Seconds training waits on one save, as the user measured it; unset: estimated for checkpoint advice
  // (goodput/plan_advice.h).
  std::optional<double> save_s;
};

// What to do when an anomaly reproduces at the same step after a restart from an earlier checkpoint (the
// data or the code, not the hardware).
enum class OnReproducible { kFail, kRecord };
const char* ToString(OnReproducible o);
enum class ExternalRemediation {
  kNone,    // record only
  kCordon,  // cordon the blamed nodes in Shepherd's inventory
  kHook,    // run the daemon's remediation hook with the finding as JSON on stdin
  // "slurm-drain": cordon the blamed nodes in Shepherd; with --slurm the inventory sync then drains them in
  // Slurm with the reason "shepherd <finding id> <kind>" (docs/slurm.md).
  kSlurmDrain,
  // "requeue": for a job bound to a Slurm job (spec.external_id = its SLURM_JOB_ID), a finding whose
  // recommended action is a restart runs `scontrol requeue <id>` (once per attempt; docs/slurm.md).
  kRequeue,
};
const char* ToString(ExternalRemediation r);
// What a persistent straggler named from arrival order leads to (jobs Shepherd launches; docs/recovery.md).
enum class StragglerAction {
  kRecord,              // "record": the finding only
  kCordonAfterRestart,  // "cordon_after_restart": the next restart, whatever its cause, replaces the node
                        // and leaves it cordoned; never restarts for it
  kReplace,             // "replace": restart from last-known-good with the node replaced by a spare
};
const char* ToString(StragglerAction a);

struct Policy {
  double heartbeat_interval_s = 1;
  double heartbeat_timeout_s = 10;
  double startup_grace_s = 120;  // heartbeats may be absent this long after an attempt starts
  double hang_timeout_s = 60;
  // No step progress while every live rank heartbeats at the same step, none in a collective: weak evidence
  // (an evaluation the client cannot see, an export after the loop, a long first compile), acted on only
  // after this long. Ranks left behind at a lower step are judged at hang_timeout_s.
  double progress_timeout_s = 1800;
  int sdc_check_every_steps = 100;
  int max_restarts = 10;
  double restart_backoff_s = 5;  // doubled per consecutive restart, capped at 300 s
  bool use_spares = true;
  double straggler_factor = 1.5;    // slower than median × factor ...
  int straggler_window_steps = 20;  // ... over this many steps is a straggler
  StragglerAction straggler_action = StragglerAction::kRecord;
  double loss_spike_factor = 3;  // loss above rolling median × factor is a spike
  int good_after_steps = 10;     // K healthy steps that make a complete checkpoint good
  // Loss judged at job level: a spike lasting this many consecutive steps is divergence (restart from
  // last-known-good); a shorter one is an outlier (recorded, no action).
  int loss_divergence_steps = 5;
  // Loop breakers (docs/recovery.md).
  OnReproducible on_reproducible_anomaly = OnReproducible::kFail;
  int no_progress_attempts = 3;       // this many consecutive attempts ...
  int min_progress_steps = 10;        // ... each ending before resume step + this: stop restarting
  int crash_step_window = 5;          // the same exit code within this many steps of an earlier one
  int poisoned_checkpoint_steps = 3;  // a resume failing within this many steps after loading it
  // Jobs our agents launch: how long every node's agent may take to start the ranks before the job is
  // re-placed onto nodes whose agents are attached (or keeps waiting, saying why).
  double launch_timeout_s = 120;
  // Jobs another launcher starts: what Shepherd does itself about a finding (it always records what it
  // would do, as recommended_actions).
  ExternalRemediation external_remediation = ExternalRemediation::kNone;
};

// How the agent shows GPUs to a job's ranks on one node (scheduler/rank_env.h).
enum class GpuBinding {
  kPerNode,     // torchrun's way: every rank sees all of the job's GPUs on its node, LOCAL_RANK indexes them
  kPerProcess,  // each rank sees only its own GPU (CUDA_VISIBLE_DEVICES=<gpu>, device 0 in the process)
};

// Who starts a job's ranks. Decided once, when the spec is parsed (ParseJobSpec: no `command` is kExternal;
// a command with "launcher": "slurm" is kSlurm, else kAgents), stored with the job and shown as its
// `launch.mode`. Everything that differs by mode lives in that mode's Launcher (control/launch/).
enum class LaunchMode {
  kAgents,    // "agents": Shepherd's node agents start the ranks (docs/agent-protocol.md)
  kSlurm,     // "slurm": one srun step per attempt inside the job's Slurm allocation (docs/slurm.md)
  kExternal,  // "external": someone else starts the ranks; Shepherd watches their reports
};
const char* ToString(LaunchMode m);
std::optional<LaunchMode> LaunchModeFromString(std::string_view s);

// launcher "slurm": the allocation to run in.
struct SlurmLaunchSpec {
  std::string allocation;                // adopt this running Slurm job; empty: Shepherd requests one
  std::vector<std::string> sbatch_args;  // site options for the allocation Shepherd requests (--account=...)
  bool operator==(const SlurmLaunchSpec&) const = default;
};

struct JobSpec {
  std::string name;
  ModelSpec model;
  TrainingSpec training;
  ParallelismSpec parallelism;
  Resources resources;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  // The job's id in the launcher that starts it (jobs without `command`; e.g. SLURM_JOB_ID). Unique among
  // jobs that have not ended; "" = none.
  std::string external_id;
  CheckpointSpec checkpoint;
  Policy policy;
  GpuBinding gpu_binding = GpuBinding::kPerNode;  // "gpu_binding": "per_node" (default) | "per_process"
  // Set by the parser from `command` and "launcher"; a spec built in code is another launcher's job
  // (no command) until it says otherwise.
  LaunchMode launch_mode = LaunchMode::kExternal;
  SlurmLaunchSpec slurm;  // "slurm": {"allocation", "sbatch_args"}
  // Who submitted the job (the principal's name). Set by the API from the caller's credential, never from
  // the request body; stored with the job (top-level "owner" of its JSON); "" for jobs from before auth.
  std::string owner;
};

// A concrete parallel layout. micro_batches = global_batch / (micro_batch_size · dp).
// Rank order (Megatron): tp fastest, then cp, dp, pp: rank = tp + TP·(cp + CP·(dp + DP·pp)). The routed
// experts fold the tp·cp·dp ranks of a stage into their own grid (Megatron-Core's expert rank generator:
// etp fastest, then ep, then expert-data-parallel; no cp): with r = tp + TP·(cp + CP·dp) a rank holds the
// experts of ep rank (r / ETP) % EP, sharded ETP ways at r % ETP. With etp = tp that is ep rank
// (cp + CP·dp) % EP.
struct Plan {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int zero_stage = 0;
  int micro_batches = 1;
  int micro_batch_size = 1;
  int cp = 1;
  int vpp = 1;
  bool sequence_parallel = false;
  std::vector<int> pipeline_layers;  // transformer layers per stage (size pp); empty = layers / pp each
  // Expert parallel: routed experts split over ep ranks, each expert sharded over etp ranks (0: etp = tp,
  // Megatron's default); expert data parallel = tp·cp·dp/(etp·ep).
  int ep = 1;
  int etp = 0;
  int world_size() const { return tp * cp * pp * dp; }
  int expert_tp() const { return etp > 0 ? etp : tp; }
  bool operator==(const Plan&) const = default;
};

// kLaunching: an attempt holds its GPUs but its ranks are not known to run yet (no agent has started them,
// no rank has reported). Nothing about a launching attempt's ranks is judged: ranks never launched are never
// lost. kRunning: launched.
enum class JobState { kQueued, kLaunching, kRunning, kRecovering, kSucceeded, kFailed, kCancelled };
const char* ToString(JobState s);
std::optional<JobState> JobStateFromString(const std::string& s);
// An attempt is under way (holding its GPUs): launching or running.
inline bool IsActive(JobState s) {
  return s == JobState::kLaunching || s == JobState::kRunning;
}
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

// Rank order (Megatron default): rank = tp + TP·(dp + DP·pp). TP fastest, then DP, then PP.
struct RankSlot {
  int rank = 0;
  std::string node;
  int gpu = 0;
  int tp = 0;
  int pp = 0;
  int dp = 0;
  int cp = 0;  // context-parallel coordinate (0 when plan.cp = 1)
  bool operator==(const RankSlot&) const = default;
};

// Sets slot->tp, cp, dp, pp from slot->rank in `plan`'s rank order (Plan).
inline void SetRankCoords(const Plan& plan, RankSlot* slot) {
  const int r = slot->rank;
  slot->tp = r % plan.tp;
  slot->cp = (r / plan.tp) % plan.cp;
  slot->dp = (r / (plan.tp * plan.cp)) % plan.dp;
  slot->pp = r / (plan.tp * plan.cp * plan.dp);
}

struct Placement {
  int attempt = 0;
  std::vector<RankSlot> ranks;  // indexed by rank
};

struct Job {
  std::string id;
  int64_t seq = 0;  // submission order, for FIFO
  JobSpec spec;
  Plan plan;
  JobState state = JobState::kQueued;
  int attempt = 0;   // current attempt number; 0 while never started
  int restarts = 0;  // automatic restarts used against policy.max_restarts
  std::string reason;
  Time created_at{};
  Time updated_at{};
};

struct Attempt {
  std::string job;
  int number = 0;
  Time started_at{};
  std::optional<Time> ended_at;
  std::string reason;             // why this attempt was started
  std::string resume_checkpoint;  // checkpoint id, empty when starting from scratch
  int64_t resume_step = 0;
  Placement placement;
  // Goodput marks (goodput/accounting.h reads them), recorded by the controller from the ranks' reports and
  // persisted with the attempt (at its end, and at most once a minute while it runs).
  std::optional<Time> first_step_at;  // daemon clock: the first step report of this attempt
  std::optional<Time> last_step_at;   // daemon clock: the newest step report
  int64_t last_step = 0;              // the newest step reported (meaningful when last_step_at is set)
  double load_s = 0;                  // seconds the ranks spent loading a checkpoint before the first step
  double save_s = 0;                  // seconds training waited on checkpoint saves during the attempt
  // A restart's backoff: the earliest start the recovery policy allowed (RecoveryDecision::not_before).
  // The gap between the previous attempt's end and this one's start is backoff up to here, and waiting
  // (for spares, placement, the queue) after it. Unset for a first attempt and a forced restart.
  std::optional<Time> not_before;
  // The finding that ended this attempt: the root finding of its incident (Finding::incident), re-pointed
  // when a later finding of the same incident turns out to be its root cause. Empty when no fault ended
  // it (cancelled, finished, still running).
  std::string ended_by;
};

enum class CheckpointStatus { kPending, kComplete, kGood, kBad };
const char* ToString(CheckpointStatus s);

struct Checkpoint {
  std::string id;  // "<job>/<attempt>/<step>"
  std::string job;
  int attempt = 0;
  int64_t step = 0;
  std::string path;
  CheckpointStatus status = CheckpointStatus::kPending;
  std::string reason;
  int ranks_reported = 0;
  Time created_at{};
  Time updated_at{};
};

// What a finding is about. Strings ("heartbeat_lost", ...) exist only at the JSON edge (ToString and
// FindingKindFromString, core/enums.cpp).
enum class FindingKind {
  kHeartbeatLost,     // a rank went silent
  kNodeLost,          // a node's agent went silent
  kHang,              // a collective open past the hang timeout, or no progress outside collectives
  kStraggler,         // a rank persistently slower than the job's median
  kSdcSuspected,      // replicas disagree on their parameter hash
  kSdcConfirmed,      // an operator or a replay confirmed corruption on a node
  kSdcTransient,      // a replay's hashes agreed: the earlier mismatch was transient
  kLossSpike,         // loss above the rolling median × factor
  kNonfiniteLoss,     // NaN or Inf loss
  kGradNormSpike,     // gradient norm over 10× its rolling maximum with a normal loss
  kProcessExit,       // a rank process exited non-zero or was killed
  kGpuFault,          // an agent reported a GPU fault
  kRestartRequested,  // a user forced a restart (POST /v1/jobs/{id}/restart)
  kLossDivergence,    // the job-level loss stayed off its baseline for policy.loss_divergence_steps
};
const char* ToString(FindingKind k);
std::optional<FindingKind> FindingKindFromString(std::string_view s);

// How a replica-set mismatch was judged (sdc_suspected only): by majority vote (the odd one out is named),
// or without a majority (two replicas, or an even split), so that a replay must decide.
// kNoAgreement: 3+ replicas and no two hashes equal. One corrupt node leaves the others agreeing, so this
// is state that is not replicated (software), not corruption: recorded only.
enum class SdcVerdict { kNone, kMajority, kNeedsReplay, kNoAgreement };
const char* ToString(SdcVerdict v);

// A PyTorch flight-recorder dump file a rank left on its node, as the node's agent found it.
struct FlightRecorderDump {
  std::string path;
  uint64_t size = 0;  // bytes
  bool operator==(const FlightRecorderDump&) const = default;
};

// A straggler named from arrival order (health/arrival_stragglers.h): the finding's rank held up its group.
struct StragglerEvidence {
  std::string group;         // "tp", "cp", "dp" or "world"
  double lateness_s = 0;     // mean seconds per collective the others waited for it, in windows it held up
  double share_held_up = 0;  // the share of its collectives (in judged windows) that it held up
  int windows = 0;           // judged windows the evidence covers
  bool operator==(const StragglerEvidence&) const = default;
};

struct Finding {
  std::string id;
  std::string job;
  int attempt = 0;
  FindingKind kind = FindingKind::kHang;
  SdcVerdict sdc_verdict = SdcVerdict::kNone;  // set by the SDC detector for kSdcSuspected
  std::vector<int> ranks;
  std::vector<std::string> nodes;
  std::optional<int64_t> step;
  std::optional<int64_t> onset_step;
  Time detected_at{};
  // When the fault began, as far as the evidence shows (daemon clock): a lost node's or rank's last
  // heartbeat, a hung collective's start, a process's exit as its agent saw it, the onset step's time.
  // Unset: not known; goodput accounting then counts no detection time for it.
  std::optional<Time> onset_at;
  // The incident this finding belongs to: the id of the incident's root finding (its own id when it is
  // the root). Findings that follow one fault (a node dies, its peers' collectives fail) share one
  // incident: one restart, one unit of restart budget, one cause of badput. Empty on findings recorded
  // before incidents existed: each is then its own incident.
  std::string incident;
  std::string detail;
  std::vector<std::string> actions;
  // What Shepherd would do, for jobs it does not launch (it acts only as policy.external_remediation says).
  std::vector<std::string> recommended_actions;
  // process_exit: how the rank ended, and the last lines of its log when the agent sent them.
  std::optional<int> exit_code;
  std::optional<int> signal;
  // SIGKILL: whether the node's kernel OOM-killed a process just before (the agent's evidence; empty:
  // not known). A SIGKILL that was not an OOM kill came from a person or a program, not from the node.
  std::optional<bool> oom_kill;
  // process_exit: the rank was stopped by its agent's fence (the daemon's lease ran out): neither the rank's
  // nor the node's doing; never evidence, never counted towards recurrence or loop breakers.
  bool fenced = false;
  std::string log_tail;
  // hang: the culprits that had stopped reporting (silent, or never reported); the others were heartbeating,
  // busy in their own work.
  std::vector<int> silent_ranks;
  // process_exit and hang: flight-recorder dumps the agents found for the attempt's ranks (docs/recovery.md).
  std::vector<FlightRecorderDump> flight_recorder;
  // straggler named from arrival order: its evidence (ranks[0] is the rank, nodes[0] its node). Absent for
  // the step-time rule's straggler findings.
  std::optional<StragglerEvidence> straggler;
};

}  // namespace shepherd
