#include "scheduler/loop_breakers.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>

namespace shepherd {
namespace {

bool WarrantsRecovery(FindingKind k) {
  return k == FindingKind::kNonfiniteLoss || k == FindingKind::kLossDivergence;
}

// A hang that names culprit ranks, found again at the same step after a resume from before it: the code
// stalls there (a rank stuck in its own work, a collective mismatch), whatever the nodes.
bool Reproduces(const Finding& f) {
  return WarrantsRecovery(f.kind) || (f.kind == FindingKind::kHang && !f.ranks.empty());
}

std::optional<int64_t> AnomalyStep(const Finding& f) {
  return f.onset_step ? f.onset_step : f.step;
}

// The step a failure is judged at: the anomaly step for anomalies, the step for exits.
std::optional<int64_t> FailureStep(const Finding& f) {
  return f.kind == FindingKind::kProcessExit ? f.step : AnomalyStep(f);
}

const AttemptSummary* FindAttempt(std::span<const AttemptSummary> attempts, int number) {
  for (const AttemptSummary& a : attempts)
    if (a.number == number) return &a;
  return nullptr;
}

std::string StepText(std::optional<int64_t> s) {
  return s ? "step " + std::to_string(*s) : "before any step";
}

// A process_exit or recovery-warranting anomaly within `window` steps after the attempt's resume step.
bool FailsEarly(const Finding& f, const AttemptSummary& a, int window) {
  if (f.kind != FindingKind::kProcessExit && !WarrantsRecovery(f.kind)) return false;
  std::optional<int64_t> s = FailureStep(f);
  return !s || *s <= a.resume_step + window;
}

LoopVerdict Poisoned(const LoopCheck& in, const AttemptSummary& cur) {
  const Finding& f = in.finding;
  const int window = in.policy.poisoned_checkpoint_steps;
  if (f.fenced || cur.resume_checkpoint.empty() || !FailsEarly(f, cur, window)) return {};
  for (const Finding& e : in.earlier) {
    if (e.attempt >= f.attempt || e.kind != f.kind || e.fenced) continue;
    const AttemptSummary* prev = FindAttempt(in.attempts, e.attempt);
    if (!prev || prev->resume_checkpoint != cur.resume_checkpoint || prev->nodes == cur.nodes) continue;
    if (!FailsEarly(e, *prev, window)) continue;
    LoopVerdict v;
    v.kind = LoopVerdict::Kind::kPoisonedCheckpoint;
    v.bad_checkpoint = cur.resume_checkpoint;
    v.reason = "checkpoint " + cur.resume_checkpoint + " is poisoned: attempts " +
               std::to_string(prev->number) + " and " + std::to_string(cur.number) +
               " resumed from it on different nodes and both failed (" + ToString(f.kind) + ") within " +
               std::to_string(window) + " steps of loading it (at " + StepText(FailureStep(e)) + " and " +
               StepText(FailureStep(f)) + ")";
    return v;
  }
  return {};
}

// A hang with no culprit rank (every member inside: a communication fault suspected on their nodes) that
// recurs at the same step on other nodes: the hardware changed and the stall did not, so it is the code.
bool CommFaultHang(const Finding& f) {
  return f.kind == FindingKind::kHang && f.ranks.empty();
}

bool SameNodes(std::vector<std::string> a, std::vector<std::string> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

LoopVerdict Reproducible(const LoopCheck& in, const AttemptSummary& cur) {
  const Finding& f = in.finding;
  std::optional<int64_t> s = AnomalyStep(f);
  if (!(Reproduces(f) || CommFaultHang(f)) || !s || cur.resume_step >= *s) return {};
  for (const Finding& e : in.earlier) {
    std::optional<int64_t> es = AnomalyStep(e);
    if (e.attempt >= f.attempt || e.kind != f.kind || !es || std::llabs(*es - *s) > 1) continue;
    if (CommFaultHang(f) && (!CommFaultHang(e) || SameNodes(e.nodes, f.nodes))) continue;
    LoopVerdict v;
    v.kind = LoopVerdict::Kind::kReproducibleAnomaly;
    v.reason = std::string(ToString(f.kind)) + " reproduced at step " + std::to_string(*s) + " in attempt " +
               std::to_string(f.attempt) + " (resumed from step " + std::to_string(cur.resume_step) +
               ") after attempt " + std::to_string(e.attempt) + " had it at step " + std::to_string(*es) +
               ": the data or the code, not the hardware";
    return v;
  }
  return {};
}

bool Disjoint(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  if (a.empty() || b.empty()) return false;
  for (const std::string& x : a)
    for (const std::string& y : b)
      if (x == y) return false;
  return true;
}

// Where an exit happened: its step, or for an exit before its attempt's first step, the step that attempt
// resumed from. Two exits "before any step" after resuming from checkpoints 20 and 30 are not one crash.
std::optional<int64_t> ExitStep(const LoopCheck& in, const Finding& f) {
  if (f.step) return f.step;
  if (const AttemptSummary* a = FindAttempt(in.attempts, f.attempt)) return a->resume_step;
  return std::nullopt;
}

LoopVerdict DeterministicCrash(const LoopCheck& in) {
  const Finding& f = in.finding;
  for (const Finding& e : in.earlier) {
    if (e.attempt >= f.attempt ||
        !SameJobExit(e, ExitStep(in, e), f, ExitStep(in, f), in.policy.crash_step_window) ||
        !Disjoint(e.nodes, f.nodes))
      continue;
    LoopVerdict v;
    v.kind = LoopVerdict::Kind::kDeterministicCrash;
    v.reason = (IsOomKill(f) ? std::string("an OOM kill (the job's own memory use)")
                             : "exit code " + std::to_string(*f.exit_code)) +
               " reproduced at " + StepText(f.step) + " on " + f.nodes.front() + " (attempt " +
               std::to_string(f.attempt) + ") after attempt " + std::to_string(e.attempt) +
               " ended the same way at " + StepText(e.step) + " on " + e.nodes.front() +
               ": a deterministic crash (user error), no node blamed";
    return v;
  }
  return {};
}

LoopVerdict NoProgress(const LoopCheck& in) {
  // A node that failed (its agent silent, its GPU faulted) is hardware, budgeted by max_restarts: the next
  // attempt runs elsewhere, so it says nothing about whether the job can progress.
  if (in.finding.kind == FindingKind::kNodeLost || in.finding.kind == FindingKind::kGpuFault) return {};
  if (in.finding.fenced) return {};  // the daemon or the network was late, not the job
  const int k = in.policy.no_progress_attempts;
  const int m = in.policy.min_progress_steps;
  if (k <= 0 || static_cast<int>(in.attempts.size()) < k) return {};
  std::span<const AttemptSummary> last = in.attempts.last(k);
  for (const AttemptSummary& a : last)
    if (a.last_step && *a.last_step >= a.resume_step + m) return {};
  LoopVerdict v;
  v.kind = LoopVerdict::Kind::kNoProgress;
  v.reason = "no progress across restarts: attempts " + std::to_string(last.front().number) + " to " +
             std::to_string(last.back().number) + " each ended before passing its resume step + " +
             std::to_string(m) + " (the last resumed from step " + std::to_string(last.back().resume_step) +
             " and reached " + StepText(last.back().last_step) + ")";
  return v;
}

}  // namespace

const char* ToString(LoopVerdict::Kind k) {
  switch (k) {
    case LoopVerdict::Kind::kNone:
      return "none";
    case LoopVerdict::Kind::kReproducibleAnomaly:
      return "reproducible_anomaly";
    case LoopVerdict::Kind::kDeterministicCrash:
      return "deterministic_crash";
    case LoopVerdict::Kind::kNoProgress:
      return "no_progress";
    case LoopVerdict::Kind::kPoisonedCheckpoint:
      return "poisoned_checkpoint";
  }
  return "none";
}

bool IsCleanExit(const Finding& f) {
  return f.kind == FindingKind::kProcessExit && f.exit_code && !f.signal;
}

bool IsOomKill(const Finding& f) {
  return f.kind == FindingKind::kProcessExit && f.signal == SIGKILL && f.oom_kill == true;
}

bool SameJobExit(const Finding& a, std::optional<int64_t> a_step, const Finding& b,
                 std::optional<int64_t> b_step, int window) {
  const bool same =
      (IsCleanExit(a) && IsCleanExit(b) && a.exit_code == b.exit_code) || (IsOomKill(a) && IsOomKill(b));
  if (!same) return false;
  return (!a_step && !b_step) || (a_step && b_step && std::llabs(*a_step - *b_step) <= window);
}

LoopVerdict CheckForLoop(const LoopCheck& in) {
  const AttemptSummary* cur = FindAttempt(in.attempts, in.finding.attempt);
  if (cur) {
    if (LoopVerdict v = Poisoned(in, *cur); v.kind != LoopVerdict::Kind::kNone) return v;
    if (LoopVerdict v = Reproducible(in, *cur); v.kind != LoopVerdict::Kind::kNone) return v;
  }
  if (LoopVerdict v = DeterministicCrash(in); v.kind != LoopVerdict::Kind::kNone) return v;
  return NoProgress(in);
}

}  // namespace shepherd
