// SlurmOwner: what the control layer keeps and decides for Slurm (docs/slurm.md).
//  - Jobs launched through Slurm (LaunchMode::kSlurm, control/launch/slurm_launcher.h): their allocations
//    (SlurmAllocations), the orders for the daemon's launch worker (allocations to request or adopt, the
//    current attempt's srun step, allocations to cancel), what the worker's reports mean, the view of its
//    allocation recovery sees, and which attempts and allocation requests are not durable yet (no step runs
//    and no sbatch is issued before they are).
//  - With --slurm: the inventory sync (SlurmNodeSync) and the Slurm jobs of externally launched jobs it
//    watches (SlurmJobWatch).
// It reads and changes the Inventory and JobBook it is given (peers owned by the Controller) and never calls
// the Controller: what only the Controller does (record a finding, take a rank's exit, hold or resume a
// job's health judgement, end a job) it returns as SlurmEffects, which the Controller's Slurm wiring
// (control/controller_slurm.cpp) applies in order.
// Threading: non-const methods on the control thread; const methods also on the daemon's reader thread
// under the shared ControlLock (control/control_lock.h): REQUIRES(kControl) / REQUIRES_SHARED(kControl).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/control_lock.h"
#include "control/finding_log.h"
#include "control/inventory.h"
#include "control/job_book.h"
#include "control/job_health.h"
#include "control/launch/slurm_allocations.h"
#include "control/launch/slurm_job_watch.h"
#include "control/launch/slurm_node_sync.h"
#include "core/time.h"
#include "scheduler/cluster.h"
#include "slurm/slurm_view.h"
#include "storage/store.h"

namespace shepherd {

// One consequence of a Slurm report that the Controller carries out. Effects naming an attempt apply only
// while it is still the job's current, active attempt (an earlier effect may have restarted the job).
struct SlurmEffect {
  enum class Kind {
    kFinding,      // record `finding` (attempt: finding.attempt)
    kRankExit,     // srun told how a rank ended: `process` on `node` (attempt: process.rank.attempt)
    kLaunched,     // the attempt's step runs: `nodes` launched, and the job runs (while it is launching)
    kSuspend,      // hold the job's health judgement (until `until` when set)
    kResume,       // judge the job's health again
    kHold,         // hold (`hold`) or judge again a watched job, if it has a health record that differs
    kEndJob,       // the job ends: `state`, `reason` (unless it ended meanwhile)
    kPlaceInside,  // re-place the launching job inside its adopted allocation (`allocation`, `nodes`)
  };
  Kind kind = Kind::kFinding;
  std::string job;
  int attempt = 0;
  Finding finding;
  std::string node;
  ProcessStatus process;
  std::vector<std::string> nodes;
  std::optional<Time> until;
  bool hold = false;
  JobState state = JobState::kFailed;
  std::string reason;
  std::string allocation;
};

// A reconcile cycle's work for the daemon's Slurm worker.
struct SlurmWork {
  std::vector<SlurmNodeCommand> commands;  // drains and resumes to run in Slurm
  std::vector<WatchedSlurmJob> watched;    // jobs whose Slurm record to read (SlurmJobWatch::ToRead)
};

// A reconcile cycle's outcomes, from the daemon's Slurm worker.
struct SlurmCycleResults {
  std::vector<SlurmCommandResult> commands;  // the drains' and resumes' outcomes
  std::vector<SlurmJobSighting> sightings;   // the watched jobs' records, one per job SlurmWork listed
};

// A job whose allocation has not started and names nodes no longer usable: placed again off them.
struct BlockedSlurmAllocation {
  std::string job;
  std::set<std::string> unusable;
  std::string reason;  // "re-placed before its Slurm allocation started: n3 no longer usable"
};

class SlurmOwner {
 public:
  SlurmOwner(Inventory* inventory, JobBook* jobs, const FindingLog* findings, double gpu_memory_gib)
      : inventory_(inventory), jobs_(jobs), sync_(inventory, findings, gpu_memory_gib) {}

  // Recovery at start-up: true when the record is one of ours (the drained nodes, an allocation).
  Result<bool> Restore(const Record& r) REQUIRES(kControl);

  // ---- Durability: an attempt's step starts, and an allocation request is submitted, only once durable.
  void AttemptStarted(const std::string& job, int attempt) REQUIRES(kControl) {
    unsaved_attempts_.emplace(job, attempt);
  }
  // The allocation requests, and launch orders made for a started attempt, since the last call (the batch
  // about to commit carries them), as opaque names Saved takes back.
  std::vector<std::string> TakeNewRequests() REQUIRES(kControl) { return std::exchange(new_requests_, {}); }
  // The batch carrying these attempt starts, requests and launch orders is durable.
  void Saved(const std::vector<std::pair<std::string, int>>& attempts,
             const std::vector<std::string>& requests) REQUIRES(kControl);

