// JobBook: the job lifecycle. Submits jobs, places queued ones (FIFO with conservative backfill), starts
// and ends attempts, cancels, and decides success from the ranks' exits.
// Owns: every job record, its plan estimate and its current (or last) attempt; the job id sequence; the
// index spec.external_id → the jobs with it (at most one of them not ended). GPU
// allocations go through the Inventory it is given (it allocates exactly the placements of running
// attempts).
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
// What follows from an attempt starting or ending (health monitors, agents' assignments) is not done here:
// each start and end is queued as an AttemptEvent that the Controller drains (TakeEvents) within the same
// operation, before its next step reads what they change and before the operation commits, so this class
// calls nothing above it and keeps no callback (an ended attempt's final goodput marks come back with its
// kEnded event: RecordFinalMarks).
// Invariants: a job is active (launching or running) iff its attempt has no ended_at and the Inventory
// holds its placement; an attempt starts kLaunching and the Controller makes it kRunning once launched;
// every change to a job or attempt record is added to the caller's WriteBatch in the same call.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/control_lock.h"
#include "control/inventory.h"
#include "core/agent_protocol.h"
#include "core/job.h"
#include "goodput/accounting.h"
#include "health/attempt_marks.h"
#include "planner/planner.h"
#include "storage/store.h"

namespace shepherd {

// An attempt before the current one, as goodput accounting reads it: its record without its placement's
// ranks (a 131,072-rank placement is megabytes), and what that placement held.
struct PastAttempt {
  Attempt attempt;
  AttemptSize size;
};

struct JobEntry {
  Job job;
  PlanEstimate estimate;
  std::optional<Attempt> attempt;  // the current (or last) attempt
  AttemptSize attempt_size;        // what `attempt`'s placement holds (SizeOf, taken when it started)
  std::vector<PastAttempt> earlier;  // the attempts before `attempt`, oldest first
  // The placement of the attempt before `attempt` (since this daemon started): its ranks may still be
  // stopping, and what their agents say of them (flight-recorder dumps) still counts.
  std::optional<Placement> previous;
  std::set<int> exited_ok;              // ranks of the current attempt that exited 0
  std::optional<Time> next_not_before;  // JobBook::SetNextNotBefore, until the next attempt starts
};

struct AttemptEvent {
  // kJobEnded: the job entered a terminal state (after its attempt's kEnded, if it had one running);
  // `attempt` is its last, `nodes` empty.
  enum class Kind { kStarted, kEnded, kJobEnded };
  Kind kind = Kind::kStarted;
  std::string job;
  int attempt = 0;
  std::set<std::string> nodes;  // the attempt's nodes: their desired rank sets changed
  // kEnded: the attempt as its end was recorded (placement included), so its final goodput marks can be
  // recorded with it once they are known (RecordFinalMarks), even after a next attempt has started.
  std::optional<Attempt> ended;
};

// The checkpoint a job placed from the queue resumes from (nullopt: from scratch).
using ResumeChooser = std::function<std::optional<Checkpoint>(const std::string& job)>;

class JobBook {
 public:
  JobBook(Inventory* inventory, double default_gpu_memory_gib)
      : inventory_(inventory), default_gpu_memory_gib_(default_gpu_memory_gib) {}

  // Hardware the planner assumes for `spec` on this inventory, and the plan on it.
  Hardware HardwareFor(const JobSpec& spec) const REQUIRES_SHARED(kControl);
  Result<PlanEstimate> PlanFor(const JobSpec& spec) const REQUIRES_SHARED(kControl) {
    return PlanJob(spec, HardwareFor(spec));
  }

