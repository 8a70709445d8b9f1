// SlurmAllocations: the Slurm side of the jobs Shepherd launches through Slurm ("launcher": "slurm",
// docs/slurm.md): per job, the allocation that holds its nodes (its placement plus its hot spares), and the
// allocations being given back. The daemon's launch worker (daemon/slurm_launch_worker.h) carries out what the
// controller orders (SlurmOwner::Orders: request or adopt the allocation, run the current attempt as
// one srun step, cancel what is released) and reports what happened (SlurmLaunchEvent).
// Owns: per job the Allocation record, and the allocation ids being cancelled. Durable as kMeta records
// "slurm_alloc/<job>" (JSON), so a restarted daemon keeps (and never requests twice) its allocations.
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
// Invariants: a job has at most one allocation; an allocation id is either a job's or being released,
// never both; an adopted allocation is never cancelled (it was the user's).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/control_lock.h"
#include "core/job.h"
#include "core/status.h"
#include "slurm/job_runner.h"
#include "slurm/step_log.h"
#include "storage/store.h"

namespace shepherd {

struct SlurmAllocationRecord {
  enum class State {
    kWanted,   // to request (nodes: the nodelist) or adopt (id given)
    kPending,  // submitted (id known), not running yet
    kRunning,  // running; nodes: what it holds now
  };
  State state = State::kWanted;
  std::string id;
  std::vector<std::string> nodes;
  bool adopted = false;
  // A random name for this request, given to sbatch as its comment ("shepherd-request=<request>"): a
  // daemon that finds no id recorded for a request (it crashed between sbatch and recording the id) finds
  // the allocation it asked for by it instead of asking twice. Empty when adopted.
  std::string request;
  // The launch order of the current attempt's step (docs/slurm.md, "One step per attempt"): `order` is
  // bumped, durably, before any srun of attempt `order_attempt` in this allocation; the step is named
  // shepherd-a<attempt>-o<order> and its ranks run only while it is still the current one. 0: none yet (a
  // record of an older daemon).
  int64_t order = 0;
  int order_attempt = 0;
};
const char* ToString(SlurmAllocationRecord::State s);  // "wanted", "pending", "running"

// What the launch worker is to do for one job now. Level-triggered: the worker compares it with what it
// runs and acts on the difference.
struct SlurmJobOrder {
  std::string job;
  SlurmAllocationRecord allocation;
  std::vector<std::string> sbatch_args;
  // The allocation's record is durable: a wanted allocation is requested only then (a request a crashed
  // daemon's successor never heard of would hold its nodes).
  bool allocation_durable = true;
  // The current attempt is to run as one step: the allocation runs and the placement lies inside it.
  bool step_wanted = false;
  // Its step (job_id, name, placement, command, env; log_path and cwd are the worker's), given only when
  // step_wanted and the worker has not told that it already ran or runs this attempt (composing every rank's
  // environment is the costly part of an order).
  std::optional<slurm::StepSpec> step;
  // The controller saw this attempt's step run (kStepStarted). A worker that did not start or watch it (a
  // new daemon) and finds no step of its name in Slurm knows it ended unseen: it reports the end, exit
  // unknown, and never starts the attempt a second time.
  bool step_ran = false;
  int attempt = 0;
  // The attempt's current launch order (SlurmAllocationRecord::order; 0: none), and whether this daemon
  // wrote it and it is durable: only then may the worker start a step, named and fenced by it, after listing
  // the allocation's steps once more. Otherwise the worker asks for one (kOrderWanted).
  int64_t order = 0;
  bool order_mine = false;
  double stop_grace_s = 30;
};
struct SlurmOrders {
  std::vector<SlurmJobOrder> jobs;
  std::vector<std::string> cancel;  // allocations to cancel (released, not adopted)
};

// What the worker saw or did.
struct SlurmLaunchEvent {
  enum class Kind {
    kSubmitted,        // sbatch accepted the allocation request: allocation
    kAllocated,        // the allocation runs (again): allocation, nodes it holds now
    kAllocationEnded,  // the allocation ended or cannot be had: allocation, message
    kStepStarted,      // attempt's step runs: step_id
    kStepFailed,       // Slurm refused the attempt's step: message
    kStepEnded,        // attempt's step ended: exit, log (what srun said), log_tail
    kCancelled,        // a released allocation is gone: allocation
    kSuspended,        // the allocation is suspended (scontrol suspend, preemption by suspension): allocation
    kResumed,          // a suspended allocation runs again: allocation
    kPending,          // the allocation waits in Slurm's queue: allocation, message = Slurm's reason
    kOrderWanted,      // attempt's step may start only under a launch order of this daemon's: `order`, the
                       // one the worker already used (0: none), is never given again
  };
  Kind kind = Kind::kSubmitted;
  std::string job;
  std::string allocation;
  std::vector<std::string> nodes;
  int attempt = 0;
  std::string step_id;
  slurm::ExitStatus exit;
  slurm::StepLog log;
  std::string log_tail;
  std::string message;
  int64_t order = 0;
};

class SlurmAllocations {
 public:
  inline static const std::string kKeyPrefix = "slurm_alloc/";

  const SlurmAllocationRecord* Find(const std::string& job) const REQUIRES_SHARED(kControl);
  const std::map<std::string, SlurmAllocationRecord>& all() const REQUIRES_SHARED(kControl) { return jobs_; }
  const std::set<std::string>& releasing() const REQUIRES_SHARED(kControl) { return releasing_; }
  // Nodes every allocation holds or asks for, except `job`'s own.
  std::set<std::string> HeldNodes(const std::string& except = "") const REQUIRES_SHARED(kControl);

  // The job needs an allocation: request `nodes` (under a new random `request` when `named`), or adopt
  // `adopt_id` when given.
  void Want(const std::string& job, std::vector<std::string> nodes, const std::string& adopt_id, bool named,
            WriteBatch* batch) REQUIRES(kControl);
  void Submitted(const std::string& job, const std::string& id, WriteBatch* batch) REQUIRES(kControl);
  // The allocation runs holding `nodes`; returns the nodes it held before and no longer holds.
  std::vector<std::string> Running(const std::string& job, const std::string& id,
                                   std::vector<std::string> nodes, WriteBatch* batch) REQUIRES(kControl);
  // The job gives its allocation back (ended, or requeued for a new one): cancelled unless adopted.
  void Release(const std::string& job, WriteBatch* batch) REQUIRES(kControl);
  // Forgets the job's allocation without cancelling it (it ended by itself).
  void Forget(const std::string& job, WriteBatch* batch) REQUIRES(kControl);
  void Cancelled(const std::string& id, WriteBatch* batch) REQUIRES(kControl);
  // A new launch order for `attempt` of the job's allocation (one more than the last), persisted in
  // `batch`; 0 when the job has no allocation.
  int64_t NewOrder(const std::string& job, int attempt, WriteBatch* batch) REQUIRES(kControl);
  // Writes the job's record again, unchanged: a write a deposed leader cannot make (every write is fenced).
  void Touch(const std::string& job, WriteBatch* batch) const REQUIRES_SHARED(kControl);

  // Recovery at start-up from a kMeta record; false when the record is not one of ours.
  Result<bool> Restore(const Record& r) REQUIRES(kControl);

 private:
  void Persist(const std::string& job, WriteBatch* batch) const REQUIRES_SHARED(kControl);
  std::map<std::string, SlurmAllocationRecord> jobs_;
  std::set<std::string> releasing_;
};

}  // namespace shepherd
