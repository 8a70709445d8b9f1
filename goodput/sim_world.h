// The simulated world of one seed (goodput/sim_run.h): the Run that owns the Cluster, the job, the clock
// and the event loop. Its methods live in sim_run.cpp (the loop, time accounting, faults and attempts) and
// sim_recovery.cpp (what the Controller's RecoveryExecutor does with the policy's decisions). Internal.
#pragma once

#include <atomic>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "goodput/sim_run.h"
#include "scheduler/cluster.h"
#include "scheduler/loop_breakers.h"
#include "scheduler/recovery.h"

namespace shepherd::sim_internal {

inline constexpr const char* kJobId = "sim";
inline constexpr size_t kRecentFindings =
    64;                                       // the daemon's recurrence window (control/controller_flows.cpp)
inline constexpr size_t kAttemptHistory = 8;  // the loop breakers look a few attempts back
inline constexpr size_t kLineage = 8;
inline constexpr double kInf = std::numeric_limits<double>::infinity();
// A hard stop far above what ValidateSimInput admits: the loop never runs unbounded.
inline constexpr int64_t kMaxEvents = static_cast<int64_t>(8 * kSimMaxEventsPerSeed) + 100000;

struct SimCheckpoint {
  Checkpoint record;
  double done_s = 0;  // compute seconds of progress it holds
};

enum class Phase { kStarting, kTraining, kDetecting, kPlannedSave, kStopping, kQueued, kFailed };
enum RecoveryPart { kStop, kWait, kLaunch, kLoad };

inline Time At(double s) {
  return Time{} + Seconds(s);
}
inline double SecondsOf(Time t) {
  return ToSeconds(t - Time{});
}

class Run {
 public:
  Run(const SimInput& in, double interval_s, uint64_t seed, std::vector<int>* day_min,
      const std::atomic<bool>* cancel)
      : in_(in), interval_(interval_s), rng_(seed), cluster_(in.levels), day_min_(day_min), cancel_(cancel) {
    out_.seed = seed;
    end_ = in.duration_s;
  }

  Result<SeedOutcome> Go();

 private:
  // ---- Randomness: portable (std:: distributions differ between standard libraries).
  double Uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  double Exponential(double rate) { return -std::log1p(-Uniform01()) / rate; }
  size_t Pick(size_t n) { return std::min(n - 1, static_cast<size_t>(Uniform01() * static_cast<double>(n))); }
  FaultCause PickCause(bool hardware_only);
  static bool IsHardware(FaultCause c) { return c == FaultCause::kGpu || c == FaultCause::kHost; }
  double HardwareRate() const {
    return in_.faults.per_node_hour[static_cast<int>(FaultCause::kGpu)] +
           in_.faults.per_node_hour[static_cast<int>(FaultCause::kHost)];
  }

  bool Running() const { return phase_ == Phase::kStarting || phase_ == Phase::kTraining; }
  double StepS() const { return in_.timing.step_s; }
  int64_t StepOf(double done) const { return static_cast<int64_t>(std::floor(done / StepS() + 1e-9)); }
  double DoneAt(double t) const {
    return d0_ + SplitTraining(t - first_step_at_, interval_, in_.timing.save_s).compute_s;
  }
  // The progress a restart now would lose from.
  double Progress() const { return phase_ == Phase::kTraining ? DoneAt(now_) : frozen_done_; }

  // ---- The fleet's lists for drawing faults, refreshed after every change.
  void Refresh();
  // The fewest ready spares per day: the count that held since the last change covers the days up to now.
  void NoteSpares(int ready);

  // ---- Time accounting: every second of the run lands in one bucket.
  void Add(Bucket b, double s, std::optional<int> part = std::nullopt);
  void Account(double a, double b);

  // ---- The event loop.
  void Loop();

  void Finish();

  void OnDeadline();

  // ---- Nodes out and back.
  void TakeOut(const std::string& id, NodeActionKind kind);
  void OnRepaired();
  void OnIdleFault(const std::string& id) {
    ++out_.idle_node_faults;
    TakeOut(id, NodeActionKind::kFail);
  }

  // ---- Attempts.
  void StartAttempt(const std::optional<SimCheckpoint>& resume);

