// JobMonitor: the health of one running attempt of one job. The controller creates one per attempt, feeds
// it every report of the job (Ingest, memory only), calls Evaluate on its periodic tick (and right after an
// Ingest that says `urgent`), persists the findings Evaluate returns, forwards TakeEvidence() to the job's
// CheckpointLedger (and checkpoint reports too: the monitor does not track checkpoints), and answers
// GET /v1/jobs/{id}/health with HealthJson (adding last_known_good_checkpoint and updated_at).
//
// Summaries (report.h, kSummary) are heartbeats too (liveness, step, phase); per group with a membership they
// raise the rank's entered seq to max(completed, open.seq), and the oldest `open` of any group is the rank's
// current collective (none open: none). A summary whose group's `completed` went backwards (seq_backwards),
// or whose named group's members changed or leave the sender out (group_membership), changes nothing but the
// rank's last-seen (it proves the rank alive) and is reported in IngestResult::ignored_reason.
// Detectors (rules in each header): heartbeats (below), HangWatchdog (hang_watchdog.h), stragglers by step
// time (straggler_detector.h) and by arrival order in collectives (arrival_stragglers.h, fed by summaries),
// SDC vote (sdc_checker.h), loss and grad-norm anomalies (loss_monitor.h).
// Heartbeats: any report refreshes a rank's last-seen (receive time `now`, not the rank's clock). A rank that
// reported `finished` is never lost and no longer counts as heartbeating. A rank is
// lost when silent for heartbeat_timeout_s, or for kCheckpointAllowance × that while its last heartbeat
// said phase checkpoint_save/checkpoint_load (a heartbeat without `phase` means training). A rank that never
// reported is lost once startup_grace_s passed since the attempt started.
// Hang outside collectives: no new step (job-wide highest) and no collective entered or completed for
// hang_timeout_s (× kCheckpointAllowance while any live rank is in a checkpoint phase or in phase eval)
// while some rank still heartbeats. Startup: until the attempt has completed a step (a step report, or the
// job step rising past the first one reported: ranks report the step they are on, so a heartbeat's step
// is not a completed one) the clock starts at started_at + startup_grace_s, and no collective hang opens
// before started_at + startup_grace_s + hang_timeout_s: a first step that compiles, loads or warms up for
// minutes, with peers waiting for it in the first collective, is not a hang.
// Phase eval extends only this rule: an evaluating rank must keep heartbeating (an eval pause is not a
// death).
//
// Findings are new incidents only: an incident (per rank for heartbeat_lost, straggler, sdc_suspected; per
// job for hang, nonfinite_loss, loss_spike, loss_divergence, grad_norm_spike) yields one finding when it
// opens and another only after it has cleared and reopened. Finding ids and actions are left empty for the
// controller.
//
// Cost: Evaluate is O(world size) (plus the hang graph walk while a collective hang is open): call it on a
// tick, not per report. Ingest is O(1) amortised. Memory: sizeof(RankState) + about 24 bytes of layout per
// rank (JobMonitorTest.MemoryPerRankStaysUnderOneKiB). Not thread-safe: one owner (the controller's strand).
// No clock reads, no I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/job.h"
#include "core/json.h"
#include "core/status.h"
#include "health/arrival_stragglers.h"
#include "health/evidence.h"
#include "health/hang_watchdog.h"
#include "health/loss_monitor.h"
#include "health/named_groups.h"
#include "health/rank_layout.h"
#include "health/rank_state.h"
#include "health/report.h"
#include "health/sdc_checker.h"
#include "health/straggler_detector.h"

namespace shepherd {

struct MonitorContext {
  std::string job;
  int attempt = 0;
  Time started_at{};
  Plan plan;
  Placement placement;  // indexed by rank, placement.ranks.size() == plan.world_size()
  Policy policy;
  bool hashes_agreed = false;  // a parameter-hash check of an earlier attempt agreed
  int64_t resume_step = 0;     // the step this attempt resumed from (0: from scratch)
  // Shepherd launched the attempt, so its steps start at resume_step; false for an attempt another
  // launcher started (its ranks may have resumed from a checkpoint of their own, at any step).
  bool steps_known = false;
};

struct IngestResult {
  Status status;         // non-ok: rejected (rank outside the world); list it under "rejected"
  bool ignored = false;  // another attempt's report, or one refused below: accepted by the API, not used
  // Set when the report was refused for a reason counted in shepherd_reports_ignored_total (a summary whose
  // seq went backwards, a group membership it contradicts): nothing but the rank's last-seen changed, no
  // finding follows.
  std::optional<IgnoredReason> ignored_reason;
  bool urgent = false;   // opened an anomaly: call Evaluate now rather than at the next tick
};

class JobMonitor {
 public:
  // Allowance multiplier for heartbeats and progress while a rank saves or loads a checkpoint.
  static constexpr double kCheckpointAllowance = 10;

  // Fails (kInvalidContent) when the placement does not match the plan (RankLayout::Build).
  static Result<std::unique_ptr<JobMonitor>> Create(MonitorContext context);

  IngestResult Ingest(const Report& report, Time now);
  // `listening_since`: start of the daemon's current run of healthy time (health/lateness.h). Silence is
  // counted from max(last seen, listening_since): no rank is lost, and no job is without progress, before
  // the daemon has listened for the whole window.
  std::vector<Finding> Evaluate(Time now, Time listening_since = Time{});
  // Evidence gathered since the last call, oldest first, for CheckpointLedger::OnEvidence.
  std::vector<HealthEvidence> TakeEvidence();
  // Worlds up to this many ranks list each rank's lateness in the health JSON ("ranks.last_seen_s");
  // larger ones get a summary (median, p99, max) instead.
  static constexpr int kMaxRankLateness = 4096;
  // API.md health shape without last_known_good_checkpoint and updated_at. Hang and straggler evidence is
  // as of the last Evaluate ("evaluated_at"); heartbeat counts are computed at `now`.
  Json HealthJson(Time now) const;

