// Checkpoint validity for one job, across its attempts: which checkpoints are complete, good or bad, and
// which is the last-known-good one to restart from.
//
// Lifecycle: pending (some ranks reported their part) → complete (`expected_reporters` distinct ranks
// reported) → good, or bad at any point. A complete checkpoint at step c of attempt a becomes good once,
// from evidence of attempt a only (another attempt re-ran from a different state):
//   (a) a hash check at a step >= c agreed (waived when the job has no hash checks: see Options),
//   (b) no anomaly of attempt a has its onset at or before c,
//   (c) attempt a ran healthy through step c + good_after_steps (steps at or after an anomaly's onset are
//       never healthy, even after its incident closed).
// It becomes bad (even after good: evidence wins) when an anomaly of attempt a has onset <= c, or a hash
// mismatch at step Z of attempt a follows it with no agreeing check in [c, Z): the corruption arose after
// the last agreeing check L, so every checkpoint of a with L < c is bad (those after Z too: the parameters
// stay corrupt). The same mismatch proves attempt a healthy through L (its parameters agreed there):
// healthy_through rises to L whatever the monitor could still report.
// Grading reads step evidence only (which steps agreed, which were healthy, where anomalies began), never
// when a report arrived, so a burst of reports grades as the same reports paced.
// Demote: an operator or a loop breaker (a poisoned checkpoint) makes a checkpoint bad; LastKnownGood then
// falls back to the previous good one. Overwritten: a checkpoint whose path (rank 0's part, or a whole-state
// file) a later report names again is bad too: its file now holds the later state (a script that saves
// "last.pt" each time leaves only its newest checkpoint to restart from).
// Lineage: OnAttemptStart(b, resume_step) abandons later steps of earlier attempts: their checkpoints
// keep their status but are no longer candidates for LastKnownGood/Latest.
//
// Bounds (reports are untrusted: a rank may name ever-new steps): a new pending checkpoint is ignored, and
// counted (ignored_reports), when the reporting rank already is the only reporter of
// kMaxSolePendingPerRank pending checkpoints of the attempt (a real rank is never that many checkpoints
// ahead of all others), or when the job has kMaxPending pending checkpoints. Nothing recorded is dropped, so
// grading of what is recorded is unchanged; the flooding rank's own later first parts are what is lost.
//
// Every status change is returned as a transition carrying the updated record and a reason, for the
// caller to persist. Not thread-safe: one owner (the controller's strand). Pure: time comes in as `now`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "health/evidence.h"

namespace shepherd {

struct CheckpointTransition {
  Checkpoint checkpoint;  // after the change; checkpoint.reason says why
  CheckpointStatus from = CheckpointStatus::kPending;
  bool created = false;  // first report of this checkpoint (from is kPending)
  // A rank's part of a checkpoint still pending (the status did not change, unless `created`): the caller
  // persists the record and the part, so a restart keeps which ranks reported (RestorePart).
  std::optional<int> part;
  // The checkpoint left pending: the parts persisted for it (their records may go).
  std::vector<int> settled_parts;
};

class CheckpointLedger {
 public:
  struct Options {
    int expected_reporters = 1;  // distinct ranks that must report a checkpoint (world size, or shard owners)
    int good_after_steps = 10;   // K in (c)
    bool hash_checks = true;     // false when no replica sets exist (dp=1, plain ZeRO-3) or checks are off
    // false for a job whose parameters are sharded (ZeRO-3, FSDP): no rank's file holds the whole state, so
    // a report with scope "replicated" counts as that rank's part only.
    bool whole_state_saves = true;
  };
  static constexpr int kMaxSolePendingPerRank = 16;
  static constexpr size_t kMaxPending = 1024;

  CheckpointLedger(std::string job, Options options) : job_(std::move(job)), opt_(options) {}

  // Reloads records persisted earlier (daemon restart), then the parts of the pending ones (a transition's
  // `part`): a rank whose part was restored counts once however often it reports again.
  void Restore(const std::vector<Checkpoint>& records);
  void RestorePart(int attempt, int64_t step, int rank);
  void OnAttemptStart(int attempt, int64_t resume_step);

  // A rank's part of checkpoint `step` of `attempt` is durably saved. Repeated reports of one rank count
  // once.
  // `replicated`: the file holds the whole state (a DDP rank-0 save), which completes it at once.
  std::vector<CheckpointTransition> OnCheckpointReport(int attempt, int rank, int64_t step,
                                                       const std::string& path, Time now,
                                                       bool replicated = false);
  std::vector<CheckpointTransition> OnEvidence(const HealthEvidence& e, Time now);
  // Makes checkpoint `id` bad with `reason` (already bad: no change). Unknown id: no transition.
  std::vector<CheckpointTransition> Demote(const std::string& id, const std::string& reason, Time now);

  std::optional<Checkpoint> LastKnownGood() const;  // newest good on the current lineage
  std::optional<Checkpoint> Latest() const;         // newest complete-or-good on the current lineage
  std::optional<Checkpoint> Find(const std::string& id) const;
  std::vector<Checkpoint> All() const;  // by (attempt, step)
  size_t pending() const { return pending_; }
  uint64_t ignored_reports() const { return ignored_; }  // checkpoint reports beyond the bounds above

 private:
  struct Entry {
    Checkpoint record;
    std::vector<bool> reported;  // by rank; freed once complete
    int parts = 0;               // distinct ranks seen reporting (reported's true bits)
    int first_rank = -1;         // the first of them: while parts == 1, the only reporter
  };
  struct AttemptEvidence {
    std::vector<int64_t> agreed;  // ascending hash-check steps that agreed
    std::optional<int64_t> min_anomaly_onset;
    std::string anomaly_what;
    std::optional<int64_t> corrupt_after;  // a mismatch: checkpoints with step > this are bad
    int64_t corrupt_mismatch_step = 0;
    int64_t healthy_through = -1;
  };
  // Applies the grading rules to one entry; appends a transition when its status changed.
  void Grade(Entry& e, Time now, std::vector<CheckpointTransition>* out);
  void SetStatus(Entry& e, CheckpointStatus s, std::string reason, Time now,
                 std::vector<CheckpointTransition>* out);
  bool OnLineage(const Checkpoint& c) const;
  // Marks `rank`'s part of pending `e` reported, keeping the sole-reporter counts; false when it was.
  bool AddPart(Entry& e, int rank);
  void Unsole(const Entry& e);  // `e` no longer counts for its only reporter (a second part, or settled)
  // Every other checkpoint saved to `by`'s path (a "last.pt" saved over and over) holds `by`'s state now:
  // bad as a restart point (the state the ledger graded is gone).
  void Overwrite(const Entry& by, Time now, std::vector<CheckpointTransition>* out);

  std::string job_;
  Options opt_;
  std::map<std::pair<int, int64_t>, Entry> entries_;  // (attempt, step) → checkpoint
  std::map<int, AttemptEvidence> evidence_;           // by attempt
  std::map<int, int64_t> resume_step_;                // attempt → step it resumed from
  size_t pending_ = 0;                                // entries whose status is pending
  std::map<std::pair<int, int>, int> sole_;           // (attempt, rank) → pending entries only it reported
  uint64_t ignored_ = 0;
};

}  // namespace shepherd