  // ---- Jobs launched through Slurm
  // An attempt of a job that holds an allocation started or ended: its allocation is wanted, kept or given
  // back.
  void Settle(const AttemptEvent& ev, Time now, WriteBatch* batch) REQUIRES(kControl);
  // Allocations Slurm has not started that name a node drained, down, cordoned, failed or removed: their
  // jobs are to be placed again off those nodes (Release the allocation once placed).
  std::vector<BlockedSlurmAllocation> Blocked() const REQUIRES_SHARED(kControl);
  void Release(const std::string& job, WriteBatch* batch) REQUIRES(kControl) {
    allocations_.Release(job, batch);
  }
  // The job's allocation record, if any.
  const SlurmAllocationRecord* Find(const std::string& job) const REQUIRES_SHARED(kControl) {
    return allocations_.Find(job);
  }
  // Nodes every allocation holds or asks for (the scheduler leaves them to their jobs).
  std::set<std::string> HeldNodes() const REQUIRES_SHARED(kControl) { return allocations_.HeldNodes(); }
  // The cluster recovery sees for a job launched through Slurm: only its running allocation, the nodes
  // outside the placement as spares; nullopt for other jobs (they see the whole inventory).
  std::optional<Cluster> AllocationView(const std::string& job) const REQUIRES_SHARED(kControl);
  // What the launch worker is to do now. `started`: per job, the latest attempt the worker started a step
  // for (its spec is then left out). A step's rank environments are not filled in (SetStepEnv).
  SlurmOrders Orders(const std::map<std::string, int>& started, double stop_grace_s) const
      REQUIRES_SHARED(kControl);
  // Puts every rank's environment (indexed by rank) into `step`: what all ranks share goes to srun, the rest
  // (and CUDA_VISIBLE_DEVICES always) into the rank tables.
  static void SetStepEnv(slurm::StepSpec* step, std::vector<slurm::EnvMap> per_rank);
  // What the launch worker saw or did. `health`: the job's, if it has one. Stale events (an older
  // attempt's step) change nothing.
  std::vector<SlurmEffect> OnLaunchEvent(const SlurmLaunchEvent& ev, const JobHealth* health, Time now,
                                         WriteBatch* batch) REQUIRES(kControl);
  // Re-places a launching job inside its adopted allocation, once its nodes are known (kPlaceInside).
  // `resume`: where the new attempt resumes.
  void PlaceInside(const std::string& job, const std::string& allocation,
                   const std::vector<std::string>& nodes, std::optional<Checkpoint> resume, Time now,
                   WriteBatch* batch) REQUIRES(kControl);

  // ---- Launch orders: one step per attempt (docs/slurm.md, "One step per attempt")
  // Whether (allocation, attempt, order) is the job's current launch order: the job's current, active
  // attempt, its allocation, and the order last written for that attempt. A rank's wrapper runs its command
  // only on this answer, given once a later fenced write (Touch) is durable.
  bool OrderCurrent(const std::string& job, const std::string& allocation, int attempt, int64_t order) const
      REQUIRES_SHARED(kControl);
  // Writes the job's allocation record again (a write only the leader can make); false when it has none.
  bool Touch(const std::string& job, WriteBatch* batch) const REQUIRES_SHARED(kControl);

  // ---- The inventory sync and the watched jobs (--slurm)
  // Nodes of `view` Slurm reports down or not responding that Shepherd has not failed: node_lost findings
  // for the jobs launched through Slurm running there. To record before Sync applies the view, so such a
  // node fails by the finding (and is drained in Slurm naming it), not as Slurm's own state.
  std::vector<SlurmEffect> NodesDown(const slurm::SlurmView& view, Time now) const REQUIRES_SHARED(kControl);
  // Applies Slurm's view to the inventory; the cycle's work.
  SlurmWork Sync(const slurm::SlurmView& view, Time now, WriteBatch* batch) REQUIRES(kControl);
  // The cycle's outcomes: the commands' (drained nodes recorded) and the watched jobs' reads (holds, ends).
  std::vector<SlurmEffect> CycleDone(const std::vector<SlurmCommandResult>& results,
                                     const std::vector<SlurmJobSighting>& sightings, WriteBatch* batch)
      REQUIRES(kControl);
  // The nodes Slurm last showed a watched job's allocation on (SlurmJobWatch::NodesOf).
  std::optional<std::set<std::string>> WatchedNodesOf(const std::string& job) const
      REQUIRES_SHARED(kControl) {
    return watch_.NodesOf(job);
  }

 private:
  slurm::StepSpec StepFor(const JobEntry& e, const SlurmAllocationRecord& a) const REQUIRES_SHARED(kControl);
  void OnAllocationRunning(const SlurmLaunchEvent& ev, Time now, WriteBatch* batch,
                           std::vector<SlurmEffect>* out) REQUIRES(kControl);
  void OnStepEnded(const SlurmLaunchEvent& ev, const JobHealth* health, Time now, WriteBatch* batch,
                   std::vector<SlurmEffect>* out) REQUIRES(kControl);
  static Finding StepFinding(const SlurmLaunchEvent& ev, std::string detail, Time now);
  // A new launch order for the job's current attempt, this daemon's once `batch` is durable. `with_start`:
  // `batch` starts that attempt (durable when Saved lists the attempt).
  void NewOrder(const std::string& job, int attempt, WriteBatch* batch, bool with_start) REQUIRES(kControl);

  Inventory* inventory_;
  JobBook* jobs_;
  SlurmAllocations allocations_;
  SlurmNodeSync sync_;
  SlurmJobWatch watch_;
  // Started attempts whose batch is not durable yet: no step before (Orders).
  std::set<std::pair<std::string, int>> unsaved_attempts_;
  // Allocation requests (SlurmAllocationRecord::request) made since the last commit, and every request
  // whose batch is not durable yet: sbatch only once durable.
  std::vector<std::string> new_requests_;
  std::set<std::string> unsaved_requests_;
  // Launch orders this daemon wrote: pending until durable (by the attempt start they commit with, or the
  // name TakeNewRequests gave out), then mine. A daemon that starts (or starts leading) holds none: it
  // writes one before its first srun.
  struct Order {
    int attempt = 0;
    int64_t order = 0;
    bool operator==(const Order&) const = default;
  };
  std::map<std::string, std::pair<std::string, Order>> unsaved_orders_;  // by name: job, order
  std::map<std::string, Order> mine_;                                    // by job
};

}  // namespace shepherd
