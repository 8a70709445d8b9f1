// Goodput accounting: where a job's wall time went. Pure: records and `now` in, the split out; no I/O, no
// clock reads, no threads. The daemon calls it for GET /v1/jobs/{id}/goodput, GET /v1/goodput and the
// per-job series on /metrics; docs/goodput.md defines every bucket with its formula.
//
// The wall time of a job (submission to its end, or to `now`) is split into buckets that sum to the whole:
//   queued           submission → first attempt's start, and any time the queue held it between attempts
//   startup          first attempt's start → its first step (launch, initialisation; no fault before it)
//   productive       step time a later good checkpoint preserves, or that belongs to the running (or
//                    successfully finished) attempt
//   lost_progress    step time redone after a restart (between the resume checkpoint and the fault onset)
//   checkpoint_save  time training waited on checkpoint saves (Attempt::save_s)
//   detection        fault onset (Finding::onset_at) → the finding (Finding::detected_at)
//   recovery         finding → first step of the next attempt, in parts: stop (finding → attempt end),
//                    wait (spares, placement), launch (start → first step, less load), load (Attempt::load_s)
//   backoff          previous attempt's end → the restart's not_before (Attempt::not_before)
//   unattributed     what the evidence cannot place (kept small; shown, never hidden)
// Step time is preserved by walking attempts newest to oldest with a frontier step: the last attempt's
// steps are productive (running or succeeded; a failed job's up to its last good checkpoint); attempt A's
// steps in (A.resume_step, frontier] are productive, its later steps lost; the frontier then becomes
// min(frontier, A.resume_step). A step boundary inside an attempt is timed by that attempt's checkpoint
// at the step (Checkpoint::created_at).
// GPU-hours of a span = its seconds × the GPUs the job held then (its placement's ranks; none while
// queued).
#pragma once

#include <array>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/time.h"

namespace shepherd {

// What a span of badput is blamed on: the root finding of the incident that caused it.
enum class BadputCause {
  kNodeLost,         // node_lost
  kGpuFault,         // gpu_fault
  kHang,             // hang
  kSdc,              // sdc_suspected, sdc_confirmed
  kLossDivergence,   // loss_divergence, nonfinite_loss, loss_spike, grad_norm_spike
  kUserError,        // process_exit not fenced (an exception, an OOM, a crash in user code)
  kRankLost,         // heartbeat_lost (a rank went silent)
  kOperatorRestart,  // restart_requested
  kControlPlane,     // a fenced exit: the daemon's lease ran out, never the job's fault
  kOther,            // straggler and anything else that ended an attempt
};
const char* ToString(BadputCause c);  // "node_lost", "gpu_fault", ..., "control_plane", "other"
std::optional<BadputCause> BadputCauseFromString(std::string_view s);
BadputCause CauseOf(const Finding& f);

enum class Bucket {
  kQueued, kStartup, kProductive, kLostProgress, kCheckpointSave, kDetection, kRecovery, kBackoff,
  kUnattributed,
};
inline constexpr int kBucketCount = 9;
const char* ToString(Bucket b);  // "queued", "startup", "productive", "lost_progress", ...

struct Span {
  double seconds = 0;
  double gpu_hours = 0;
  Span& operator+=(const Span& o) {
    seconds += o.seconds;
    gpu_hours += o.gpu_hours;
    return *this;
  }
};

struct RecoveryParts {
  Span stop, wait, launch, load;
};

struct AttemptGoodput {
  int attempt = 0;
  double wall_s = 0;        // this attempt's start → its end (or now)
  double productive_s = 0;
  double ettr = 0;          // productive_s / wall_s (0 when wall_s is 0)
  std::string ended_by;     // finding id, empty when no fault ended it
  std::optional<BadputCause> cause;
};

struct JobGoodput {
  Time from{}, to{};  // what was accounted: the job's life (submission to its end, or now) within the window
  double wall_s = 0;  // to - from (0 when the window misses the job)
  double gpus = 0;  // GPUs the job's plan holds while it runs
  std::array<Span, kBucketCount> buckets{};  // indexed by Bucket; sums to wall_s
  RecoveryParts recovery;                      // sums to buckets[kRecovery]
  double ettr = 0;                             // productive / wall
  std::vector<AttemptGoodput> attempts;
  // Badput (lost_progress, detection, recovery, backoff) by the root cause of the incident behind it.
  std::map<BadputCause, Span> by_cause;
  std::map<BadputCause, int> incidents;  // incidents per cause
};

// The GPUs and nodes an attempt held, for records kept without their placements' ranks (the daemon keeps
// only the sizes of a job's earlier attempts).
struct AttemptSize {
  double gpus = 0;
  double nodes = 0;
};
// An attempt's placement: its ranks and distinct nodes (an empty placement: the job's plan, at
// resources.gpus_per_node). O(ranks).
AttemptSize SizeOf(const Attempt& a, const Job& job);

struct GoodputInput {
  const Job& job;
  std::span<const Attempt> attempts;        // the job's, any order
  std::span<const Checkpoint> checkpoints;  // the job's, any order
  // The job's findings, any order: at least those the attempts' ended_by name and the incidents' roots.
  std::span<const Finding> findings;
  Time now{};
  // Per attempts[i] (REQUIRES: empty or as long as attempts): what it held. Empty: SizeOf each attempt.
  std::span<const AttemptSize> sizes = {};
  // The window: every span is clipped to [since, until] (unset: the job's submission, its end or now).
  std::optional<Time> since;
  std::optional<Time> until;
};

JobGoodput AccountJob(const GoodputInput& in);

// The fleet's interruption rate from its own history: incidents that ended attempts (root findings of
// the causes a node or the hardware brings: node_lost, gpu_fault, hang, sdc, rank_lost) per node-hour of
// attempts run. `enough` when at least kMinIncidentsForFleetRate incidents and 1,000 node-hours were seen.
inline constexpr int kMinIncidentsForFleetRate = 10;
struct FleetRate {
  double per_node_hour = 0;
  int incidents = 0;
  double node_hours = 0;
  bool enough = false;
};
struct JobRecords {
  const Job* job = nullptr;
  std::span<const Attempt> attempts;
  std::span<const Finding> findings;
  std::span<const AttemptSize> sizes = {};  // as GoodputInput::sizes
};
FleetRate MeasureFleetRate(std::span<const JobRecords> jobs, Time now);
// The same, one job at a time (the daemon walks its jobs without gathering them).
class FleetRateTally {
 public:
  void Add(const JobRecords& job, Time now);
  FleetRate Result() const;

 private:
  int incidents_ = 0;
  double node_hours_ = 0;
};

}  // namespace shepherd
