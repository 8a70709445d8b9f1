// One seed of the run simulator: the event loop over faults, repairs and the phases of each attempt, and
// where each second of the run goes. The decisions are the daemon's; sim_recovery.cpp carries them out.
#include <algorithm>

#include "goodput/sim_world.h"
#include "scheduler/placement.h"

namespace shepherd::sim_internal {

TrainingSplit SplitTraining(double elapsed, double interval_s, double save_s) {
  TrainingSplit s;
  if (elapsed <= 0) return s;
  const double cycle = interval_s + save_s;
  const double n = std::floor(elapsed / cycle);
  const double r = elapsed - n * cycle;
  s.saves_done = static_cast<int64_t>(n);
  s.compute_s = n * interval_s + std::min(r, interval_s);
  s.save_s = n * save_s + std::max(0.0, r - interval_s);
  return s;
}

double ElapsedForCompute(double compute, double interval_s, double save_s) {
  if (compute <= 0) return 0;
  const double n = std::max(0.0, std::ceil(compute / interval_s) - 1);  // saves before `compute` is reached
  return n * (interval_s + save_s) + (compute - n * interval_s);
}

Result<SeedOutcome> Run::Go() {
  for (const Node& n : in_.fleet)
    if (Status s = cluster_.UpsertNode(n); !s.ok()) return s;
  job_.id = kJobId;
  job_.spec.policy = in_.policy;
  job_.spec.command = {"train"};  // launched by Shepherd's agents: recovery acts
  job_.spec.launch_mode = LaunchMode::kAgents;
  job_.plan = in_.plan;
  Result<Placement> p = Place(cluster_, in_.plan, {.attempt = 1});
  if (!p.ok())
    return InvalidContent("the job does not fit the fleet: " + p.status().message(),
                          {{"plan", "the fleet cannot hold the job: " + p.status().message()}});
  if (Status s = cluster_.Allocate(kJobId, *p); !s.ok()) return s;
  placement_ = std::move(p).value();
  out_.min_ready_spares = std::numeric_limits<int>::max();
  StartAttempt(std::nullopt);
  Loop();
  if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed))
    return Unavailable("simulation cancelled");
  Finish();
  return out_;
}

FaultCause Run::PickCause(bool hardware_only) {
  const auto& r = in_.faults.per_node_hour;
  double total = 0;
  for (int c = 0; c < kFaultCauseCount; ++c)
    if (!hardware_only || IsHardware(static_cast<FaultCause>(c))) total += r[c];
  double x = Uniform01() * total;
  int last = 0;
  for (int c = 0; c < kFaultCauseCount; ++c) {
    if (hardware_only && !IsHardware(static_cast<FaultCause>(c))) continue;
    if (r[c] <= 0) continue;
    last = c;
    if (x < r[c]) return static_cast<FaultCause>(c);
    x -= r[c];
  }
  return static_cast<FaultCause>(last);
}

void Run::Refresh() {
  if (!dirty_) return;
  dirty_ = false;
  job_nodes_.clear();
  rank_on_.clear();
  std::set<std::string> held;
  if (Running() || phase_ == Phase::kDetecting || phase_ == Phase::kPlannedSave || phase_ == Phase::kStopping)
    for (const RankSlot& r : placement_.ranks)
      if (held.insert(r.node).second) {
        rank_on_[r.node] = r.rank;
        if (Running()) job_nodes_.push_back(r.node);
      }
  idle_nodes_.clear();
  int ready = 0;
  for (const Node* n : cluster_.nodes()) {
    if (n->failed || !n->schedulable) continue;
    if (!Running() || held.count(n->id) == 0) idle_nodes_.push_back(n->id);
    if (n->spare && cluster_.AllocatedGpus(n->id) == 0) ++ready;
  }
  NoteSpares(ready);
  out_.max_out_of_service = std::max(out_.max_out_of_service, static_cast<int>(in_repair_.size()));
}

void Run::NoteSpares(int ready) {
  out_.min_ready_spares = std::min(out_.min_ready_spares, ready);
  const int days = static_cast<int>(day_min_->size());
  const int day = static_cast<int>(now_ / 86400);
  if (last_ready_ >= 0)
    for (int d = std::max(0, last_day_); d <= day && d < days; ++d)
      (*day_min_)[d] = std::min((*day_min_)[d], last_ready_);
  if (day < days) (*day_min_)[day] = std::min((*day_min_)[day], ready);
  last_day_ = day;
  last_ready_ = ready;
}