  // The current attempt's checkpoints as the ledger would grade them at its last healthy step `healthy`
  // with the last agreeing hash check at `agreed`: the newest good one and the newest, when they exist.
  void AttemptCheckpoints(double upto_t, int64_t healthy, int64_t agreed, std::vector<SimCheckpoint>* out);
  std::optional<Checkpoint> Newest(bool good_only) const;
  std::optional<SimCheckpoint> Find(const std::optional<Checkpoint>& c) const {
    if (!c) return std::nullopt;
    for (const SimCheckpoint& x : candidates_)
      if (x.record.id == c->id) return x;
    return std::nullopt;
  }

  // ---- Faults that hit the job.
  void OnJobFault(const std::string& node, FaultCause cause);

  // The finding is made: the controller's RecordFinding → RecoveryExecutor::OnFinding.
  void Decide();

  // RecoveryExecutor::BreakLoop.
  void BreakLoop(const Finding& f, const std::vector<Finding>& earlier, RecoveryInput* in,
                 RecoveryDecision* d) {
    std::vector<AttemptSummary> attempts(history_.begin(), history_.end());
    LoopVerdict v = CheckForLoop({f, earlier, attempts, in_.policy});
    switch (v.kind) {
      case LoopVerdict::Kind::kNone:
        return;
      case LoopVerdict::Kind::kPoisonedCheckpoint:
        for (SimCheckpoint& c : candidates_)
          if (c.record.id == v.bad_checkpoint) c.record.status = CheckpointStatus::kBad;
        in->last_known_good = Newest(true);
        in->latest_complete = Newest(false);
        *d = DecideRecovery(*in);
        return;
      case LoopVerdict::Kind::kReproducibleAnomaly:
        if (in_.policy.on_reproducible_anomaly == OnReproducible::kRecord) {
          d->action = RecoveryDecision::kNone;
          d->node_actions.clear();
          return;
        }
        [[fallthrough]];
      case LoopVerdict::Kind::kDeterministicCrash:
      case LoopVerdict::Kind::kNoProgress:
        d->action = RecoveryDecision::kFail;
        d->node_actions.clear();
        d->new_placement.reset();
        return;
    }
  }

  // RecoveryExecutor::Execute, with a restart always started through PlaceRestart once the old ranks are
  // stopped and the backoff has passed (StartDue): nodes lost meanwhile are replaced there.
  void Execute(const RecoveryDecision& d, bool automatic);

  // RecoveryExecutor::StartDue / Start: the held placement, its unusable nodes replaced.
  void StartDue();

  // A queued job starts once a node came back (the only job: the queue is its own).
  void TryQueued();

  // A failed job (budget spent, or a loop breaker): an operator restarts it from the latest checkpoint
  // with a fresh budget.
  void ManualIntervention();

  // A planned interruption: the checkpoint of the progress is saved; the operator's forced restart from
  // it (no budget, no backoff).
  void PlannedRestart();

  const SimInput& in_;
  const double interval_;
  std::mt19937_64 rng_;
  Cluster cluster_;
  std::vector<int>* day_min_;
  const std::atomic<bool>* cancel_;
  Job job_;
  Placement placement_;
  SeedOutcome out_;
  std::array<double, 4> parts_{};

  double now_ = 0, end_ = 0, deadline_ = kInf;
  Phase phase_ = Phase::kStarting;
  double attempt_start_ = 0, first_step_at_ = 0, d0_ = 0, frozen_done_ = 0, stop_end_ = 0;
  std::optional<FaultCause> cause_;  // the incident the current downtime belongs to
  Finding pending_;
  std::optional<SimCheckpoint> pending_resume_;
  std::vector<SimCheckpoint> lineage_, candidates_;
  std::deque<Finding> recent_;
  std::deque<AttemptSummary> history_;
  std::optional<double> last_restart_at_;
  int consecutive_ = 0;
  int64_t findings_ = 0;

  using Repair = std::pair<double, std::string>;
  std::priority_queue<Repair, std::vector<Repair>, std::greater<>> repairs_;
  std::set<std::string> in_repair_;
  std::vector<std::string> job_nodes_, idle_nodes_;
  std::unordered_map<std::string, int> rank_on_;
  bool dirty_ = true;
  int last_day_ = 0, last_ready_ = -1;
};

}  // namespace shepherd::sim_internal