  // Admits a job (queued; Schedule may start it). kInvalidContent when larger than the usable inventory;
  // kConflict (naming external_id) when a job that has not ended has the same spec.external_id.
  Result<std::string> Submit(JobSpec spec, PlanEstimate estimate, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // Starts the next attempt (or attempt `number`, when the job's own launcher numbered it) on `placement`,
  // resuming from `resume` (nullopt: from scratch). kConflict, nothing changed, when a GPU of `placement` is
  // no longer free. REQUIRES: number, if given, is above the current attempt.
  Status StartAttempt(const std::string& job, Placement placement, const std::string& reason,
                      std::optional<Checkpoint> resume, Time now, WriteBatch* batch,
                      std::optional<int> number = std::nullopt) REQUIRES(kControl);
  // Ends the current attempt (if still open): GPUs released (those a Hold kept too), ended_at recorded.
  // Its final goodput marks are the health owner's to know: they follow with its kEnded event
  // (RecordFinalMarks), in the same operation.
  void EndAttempt(const std::string& job, Time now, WriteBatch* batch) REQUIRES(kControl);
  // An ended attempt's final goodput marks (open checkpoint phases included): applied to the attempt in
  // memory (current or earlier) and its record (the event's copy) written again with them.
  // REQUIRES: ev is a kEnded event this book queued.
  void RecordFinalMarks(const AttemptEvent& ev, const MarksSnapshot& marks, WriteBatch* batch) REQUIRES(kControl);
  // The restart decided with a backoff: the job's next attempt records `not_before` (Attempt::not_before),
  // however it then starts (after the backoff, from the queue, on spares). Cleared when the job ends.
  void SetNextNotBefore(const std::string& job, Time not_before) REQUIRES(kControl) {
    jobs_.at(job).next_not_before = not_before;
  }
  // A restart waits (its backoff) to start on `placement`: its GPUs are kept for it meanwhile, so no other
  // job is placed there. REQUIRES: the attempt ended. Released by EndAttempt (or ending the job).
  Status Hold(const std::string& job, const Placement& placement) REQUIRES(kControl) {
    return inventory_->Allocate(job, placement);
  }
  // Sets the state and reason and persists the job record.
  void SetState(const std::string& job, JobState state, const std::string& reason, Time now,
                WriteBatch* batch) REQUIRES(kControl);
  // Places queued jobs in submission order and starts them, never on `held` nodes (another job's Slurm
  // allocation holds them). Returns the ids started. A job larger than the usable inventory holds back no
  // job behind it and its reason becomes "waiting for nodes: ..." (back to "waiting for capacity" after).
  // `avoid` (called at most once, when a job is to be placed): nodes a job our agents launch goes to only
  // when it fits nowhere else (no live agent there).
  std::vector<std::string> Schedule(const ResumeChooser& resume, Time now, WriteBatch* batch,
                                    const std::set<std::string>& held = {},
                                    const std::function<std::set<std::string>()>& avoid = nullptr)
      REQUIRES(kControl);
  // Ends the job: its attempt ends, then `state` (terminal) with `reason`. kConflict when already terminal.
  Status End(const std::string& job, JobState state, const std::string& reason, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  Status Cancel(const std::string& job, Time now, WriteBatch* batch) REQUIRES(kControl) {
    return End(job, JobState::kCancelled, "cancelled", now, batch);
  }
  // A rank of the current attempt exited 0; when every rank has, the job succeeds with `reason` (returns
  // true).
  bool OnRankExitedOk(const RankRef& rank, Time now, WriteBatch* batch,
                      const char* reason = "every rank exited 0") REQUIRES(kControl);
  // Persists the job record after a caller changed counters through Mutable.
  void Persist(const std::string& job, WriteBatch* batch) REQUIRES(kControl);

  // Recovery at start-up.
  void Restore(JobEntry entry) REQUIRES(kControl);
  // REQUIRES: the job was restored. Its placement is re-allocated when the job is running.
  Status RestoreAttempt(Attempt attempt) REQUIRES(kControl);
  // The job's attempts before its current one (any order; placements already emptied, sizes taken from
  // them; an empty size is taken from the job's plan). Ignored for a job not restored.
  void RestoreEarlier(const std::string& job, std::vector<PastAttempt> earlier) REQUIRES(kControl);

  std::vector<AttemptEvent> TakeEvents() REQUIRES(kControl) { return std::exchange(events_, {}); }
  bool HasEvents() const REQUIRES_SHARED(kControl) { return !events_.empty(); }
  // Every state a job entered (submitted, an attempt started, SetState, End) since the last call, in
  // order; `position` is the index in the operation's batch of the job record that wrote it (events).
  struct StateChange {
    std::string job;
    JobState state = JobState::kQueued;
    int attempt = 0;
    std::string reason;
    std::size_t position = 0;
  };
  std::vector<StateChange> TakeStateChanges() REQUIRES(kControl) { return std::exchange(state_changes_, {}); }
  const JobEntry* Find(const std::string& id) const REQUIRES_SHARED(kControl);
  // The job with this external id that has not ended (an index lookup); null when none.
  const JobEntry* FindExternal(const std::string& external_id) const REQUIRES_SHARED(kControl);
  // The ids of every job (ended or not) with this external id, in id order.
  const std::set<std::string>& WithExternalId(const std::string& external_id) const REQUIRES_SHARED(kControl);
  // REQUIRES: the caller changes neither the state nor the seq through it (SetState does; the queue
  // index follows them).
  JobEntry* Mutable(const std::string& id) REQUIRES(kControl);
  const std::map<std::string, JobEntry>& all() const REQUIRES_SHARED(kControl) { return jobs_; }
  // Queued jobs as (seq, id), in submission order.
  const std::set<std::pair<int64_t, std::string>>& queued() const REQUIRES_SHARED(kControl) {
    return queued_;
  }

 private:
  void Event(AttemptEvent::Kind kind, const JobEntry& e) REQUIRES(kControl);
  // Keeps queued_ in step with e's state; called after every state change.
  void Track(const JobEntry& e) REQUIRES(kControl);

  Inventory* inventory_;
  double default_gpu_memory_gib_;
  std::map<std::string, JobEntry> jobs_;
  std::map<std::string, std::set<std::string>> by_external_id_;  // spec.external_id → job ids
  // Queued jobs by (seq, id): Schedule reads the queue in submission order without walking every job.
  std::set<std::pair<int64_t, std::string>> queued_;
  int64_t next_seq_ = 1;
  std::vector<AttemptEvent> events_;
  std::vector<StateChange> state_changes_;
};

}  // namespace shepherd