void Run::Add(Bucket b, double s, std::optional<int> part) {
  if (s <= 0) return;
  out_.bucket_s[static_cast<int>(b)] += s;
  if (part) parts_[*part] += s;
  const bool badput = b == Bucket::kLostProgress || b == Bucket::kDetection || b == Bucket::kRecovery ||
                      b == Bucket::kBackoff || b == Bucket::kQueued;
  if (badput && cause_) out_.badput_s[BadputCauseOf(*cause_)] += s;
}

void Run::Account(double a, double b) {
  if (b <= a) return;
  switch (phase_) {
    case Phase::kStarting: {
      const double load_from = attempt_start_ + in_.timing.launch_s + in_.timing.init_s;
      const Bucket bucket = cause_ ? Bucket::kRecovery : Bucket::kStartup;
      Add(bucket, std::min(b, load_from) - a, kLaunch);
      Add(bucket, b - std::max(a, load_from), kLoad);
      break;
    }
    case Phase::kTraining: {
      const double save = SplitTraining(b - first_step_at_, interval_, in_.timing.save_s).save_s -
                          SplitTraining(a - first_step_at_, interval_, in_.timing.save_s).save_s;
      Add(Bucket::kCheckpointSave, save);
      break;
    }
    case Phase::kDetecting:
      Add(Bucket::kDetection, b - a);
      break;
    case Phase::kPlannedSave:
      Add(Bucket::kCheckpointSave, b - a);
      break;
    case Phase::kStopping:
      Add(Bucket::kRecovery, std::min(b, stop_end_) - a, kStop);
      Add(Bucket::kBackoff, b - std::max(a, stop_end_));
      break;
    case Phase::kQueued:
      Add(Bucket::kQueued, b - a);
      break;
    case Phase::kFailed:
      Add(Bucket::kRecovery, b - a, kWait);
      break;
  }
}

void Run::Loop() {
  while (now_ < end_ && out_.events < kMaxEvents) {
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) return;
    Refresh();
    const double job_rate =
        Running() ? in_.faults.total() * static_cast<double>(job_nodes_.size()) / 3600 : 0;
    const double idle_rate = HardwareRate() * static_cast<double>(idle_nodes_.size()) / 3600;
    const double rate = job_rate + idle_rate;
    const double t_fault = rate > 0 ? now_ + Exponential(rate) : kInf;
    const double t_repair = repairs_.empty() ? kInf : repairs_.top().first;
    const double t_phase = deadline_;
    const double next = std::min({t_fault, t_repair, t_phase, end_});
    Account(now_, next);
    now_ = next;
    if (now_ >= end_) break;
    ++out_.events;
    if (next == t_phase) {
      OnDeadline();
    } else if (next == t_repair) {
      OnRepaired();
    } else if (Uniform01() * rate < job_rate) {
      OnJobFault(job_nodes_[Pick(job_nodes_.size())], PickCause(false));
    } else {
      OnIdleFault(idle_nodes_[Pick(idle_nodes_.size())]);
    }
  }
}

void Run::Finish() {
  now_ = std::min(now_, end_);
  out_.wall_s = now_;
  out_.productive_s = Progress();
  out_.bucket_s[static_cast<int>(Bucket::kProductive)] = out_.productive_s;
  out_.ettr = out_.wall_s > 0 ? out_.productive_s / out_.wall_s : 0;
  out_.final_step = StepOf(out_.productive_s);
  for (int d = std::max(0, last_day_); d < static_cast<int>(day_min_->size()); ++d)
    if (d * 86400.0 < end_ && last_ready_ >= 0) (*day_min_)[d] = std::min((*day_min_)[d], last_ready_);
  out_.restarts = job_.attempt - 1;
  if (out_.min_ready_spares == std::numeric_limits<int>::max()) out_.min_ready_spares = 0;
}

void Run::OnDeadline() {
  switch (phase_) {
    case Phase::kStarting:
      phase_ = Phase::kTraining;
      job_.state = JobState::kRunning;
      deadline_ = kInf;
      return;
    case Phase::kDetecting:
      return Decide();
    case Phase::kPlannedSave:
      return PlannedRestart();
    case Phase::kStopping:
      return StartDue();
    case Phase::kFailed:
      return ManualIntervention();
    case Phase::kTraining:
    case Phase::kQueued:
      deadline_ = kInf;
      return;
  }
}

