// JobRunner: the seam through which the controller runs a job's attempts on a Slurm cluster.
//
// Pattern (docs/slurm.md): one Slurm allocation per Shepherd job, holding the nodes the plan needs plus
// the job's spares. It is a batch job whose only work is `sleep infinity`, submitted with --exclusive,
// --no-kill and --no-requeue: measured on Slurm 22.05, when a node of such an allocation dies, Slurm
// removes that node from the allocation, kills the steps that ran on it, and keeps the allocation (and
// every other node, spares included) running; without --no-kill the whole allocation is killed and
// requeued. Each attempt is one `srun` step inside the allocation with an explicit task layout: task r
// (SLURM_PROCID) runs on placement.ranks[r].node (--distribution=arbitrary with SLURM_HOSTFILE), with
// --overlap (a step killed by a node loss that Slurm is still cleaning up must not hold the next one
// back), through `shepherd-slurm-rank`, which gives each rank the same variables the node agents give, read
// from the step's rank table file (slurm/rank_table.h; no per-rank strings in the environment).
//
// Threading and blocking: a JobRunner holds only immutable options. Every method is synchronous (it
// runs Slurm commands and polls) and may be called from any thread, concurrently for different jobs and
// steps. The controller must call them off its own strand. Worst-case durations are stated per method;
// each Slurm command is bounded by Options::cli.timeout (T, default 30 s).
//
// Ownership: a Step names an srun process that is this process's child. The caller owns it and must
// eventually observe its end with PollStep or StopStep (which reap it); a Step must not be used from two
// threads at once. REQUIRES: SIGCHLD is not ignored in this process, and nothing else reaps children with
// waitpid(-1) (either would take srun's exit status away from PollStep).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "slurm/cli.h"
#include "slurm/step_env.h"
#include "slurm/rank_table.h"

namespace shepherd::slurm {

struct AllocationRequest {
  std::string name;  // Slurm job name, e.g. "shepherd-job-000042"
  int nodes = 0;     // nodes the plan needs; REQUIRES >= 1
  int spares = 1;    // extra nodes held back for replacement (resources.spare_nodes); REQUIRES >= 0
  std::vector<std::string> nodelist;  // optional: exactly these nodes (size must be nodes + spares)
  std::vector<std::string> exclude;   // optional: never these (e.g. cordoned in Shepherd)
  // Site options passed to sbatch as they are (--account=, --qos=, ...), before Shepherd's own, which win
  // over any repeat. REQUIRES: checked against the job policy (core/sbatch_policy.h): a bare option that
  // takes a value would take the next argument as it.
  std::vector<std::string> extra_args;
  // sbatch --chdir and where the holding job's (empty) output goes, slurm-<id>.out. It must exist on the
  // batch host (the allocation's first node), or the job fails at once. Empty: /tmp and no output file.
  std::string work_dir;
  // sbatch --comment when not empty, how FindAllocation finds this request again (the controller leaves it
  // empty when extra_args carry a site's own --comment).
  std::string comment;
};

struct Allocation {
  std::string job_id;
  SlurmJobState state = SlurmJobState::kOther;
  std::vector<std::string> nodes;  // the nodes it holds now (a failed node drops out)
  std::string reason;              // Slurm's reason while pending
};

struct StepSpec {
  std::string job_id;   // the allocation
  std::string name;     // step name, unique within the allocation (e.g. "shepherd-a3"): how the step is found
  Placement placement;  // REQUIRES: ranks[r].rank == r, every node in the allocation
  std::vector<std::string> command;  // REQUIRES: not empty; argv of every rank
  // Variables every rank gets (MASTER_ADDR, MASTER_PORT, SHEPHERD_URL, SHEPHERD_JOB, SHEPHERD_ATTEMPT,
  // SHEPHERD_RESUME_CHECKPOINT, SHEPHERD_TOKEN, the job's env ...). The per-rank ones (RANK, WORLD_SIZE,
  // LOCAL_RANK, LOCAL_WORLD_SIZE, CUDA_VISIBLE_DEVICES, SHEPHERD_RANK_COORDS) are added per task.
  EnvMap env;
  // Optional, indexed by rank: variables that differ between ranks, composed by the caller (the controller
  // uses scheduler/rank_env.h's ComposeRankEnv, as for the agents); given, the wrapper sets exactly these
  // and derives nothing (slurm/step_env.h, EncodeRankTables). Empty: the wrapper's own derivation.
  std::vector<EnvMap> rank_env;
  // GPUs the step asks for on each of its nodes (srun --gres=gpu:N): on a site with ConstrainDevices=yes a
  // task sees only the GPUs its step holds. The controller asks for every GPU of a node (the fewest any of
  // the step's nodes has), so the placement's GPU indices stay the node's own. 0: no --gres.
  int gpus_per_node = 0;
  std::string log_path;  // srun's output: every rank's stdout and stderr, lines prefixed "RANK: "
  std::string cwd;       // working directory of srun and the ranks ("" = the caller's)
  std::chrono::seconds start_timeout{60};  // how long until the step must be running
};

struct Step {
  std::string job_id;
  std::string step_id;  // "12.3"
  std::string name;
  pid_t srun_pid = -1;
  // Set when srun ended before StartStep saw the step running (every task already finished): srun has
  // been reaped and PollStep returns this.
  std::optional<ExitStatus> early_exit;
};

class JobRunner {
 public:
  struct Options {
    SlurmCli::Options cli;
    std::string rank_exec = "shepherd-slurm-rank";  // path (or name in PATH on every node) of the wrapper
    std::chrono::milliseconds poll_interval{250};
    // Where the step's rank table (slurm/rank_table.h) is read by the tasks. Empty (default): it is written
    // beside the step's log (`<log>.ranks`) and copied with `sbcast` to every node of the allocation, as
    // `<node_table_dir>/shepherd-<allocation>-<step name>.ranks`. Set: a directory every node sees at the
    // same path (a shared file system); the table is written there and not copied.
    std::string rank_table_dir;
    std::string node_table_dir = "/tmp";
  };
  explicit JobRunner(Options options);