  // The `node` the rank last reported (reports without one keep the previous); nullopt when none, or when
  // the rank is outside the world. Node names are interned: a rank costs 2 bytes, a distinct name one
  // string (at most 65,535 distinct names; later ones are not recorded).
  std::optional<std::string> ReportedNode(int rank) const;
  // Highest step the rank reported in any report; nullopt when none (or outside the world).
  std::optional<int64_t> RankStep(int rank) const;
  // Highest step any rank reported; -1 when none.
  int64_t JobStep() const { return job_step_; }
  // Seconds per step: the job median over full straggler windows as of the last Evaluate, else the latest
  // step_time_s any rank reported; 0 when none was reported.
  double StepTimeSeconds() const {
    return stragglers_.job_median_s > 0 ? stragglers_.job_median_s : last_step_time_s_;
  }
  // How far beyond what the attempt has seen a report's step may go. No real rank gets a million steps
  // ahead of the job's highest between two reports; a step beyond it (a forged or broken report) would
  // raise the job's step so that real progress no longer counts (the no-progress hang rule), and poison
  // the step windows of straggler and loss checks.
  static constexpr int64_t kMaxStepLead = 1'000'000;
  // The highest step a report of this attempt may carry: kMaxStepLead beyond the highest step any rank
  // reported, or beyond resume_step before any did. nullopt (no bound yet): an attempt another launcher
  // started, before its first step report (the first one sets where the job is).
  std::optional<int64_t> MaxAcceptedStep() const;
  // The attempt's last final steps (health/step_history.h), for charts.
  const StepHistory& step_history() const { return loss_.history(); }
  // Every rank reported `finished`: the attempt's training ended normally.
  bool AllFinished() const { return finished_ == layout_.world_size(); }

  const MonitorContext& context() const { return ctx_; }
  const RankLayout& layout() const { return layout_; }
  uint64_t ignored_reports() const { return ignored_; }

 private:
  JobMonitor(MonitorContext ctx, RankLayout layout);
  bool Alive(const RankState& s, Time now) const;
  // Seconds of silence allowed: the heartbeat timeout, x kCheckpointAllowance in a checkpoint phase.
  double SilenceAllowance(const RankState& s) const;
  // The named group (health/named_groups.h) of a collective of rank `rank` outside tp/pp/dp/cp/world,
  // learnt from its `members` when sent; 0: none or unknown.
  Result<uint32_t> NamedGroupOf(int rank, const CollectiveInfo& c);
  // A summary's refusal reason, checked before anything changes; else ok, with each group's named-group id
  // (0: tp/pp/dp/cp/world, or a name whose members are unknown) in `named`.
  std::optional<IgnoredReason> CheckSummary(const Report& r, std::vector<uint32_t>* named);
  void IngestSummary(const Report& r, const std::vector<uint32_t>& named, Time now);
  // Arrival timing of a summary just ingested (the arrival-order straggler rule).
  void ObserveArrivals(const Report& r, Time now);
  void EnterCollective(int rank, const CollectiveInfo& c, uint32_t named, Time report_time, Time now);
  void LeaveCollective(RankState& s, Time now);
  Finding MakeFinding(FindingKind kind, std::vector<int> ranks, Time now, std::string detail) const;
  void EvaluateHeartbeats(Time now, std::vector<bool>* alive, std::vector<Finding>* out);
  void EvaluateHang(Time now, const std::vector<bool>& alive, std::vector<Finding>* out);
  void EvaluateStragglers(Time now, std::vector<Finding>* out);
  // After a window closed: one straggler finding per rank newly named by the arrival rule.
  void EvaluateArrivals(Time now, std::vector<Finding>* out);
  void EvaluateSdc(Time now, std::vector<Finding>* out);
  void EvaluateLoss(Time now, std::vector<Finding>* out);
  void Evidence(HealthEvidence::Kind kind, int64_t step, std::string what = {});
  void RecordNode(RankState& s, const std::string& node);

  MonitorContext ctx_;
  RankLayout layout_;
  std::vector<RankState> ranks_;
  NamedGroups named_;
  SdcChecker sdc_;
  LossMonitor loss_;
  uint64_t ignored_ = 0;
  int finished_ = 0;                                      // ranks that reported `finished`
  std::vector<std::string> node_names_;                   // interned reported node names
  std::unordered_map<std::string, uint16_t> node_index_;  // name → 1 + index in node_names_

  int64_t job_step_ = -1;  // highest step any rank reported
  bool stepped_ = false;   // this attempt completed a step: the startup grace is over (see above)
  Time last_progress_{};   // when job_step_ rose or a collective was entered or completed
  Time last_busy_{};       // the last report of any rank in a checkpoint or eval phase
  // As of the last Evaluate.
  Time evaluated_at_{};
  Time listening_since_{};
  int lost_count_ = 0, never_reported_ = 0, checkpointing_ = 0, evaluating_ = 0;
  int64_t min_step_ = -1;
  HangAnalysis hang_;
  bool progress_hang_ = false;
  std::string progress_detail_;
  std::vector<int> progress_suspects_;
  StragglerAnalysis stragglers_;
  ArrivalStragglers arrivals_;
  int sdc_suspected_count_ = 0;
  std::optional<SdcCheckResult> last_sdc_;  // the latest resolved check, for the health JSON
  int64_t healthy_through_ = -1;
  std::vector<HealthEvidence> evidence_;
  double last_step_time_s_ = 0;  // the latest step_time_s of any rank
};

}  // namespace shepherd