void Run::TakeOut(const std::string& id, NodeActionKind kind) {
  const Node* n = cluster_.Find(id);
  if (n == nullptr) return;
  Node copy = *n;
  if (kind == NodeActionKind::kFail)
    copy.failed = true;
  else
    copy.schedulable = false;
  (void)cluster_.UpsertNode(copy);
  if (in_repair_.insert(id).second) repairs_.push({now_ + in_.repair_s, id});
  dirty_ = true;
}

void Run::OnRepaired() {
  const std::string id = repairs_.top().second;
  repairs_.pop();
  in_repair_.erase(id);
  if (const Node* n = cluster_.Find(id)) {
    Node copy = *n;
    copy.failed = false;
    copy.schedulable = true;
    copy.spare = true;  // a repaired node rejoins the spare pool
    copy.reason.clear();
    (void)cluster_.UpsertNode(copy);
  }
  dirty_ = true;
  if (phase_ == Phase::kQueued) TryQueued();
}

void Run::StartAttempt(const std::optional<SimCheckpoint>& resume) {
  const double d0 = resume ? resume->done_s : 0;
  if (job_.attempt > 0) Add(Bucket::kLostProgress, frozen_done_ - d0);
  // Lineage: the candidates at the decision at or before the resume point, and the resume checkpoint.
  std::vector<SimCheckpoint> lineage;
  for (const SimCheckpoint& c : candidates_)
    if (resume && c.record.step <= resume->record.step && c.record.id != resume->record.id)
      lineage.push_back(c);
  if (resume) lineage.push_back(*resume);
  std::sort(lineage.begin(), lineage.end(),
            [](const SimCheckpoint& a, const SimCheckpoint& b) { return a.record.step < b.record.step; });
  if (lineage.size() > kLineage) lineage.erase(lineage.begin(), lineage.end() - kLineage);
  lineage_ = std::move(lineage);
  candidates_.clear();

  ++job_.attempt;
  placement_.attempt = job_.attempt;
  job_.state = JobState::kLaunching;
  phase_ = Phase::kStarting;
  attempt_start_ = now_;
  d0_ = d0;
  frozen_done_ = d0;
  first_step_at_ = now_ + in_.timing.launch_s + in_.timing.init_s + (resume ? in_.timing.load_s : 0);
  deadline_ = first_step_at_;
  AttemptSummary s{.number = job_.attempt,
                   .resume_step = resume ? resume->record.step : 0,
                   .resume_checkpoint = resume ? resume->record.id : ""};
  for (const RankSlot& r : placement_.ranks) s.nodes.insert(r.node);
  history_.push_back(std::move(s));
  if (history_.size() > kAttemptHistory) history_.pop_front();
  dirty_ = true;
}

void Run::AttemptCheckpoints(double upto_t, int64_t healthy, int64_t agreed,
                             std::vector<SimCheckpoint>* out) {
  if (phase_ != Phase::kTraining && phase_ != Phase::kDetecting && phase_ != Phase::kPlannedSave) return;
  if (upto_t < first_step_at_) return;
  const int64_t n = SplitTraining(upto_t - first_step_at_, interval_, in_.timing.save_s).saves_done;
  if (n < 1) return;
  const int64_t bound = std::min(agreed, healthy - in_.policy.good_after_steps);
  // Newest j with step_j <= bound: d0 + j·I < (bound + 1)·step.
  int64_t good = static_cast<int64_t>(std::ceil(((bound + 1) * StepS() - d0_) / interval_)) - 1;
  good = std::clamp<int64_t>(good, 0, n);
  auto make = [&](int64_t j, CheckpointStatus st) {
    SimCheckpoint c;
    c.done_s = d0_ + static_cast<double>(j) * interval_;
    c.record.step = StepOf(c.done_s);
    c.record.attempt = job_.attempt;
    c.record.job = kJobId;
    c.record.id =
        std::string(kJobId) + "/" + std::to_string(job_.attempt) + "/" + std::to_string(c.record.step);
    c.record.status = st;
    c.record.ranks_reported = 1;
    c.record.created_at = At(first_step_at_ + static_cast<double>(j) * (interval_ + in_.timing.save_s));
    out->push_back(c);
  };
  if (good >= 1) make(good, CheckpointStatus::kGood);
  if (n > good) make(n, CheckpointStatus::kComplete);
  if (good >= 1) consecutive_ = 0;  // a checkpoint became good: the backoff starts over (OnGoodProgress)
}

