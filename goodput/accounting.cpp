// Goodput accounting (goodput/accounting.h; docs/goodput.md, "Definitions").
//
// How: the attempts are sorted by number; a walk from the newest to the oldest (the frontier walk) splits
// each attempt's step time into productive and lost parts; then a walk from submission forward lays every
// span (queued, startup, launch, steps, detection, stop, backoff, wait, ...) on one timeline in order.
// The timeline keeps a cursor: time nobody claims (a missing mark) becomes unattributed, and time two spans
// claim (clock skew, marks that contradict each other) is taken from both and becomes unattributed, so the
// buckets tile the job's life exactly and none is negative. Last, every span is clipped to the window.
#include "goodput/accounting.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string_view>
#include <unordered_set>

namespace shepherd {
namespace {

// The timeline's labels: the buckets, with recovery in its parts.
enum class Slot {
  kQueued,
  kStartup,
  kProductive,
  kLost,
  kDetection,
  kStop,
  kWait,
  kLaunch,
  kLoad,
  kBackoff,
  kUnattributed,
};

Bucket BucketOf(Slot s) {
  switch (s) {
    case Slot::kQueued:
      return Bucket::kQueued;
    case Slot::kStartup:
      return Bucket::kStartup;
    case Slot::kProductive:
      return Bucket::kProductive;
    case Slot::kLost:
      return Bucket::kLostProgress;
    case Slot::kDetection:
      return Bucket::kDetection;
    case Slot::kStop:
    case Slot::kWait:
    case Slot::kLaunch:
    case Slot::kLoad:
      return Bucket::kRecovery;
    case Slot::kBackoff:
      return Bucket::kBackoff;
    case Slot::kUnattributed:
      return Bucket::kUnattributed;
  }
  return Bucket::kUnattributed;
}

using Cause = std::optional<BadputCause>;

struct Seg {
  Slot slot = Slot::kUnattributed;
  Time a{}, b{};
  double gpus = 0;
  Cause cause;
  int attempt = -1;  // index into the sorted attempts; -1: none
  Duration save{};   // step spans: of this span, training waited on checkpoint saves
};

// Lays spans in order from `start` to `end` (see the file comment).
class Timeline {
 public:
  Timeline(Time start, Time end) : start_(start), cursor_(start), end_(end) {}

  void Emit(Slot s, Time from, Time to, double gpus, Cause cause, int attempt, Duration save = {}) {
    from = std::min(from, end_);
    to = std::min(to, end_);
    if (to <= from) return;  // empty, or negative: claims nothing (a gap it leaves is unattributed later)
    if (from > cursor_) {
      Push({Slot::kUnattributed, cursor_, from, gpus, std::nullopt, attempt});
    } else if (from < cursor_) {
      // Claimed twice: both claims give the overlap up.
      const Time lo = std::max(from, start_);
      const Time hi = std::min(cursor_, to);
      if (hi > lo) {
        while (!segs_.empty() && segs_.back().b > lo) {
          if (segs_.back().a >= lo)
            segs_.pop_back();
          else
            segs_.back().b = lo;
        }
        // The overlap, and whatever earlier spans lay after it up to the cursor, is unattributed.
        Push({Slot::kUnattributed, lo, cursor_, gpus, std::nullopt, attempt});
      }
      from = cursor_;
    }
    if (to > from) Push({s, from, to, gpus, cause, attempt, save});
  }
  // The rest of the job's life, up to its end.
  std::vector<Seg> Finish(double gpus) {
    if (end_ > cursor_) Push({Slot::kUnattributed, cursor_, end_, gpus, std::nullopt, -1});
    return std::move(segs_);
  }