  // sbatch the holding job and return its id at once (it may still be pending). kInvalidArgument: request
  // violates a REQUIRES. kUnavailable: sbatch failed. At most T.
  Result<std::string> SubmitAllocation(const AllocationRequest& request) const;
  // The allocation's state and current nodes. kNotFound once Slurm forgot it. At most T.
  Result<Allocation> ShowAllocation(const std::string& job_id) const;
  // The id of this user's active job named `name` whose comment is `comment` (squeue --me), or "" when
  // none. kUnavailable: squeue failed. At most T.
  Result<std::string> FindAllocation(const std::string& name, const std::string& comment) const;
  // scancel the allocation (its steps end with it), then wait until Slurm no longer lists it as active.
  // kUnavailable: still active after `timeout`. At most timeout + 2T.
  Status CancelAllocation(const std::string& job_id, std::chrono::seconds timeout) const;

  // Starts srun for the step and waits until Slurm lists it as running, or srun ended after running its
  // tasks (a short step: Step::early_exit). kInvalidArgument: spec violates a REQUIRES. kUnavailable:
  // Slurm refused the step ("Unable to create step", bad node list: srun's log tail in the message) or the
  // step did not run within start_timeout (srun is then killed and reaped). The sbcast of the rank table
  // before srun is bounded by max(T, start_timeout). At most 2 · max(T, start_timeout) + 2T.
  Result<Step> StartStep(const StepSpec& spec) const;
  // srun's exit (it exits when every task ended, or when the step is cancelled); nullopt while it runs.
  // Reaps srun once it ended: call it until it returns a value, and not after. Non-blocking.
  std::optional<ExitStatus> PollStep(const Step& step) const;
  // Graceful stop: `scancel --signal=TERM JOB.STEP`, wait up to `grace` for srun to exit, then
  // `scancel --signal=KILL JOB.STEP` and `scancel JOB.STEP`, wait up to `kill_wait`, then SIGKILL srun's
  // process group; reaps srun. Returns srun's exit. kUnavailable only if srun survives its own SIGKILL.
  // At most grace + kill_wait + 3T.
  Result<ExitStatus> StopStep(const Step& step, std::chrono::seconds grace,
                              std::chrono::seconds kill_wait = std::chrono::seconds(30)) const;

  const SlurmCli& cli() const { return cli_; }

  // The srun argv for a step (without the environment); exposed for tests and logs.
  std::vector<std::string> SrunArgv(const StepSpec& spec) const;

  // Everything StartStep writes and runs for `spec`, computed without doing it: exposed for tests (a
  // 131,072-rank step must fit Linux's limits on argv and environment strings). kInvalidArgument: spec
  // violates a REQUIRES, or its rank_env cannot be put in a table.
  struct PreparedStep {
    std::vector<std::string> argv;                              // srun's
    std::vector<std::pair<std::string, std::string>> env;       // added to srun's environment
    std::string hostfile_path, hostfile;                        // SLURM_HOSTFILE: line r = rank r's node
    std::string table_path, table;                              // written here (rank_table.h)
    std::string node_table_path;  // where the tasks read it (SHEPHERD_SLURM_TABLE); != table_path: sbcast
  };
  Result<PreparedStep> PrepareStep(const StepSpec& spec) const;

 private:
  Options options_;
  SlurmCli cli_;
};

// The pid of a live srun process on this host whose arguments name allocation `job_id` and a step of
// `attempt` under any launch order ("--jobid=ID", "--job-name=shepherd-a<attempt>[-o<order>]", as SrunArgv
// writes them; slurm/step_order.h), found through /proc; -1 when there is none. What a restarted daemon
// looks for while an earlier daemon's srun may still be creating its step.
pid_t FindSrun(const std::string& job_id, int attempt);

}  // namespace shepherd::slurm