std::optional<Checkpoint> Run::Newest(bool good_only) const {
  const SimCheckpoint* best = nullptr;
  for (const SimCheckpoint& c : candidates_) {
    const bool ok = c.record.status == CheckpointStatus::kGood ||
                    (!good_only && c.record.status == CheckpointStatus::kComplete);
    if (ok && (best == nullptr || c.record.step > best->record.step)) best = &c;
  }
  if (best == nullptr) return std::nullopt;
  return best->record;
}

void Run::OnJobFault(const std::string& node, FaultCause cause) {
  if (cause == FaultCause::kSdc && phase_ != Phase::kTraining) return;      // no parameters to corrupt yet
  if (cause == FaultCause::kPlanned && phase_ != Phase::kTraining) return;  // maintenance waits for a run
  ++out_.interruptions[static_cast<int>(cause)];
  cause_ = cause;
  frozen_done_ = Progress();
  const bool stepped = phase_ == Phase::kTraining;
  const int64_t step = StepOf(frozen_done_);
  history_.back().last_step = stepped ? std::optional<int64_t>(step) : std::nullopt;
  const int k = in_.policy.sdc_check_every_steps;
  const int64_t agreed = k > 0 ? (step / k) * k : std::numeric_limits<int64_t>::max();
  candidates_ = lineage_;
  if (cause == FaultCause::kPlanned) {
    phase_ = Phase::kPlannedSave;  // a checkpoint of the progress, then the restart
    AttemptCheckpoints(now_, step, agreed, &candidates_);
    deadline_ = now_ + in_.timing.save_s;
    return;
  }
  Finding f;
  f.id = "f-" + std::to_string(++findings_);
  f.job = kJobId;
  f.attempt = job_.attempt;
  f.incident = f.id;
  f.nodes = {node};
  if (stepped) f.step = step;
  f.onset_at = At(now_);
  double detect = DetectionLatency(cause, in_.detectors, in_.policy);
  switch (cause) {
    case FaultCause::kGpu:
      f.kind = FindingKind::kGpuFault;
      break;
    case FaultCause::kHost:
      f.kind = FindingKind::kNodeLost;
      break;
    case FaultCause::kNetwork:
      f.kind = FindingKind::kHang;  // every member entered the collective: the nodes' link is suspected
      break;
    case FaultCause::kSoftware:
      f.kind = FindingKind::kProcessExit;
      f.exit_code = 1;
      f.ranks = {rank_on_[node]};
      break;
    case FaultCause::kSdc: {
      f.kind = FindingKind::kSdcSuspected;
      f.sdc_verdict = SdcVerdict::kMajority;
      f.ranks = {rank_on_[node]};
      f.onset_step = step + 1;  // the step in progress computes on corrupt state
      // Found at the next hash check; training runs on until then (its steps are lost).
      const int64_t check = k > 0 ? (step / k + 1) * k : step + 1;
      const double at = first_step_at_ + ElapsedForCompute(static_cast<double>(check) * StepS() - d0_,
                                                           interval_, in_.timing.save_s);
      detect = std::max(0.0, at - now_);
      f.step = check;
      break;
    }
    case FaultCause::kPlanned:
      break;
  }
  f.detected_at = At(now_ + detect);
  // Checkpoints as graded when the finding is made: an SDC's are healthy only before its onset.
  if (stepped)
    AttemptCheckpoints(cause == FaultCause::kSdc ? now_ + detect : now_, step, agreed, &candidates_);
  pending_ = std::move(f);
  phase_ = Phase::kDetecting;
  deadline_ = now_ + detect;
  dirty_ = true;
}

Result<SeedOutcome> RunSeed(const SimInput& in, double interval_s, uint64_t seed,
                            std::vector<int>* day_min_spares, const std::atomic<bool>* cancel) {
  return Run(in, interval_s, seed, day_min_spares, cancel).Go();
}

}  // namespace shepherd::sim_internal