 private:
  void Push(Seg s) {
    cursor_ = std::max(cursor_, s.b);
    segs_.push_back(s);
  }
  Time start_, cursor_, end_;
  std::vector<Seg> segs_;
};

BadputCause CauseOfKind(const Finding& f) {
  switch (f.kind) {
    case FindingKind::kNodeLost:
      return BadputCause::kNodeLost;
    case FindingKind::kGpuFault:
      return BadputCause::kGpuFault;
    case FindingKind::kHang:
      return BadputCause::kHang;
    case FindingKind::kSdcSuspected:
    case FindingKind::kSdcConfirmed:
    case FindingKind::kSdcTransient:
      return BadputCause::kSdc;
    case FindingKind::kLossDivergence:
    case FindingKind::kNonfiniteLoss:
    case FindingKind::kLossSpike:
    case FindingKind::kGradNormSpike:
      return BadputCause::kLossDivergence;
    case FindingKind::kProcessExit:
      return f.fenced ? BadputCause::kControlPlane : BadputCause::kUserError;
    case FindingKind::kHeartbeatLost:
      return BadputCause::kRankLost;
    case FindingKind::kRestartRequested:
      return BadputCause::kOperatorRestart;
    case FindingKind::kStraggler:
      return BadputCause::kOther;
  }
  return BadputCause::kOther;
}

// The root finding of the incident `id` belongs to; nullptr when `id` names no finding given.
const Finding* RootOf(const std::string& id, std::span<const Finding> findings) {
  if (id.empty()) return nullptr;
  auto find = [&](const std::string& x) -> const Finding* {
    for (const Finding& f : findings)
      if (f.id == x) return &f;
    return nullptr;
  };
  const Finding* f = find(id);
  if (f && !f->incident.empty() && f->incident != f->id)
    if (const Finding* root = find(f->incident)) return root;
  return f;
}

bool HardwareCause(BadputCause c) {
  return c == BadputCause::kNodeLost || c == BadputCause::kGpuFault || c == BadputCause::kHang ||
         c == BadputCause::kSdc || c == BadputCause::kRankLost;
}

// One attempt as the walks see it.
struct Run {
  const Attempt* a = nullptr;
  AttemptSize size;
  const Finding* root = nullptr;  // of the incident that ended it
  Cause cause;
  std::optional<Time> end;        // ended_at; the job's end for the last attempt still open
  std::optional<Time> fault_at;   // training ended: the root's onset (clamped into the attempt)
  std::optional<Time> detected;   // the root's detected_at (no later than the end)
  std::optional<Time> train_end;  // the end of step time
  struct Part {
    Slot slot;
    Time a, b;
    Cause cause;
    Duration save{};
  };
  std::vector<Part> steps;  // productive and lost parts of [first_step_at, train_end), in order
};

constexpr int64_t kAll = std::numeric_limits<int64_t>::max();

// When attempt `r` passed step `s` (a step boundary inside its step time): its checkpoint at `s`, else a
// straight line from (resume_step, first_step_at) to (last_step, last_step_at). Clamped to its step time.
Time TimeOfStep(const Run& r, int64_t s, std::span<const Checkpoint> checkpoints) {
  const Attempt& a = *r.a;
  const Time lo = *a.first_step_at, hi = *r.train_end;
  Time t = hi;
  if (s <= a.resume_step) {
    t = lo;
  } else if (s == kAll || (a.last_step_at && s >= a.last_step)) {
    t = hi;
  } else {
    bool found = false;
    for (const Checkpoint& c : checkpoints)
      if (c.attempt == a.number && c.step == s) {
        t = c.created_at;
        found = true;
        break;
      }
    if (!found && a.last_step_at && a.last_step > a.resume_step) {
      const double f =
          static_cast<double>(s - a.resume_step) / static_cast<double>(a.last_step - a.resume_step);
      t = lo + std::chrono::duration_cast<Duration>((*a.last_step_at - lo) * f);
    }
  }
  return std::clamp(t, lo, std::max(lo, hi));
}

// The frontier walk: fills each run's step parts (see the header).
void SplitSteps(const Job& job, std::vector<Run>& runs, std::span<const Checkpoint> checkpoints) {
  if (runs.empty()) return;
  const Run& last = runs.back();
  int64_t frontier = kAll;
  Cause frontier_cause;
  const bool open = !last.a->ended_at && !last.root;
  if (!(job.state == JobState::kSucceeded || (open && !IsTerminal(job.state)))) {
    // Ended short (failed, cancelled, or awaiting its restart): its steps up to its last good checkpoint.
    frontier = last.a->resume_step;
    for (const Checkpoint& c : checkpoints)
      if (c.attempt == last.a->number && c.status == CheckpointStatus::kGood)
        frontier = std::max(frontier, c.step);
    frontier_cause = last.cause;
  }
  for (int i = static_cast<int>(runs.size()) - 1; i >= 0; --i) {
    Run& r = runs[i];
    const Attempt& a = *r.a;
    if (a.first_step_at && r.train_end && *r.train_end > *a.first_step_at) {
      const Time t0 = *a.first_step_at;
      const Time t1 = TimeOfStep(r, frontier, checkpoints);
      r.steps.push_back({Slot::kProductive, t0, t1, std::nullopt});
      if (i + 1 < static_cast<int>(runs.size())) {
        // Steps up to the next attempt's resume were lost to a later rollback; above it, to this attempt's
        // end.
        const int64_t resume = runs[i + 1].a->resume_step;
        const Time t2 = std::max(t1, TimeOfStep(r, std::max(resume, frontier), checkpoints));
        r.steps.push_back({Slot::kLost, t1, t2, frontier_cause});
        r.steps.push_back({Slot::kLost, t2, *r.train_end, r.cause});
      } else {
        r.steps.push_back({Slot::kLost, t1, *r.train_end, r.cause});
      }
      std::erase_if(r.steps, [](const Run::Part& p) { return p.b <= p.a; });
      // Saves: each of the attempt's checkpoints takes an equal share, in the part its save ended in; with
      // none recorded, the parts share in proportion to their length.
      const Duration save = Seconds(std::max(0.0, a.save_s));
      std::vector<const Checkpoint*> mine;
      for (const Checkpoint& c : checkpoints)
        if (c.attempt == a.number) mine.push_back(&c);
      if (!mine.empty()) {
        const Duration share = save / static_cast<int64_t>(mine.size());
        for (const Checkpoint* c : mine)
          for (Run::Part& p : r.steps)
            // A save ends when its checkpoint is reported: it lies in the part that holds that moment.
            if (c->created_at <= p.b && (c->created_at > p.a || &p == &r.steps.front())) {
              p.save += share;
              break;
            }
      } else if (save > Duration::zero()) {
        const Duration total = *r.train_end - t0;
        for (Run::Part& p : r.steps)
          p.save = std::chrono::duration_cast<Duration>(save * (ToSeconds(p.b - p.a) / ToSeconds(total)));
      }
      for (Run::Part& p : r.steps) p.save = std::min(p.save, p.b - p.a);
    }
    if (a.resume_step < frontier) {
      frontier = a.resume_step;
      frontier_cause = i > 0 ? runs[i - 1].cause : std::nullopt;
    }
  }
}

struct Totals {
  std::array<Duration, 11> slot{};  // by Slot (save moved out already)
  std::array<double, 11> slot_gh{};
  Duration save{};
  double save_gh = 0;
};

double Hours(Duration d, double gpus) {
  return ToSeconds(d) * gpus / 3600.0;
}

}  // namespace

const char* ToString(BadputCause c) {
  switch (c) {
    case BadputCause::kNodeLost:
      return "node_lost";
    case BadputCause::kGpuFault:
      return "gpu_fault";
    case BadputCause::kHang:
      return "hang";
    case BadputCause::kSdc:
      return "sdc";
    case BadputCause::kLossDivergence:
      return "loss_divergence";
    case BadputCause::kUserError:
      return "user_error";
    case BadputCause::kRankLost:
      return "rank_lost";
    case BadputCause::kOperatorRestart:
      return "operator_restart";
    case BadputCause::kControlPlane:
      return "control_plane";
    case BadputCause::kOther:
      return "other";
  }
  return "other";
}

std::optional<BadputCause> BadputCauseFromString(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(BadputCause::kOther); ++i)
    if (s == ToString(static_cast<BadputCause>(i))) return static_cast<BadputCause>(i);
  return std::nullopt;
}

BadputCause CauseOf(const Finding& f) {
  return CauseOfKind(f);
}

const char* ToString(Bucket b) {
  switch (b) {
    case Bucket::kQueued:
      return "queued";
    case Bucket::kStartup:
      return "startup";
    case Bucket::kProductive:
      return "productive";
    case Bucket::kLostProgress:
      return "lost_progress";
    case Bucket::kCheckpointSave:
      return "checkpoint_save";
    case Bucket::kDetection:
      return "detection";
    case Bucket::kRecovery:
      return "recovery";
    case Bucket::kBackoff:
      return "backoff";
    case Bucket::kUnattributed:
      return "unattributed";
  }
  return "unattributed";
}

AttemptSize SizeOf(const Attempt& a, const Job& job) {
  AttemptSize s;
  s.gpus = static_cast<double>(a.placement.ranks.size());
  std::unordered_set<std::string_view> nodes;
  for (const RankSlot& r : a.placement.ranks) nodes.insert(r.node);
  s.nodes = static_cast<double>(nodes.size());
  if (s.gpus == 0) {
    s.gpus = job.plan.world_size();
    const int per = std::max(1, job.spec.resources.gpus_per_node);
    s.nodes = static_cast<double>((job.plan.world_size() + per - 1) / per);
  }
  return s;
}

JobGoodput AccountJob(const GoodputInput& in) {
  const Job& job = in.job;
  JobGoodput out;
  // The runs, in attempt order.
  std::vector<Run> runs;
  runs.reserve(in.attempts.size());
  for (std::size_t i = 0; i < in.attempts.size(); ++i) {
    Run r;
    r.a = &in.attempts[i];
    r.size = in.sizes.size() == in.attempts.size() ? in.sizes[i] : SizeOf(in.attempts[i], job);
    runs.push_back(std::move(r));
  }
  std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.a->number < y.a->number; });

  // The job's life: submission to its end (the later of its last change and its last attempt's end), or now.
  Time end = in.now;
  if (IsTerminal(job.state)) {
    end = job.updated_at;
    if (!runs.empty() && runs.back().a->ended_at) end = std::max(end, *runs.back().a->ended_at);
    end = std::min(end, in.now);
  }
  end = std::max(end, job.created_at);

  for (std::size_t i = 0; i < runs.size(); ++i) {
    Run& r = runs[i];
    const Attempt& a = *r.a;
    const bool last = i + 1 == runs.size();
    r.end = a.ended_at;
    if (!r.end && last) r.end = end;
    r.root = RootOf(a.ended_by, in.findings);
    r.train_end = r.end ? r.end : a.last_step_at;
    if (!r.root) continue;
    r.cause = CauseOf(*r.root);
    // Times come from the finding that ended this attempt (the root, or a later finding of its incident).
    const Finding* own = nullptr;
    for (const Finding& f : in.findings)
      if (f.id == a.ended_by) own = &f;
    const Finding& timing = own ? *own : *r.root;
    if (timing.detected_at < a.started_at) {
      // The incident began before this attempt (a restart of it that failed too): no detection or stop
      // of its own; its time is the incident's recovery (or steps) to its end.
      r.fault_at = r.detected = r.train_end;
      continue;
    }
    Time detected = timing.detected_at;
    if (r.end) detected = std::min(detected, *r.end);
    r.detected = detected;
    // Training ran at least until its first step was seen.
    const Time floor = a.first_step_at ? std::clamp(*a.first_step_at, a.started_at, detected) : a.started_at;
    r.fault_at = std::clamp(timing.onset_at.value_or(detected), floor, detected);
    r.train_end = r.fault_at;
  }
  SplitSteps(job, runs, in.checkpoints);

  Timeline tl(job.created_at, end);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    const Attempt& a = *r.a;
    const int idx = static_cast<int>(i);
    const double g = r.size.gpus;
    // Before it: the queue, or the gap after the previous attempt.
    if (i == 0) {
      tl.Emit(Slot::kQueued, job.created_at, a.started_at, 0, std::nullopt, -1);
    } else if (const Run& p = runs[i - 1]; p.a->ended_at) {
      const Time pend = *p.a->ended_at;
      Time waited_from = pend;
      if (a.not_before && *a.not_before > pend) {
        waited_from = std::min(*a.not_before, a.started_at);
        tl.Emit(Slot::kBackoff, pend, waited_from, g, p.cause, idx);
      }
      if (p.root)
        tl.Emit(Slot::kWait, waited_from, a.started_at, g, p.cause, idx);
      else
        tl.Emit(Slot::kQueued, waited_from, a.started_at, 0, std::nullopt, idx);
    }
    // Its launch: startup for the first attempt, recovery (launch, load) for a restart.
    const Cause restart_cause = i > 0 ? runs[i - 1].cause : std::nullopt;
    const Slot launch = i == 0 ? Slot::kStartup : Slot::kLaunch;
    if (a.first_step_at) {
      Time load_from = *a.first_step_at;
      if (i > 0 && a.load_s > 0 && *a.first_step_at > a.started_at)
        load_from = std::max(a.started_at, *a.first_step_at - Seconds(a.load_s));
      tl.Emit(launch, a.started_at, load_from, g, restart_cause, idx);
      tl.Emit(Slot::kLoad, load_from, *a.first_step_at, g, restart_cause, idx);
      for (const Run::Part& p : r.steps) tl.Emit(p.slot, p.a, p.b, g, p.cause, idx, p.save);
    } else if (r.train_end) {
      tl.Emit(launch, a.started_at, *r.train_end, g, restart_cause, idx);
    }
    // Its end by a fault.
    if (r.root && r.fault_at) {
      tl.Emit(Slot::kDetection, *r.fault_at, *r.detected, g, r.cause, idx);
      if (r.end) tl.Emit(Slot::kStop, *r.detected, *r.end, g, r.cause, idx);
    }
  }
  // After the last attempt ended, while the job has not (or until it did): waiting for its restart.
  if (!runs.empty() && runs.back().a->ended_at) {
    const Run& l = runs.back();
    if (!l.root)
      tl.Emit(Slot::kQueued, *l.a->ended_at, end, 0, std::nullopt, -1);
    else
      tl.Emit(job.state == JobState::kRecovering ? Slot::kBackoff : Slot::kWait, *l.a->ended_at, end,
              l.size.gpus, l.cause, -1);
  } else if (runs.empty()) {
    tl.Emit(Slot::kQueued, job.created_at, end, 0, std::nullopt, -1);
  }
  const std::vector<Seg> segs = tl.Finish(runs.empty() ? 0 : runs.back().size.gpus);

  // The window, and every span clipped to it.
  const Time lo = std::max(job.created_at, in.since.value_or(job.created_at));
  const Time hi = std::min(end, in.until.value_or(end));
  const Duration wall = hi > lo ? hi - lo : Duration::zero();
  auto clip = [&](Time a, Time b) {
    const Time x = std::max(a, lo), y = std::min(b, hi);
    return y > x ? y - x : Duration::zero();
  };
  Totals t;
  std::vector<Duration> productive(runs.size());
  std::map<BadputCause, Duration> cause_d;
  std::map<BadputCause, double> cause_gh;
  for (const Seg& s : segs) {
    const Duration full = s.b - s.a;
    Duration in_window = clip(s.a, s.b);
    if (in_window <= Duration::zero()) continue;
    Duration save{};
    if (s.save > Duration::zero())
      save = std::min(
          in_window, std::chrono::duration_cast<Duration>(s.save * (ToSeconds(in_window) / ToSeconds(full))));
    const Duration kept = in_window - save;
    const int k = static_cast<int>(s.slot);
    t.slot[k] += kept;
    t.slot_gh[k] += Hours(kept, s.gpus);
    t.save += save;
    t.save_gh += Hours(save, s.gpus);
    if (s.slot == Slot::kProductive && s.attempt >= 0) productive[s.attempt] += kept;
    const Bucket b = BucketOf(s.slot);
    if (s.cause && (b == Bucket::kLostProgress || b == Bucket::kDetection || b == Bucket::kRecovery ||
                    b == Bucket::kBackoff)) {
      cause_d[*s.cause] += kept;
      cause_gh[*s.cause] += Hours(kept, s.gpus);
    }
  }

  out.from = lo;
  out.to = std::max(lo, hi);
  out.wall_s = ToSeconds(wall);
  out.gpus = runs.empty() ? static_cast<double>(job.plan.world_size()) : runs.back().size.gpus;
  for (int k = 0; k < 11; ++k) {
    Span sp{ToSeconds(t.slot[k]), t.slot_gh[k]};
    out.buckets[static_cast<int>(BucketOf(static_cast<Slot>(k)))] += sp;
    switch (static_cast<Slot>(k)) {
      case Slot::kStop:
        out.recovery.stop = sp;
        break;
      case Slot::kWait:
        out.recovery.wait = sp;
        break;
      case Slot::kLaunch:
        out.recovery.launch = sp;
        break;
      case Slot::kLoad:
        out.recovery.load = sp;
        break;
      default:
        break;
    }
  }
  out.buckets[static_cast<int>(Bucket::kCheckpointSave)] = {ToSeconds(t.save), t.save_gh};
  const double productive_s = out.buckets[static_cast<int>(Bucket::kProductive)].seconds;
  out.ettr = out.wall_s > 0 ? productive_s / out.wall_s : 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    AttemptGoodput ag;
    ag.attempt = r.a->number;
    Time aend = r.end ? *r.end : (i + 1 < runs.size() ? runs[i + 1].a->started_at : end);
    ag.wall_s = ToSeconds(clip(r.a->started_at, aend));
    ag.productive_s = ToSeconds(productive[i]);
    ag.ettr = ag.wall_s > 0 ? ag.productive_s / ag.wall_s : 0;
    ag.ended_by = r.a->ended_by;
    ag.cause = r.cause;
    out.attempts.push_back(std::move(ag));
  }
  for (const auto& [c, d] : cause_d) out.by_cause[c] = {ToSeconds(d), cause_gh[c]};
  // Incidents: each root once, when it was detected inside the window.
  std::set<std::string> roots;
  for (const Run& r : runs)
    if (r.root && r.root->detected_at >= lo && r.root->detected_at <= hi && roots.insert(r.root->id).second) {
      ++out.incidents[*r.cause];
      out.by_cause[*r.cause];  // listed even when its badput fell outside the window
    }
  return out;
}

void FleetRateTally::Add(const JobRecords& jr, Time now) {
  if (!jr.job) return;
  std::set<std::string> roots;
  const Job& job = *jr.job;
  for (std::size_t i = 0; i < jr.attempts.size(); ++i) {
    const Attempt& a = jr.attempts[i];
    const AttemptSize size = jr.sizes.size() == jr.attempts.size() ? jr.sizes[i] : SizeOf(a, job);
    Time end = a.ended_at.value_or(IsTerminal(job.state) ? job.updated_at : now);
    if (!a.ended_at) {
      // An earlier attempt without its end mark ran at most until the next one started.
      for (const Attempt& b : jr.attempts)
        if (b.number > a.number) end = std::min(end, b.started_at);
    }
    if (end > a.started_at) node_hours_ += size.nodes * ToSeconds(end - a.started_at) / 3600.0;
    if (const Finding* root = RootOf(a.ended_by, jr.findings))
      if (HardwareCause(CauseOf(*root)) && roots.insert(root->id).second) ++incidents_;
  }
}

FleetRate FleetRateTally::Result() const {
  FleetRate r;
  r.incidents = incidents_;
  r.node_hours = node_hours_;
  r.per_node_hour = node_hours_ > 0 ? incidents_ / node_hours_ : 0;
  r.enough = incidents_ >= kMinIncidentsForFleetRate && node_hours_ >= 1000;
  return r;
}

FleetRate MeasureFleetRate(std::span<const JobRecords> jobs, Time now) {
  FleetRateTally tally;
  for (const JobRecords& j : jobs) tally.Add(j, now);
  return tally.Result();
}

}  // namespace shepherd
