// Loop breakers: before the control layer executes a restart for a finding, CheckForLoop says whether the
// job is caught in a restart loop that another restart cannot break. Pure: the job's history in, a verdict
// out; no I/O, no clock reads.
//
// Terms. The current attempt is the attempt in `attempts` whose number is finding.attempt (normally the
// last). A finding's anomaly step is its onset_step when present, else its step. Recovery-warranting
// anomalies: nonfinite_loss, loss_divergence (sdc_suspected is not one here: it has its own replay rule;
// a one-step loss_spike and a grad_norm_spike restart nothing). The reproducible rule also takes a hang that
// names culprit ranks (its step: the job's step when found), and a hang without culprits (a communication
// fault suspected on its nodes) when the earlier one at the same step was also without culprits and on
// another set of nodes. "Earlier" means a finding or attempt whose
// attempt number is below the current one.
//
// Rules (each returns its verdict with a reason that names what reproduced and at which step):
//  - kPoisonedCheckpoint: the current attempt resumed from checkpoint C (resume_checkpoint non-empty) and
//    fails early: the finding is a process_exit or a recovery-warranting anomaly whose step (anomaly step
//    for anomalies, step for exits) is absent (before any step) or <= resume_step +
//    poisoned_checkpoint_steps; and an earlier attempt that also resumed from C, placed on a different set of
//    nodes (its `nodes` not equal to the current attempt's), has a finding of the same kind that failed early
//    by the same test against its own resume_step. bad_checkpoint = C (the caller demotes it; the next
//    restart falls back to the previous good checkpoint).
//  - kReproducibleAnomaly: the finding is a recovery-warranting anomaly with anomaly step s, the current
//    attempt resumed from a step < s (resume_step 0 for a start from scratch), and an earlier finding of
//    the same kind has an anomaly step within s ± 1. The data or the code, not the hardware: blame no node.
//    The verdict does not read policy.on_reproducible_anomaly: the caller fails the job (kFail) or keeps
//    the attempt running and only records (kRecord).
//  - kDeterministicCrash: the finding is a process_exit the job caused itself (an exit_code and no signal,
//    or an OOM kill: SIGKILL with oom_kill true), and an earlier process_exit ended the same way (the same
//    exit_code, or an OOM kill too) at a step within crash_step_window of the finding's step (|a - b| <=
//    window; both steps absent also match: a crash before the first step), and the two findings name
//    disjoint, non-empty node sets (the same node could be hardware). A user error: fail fast, blame no
//    node, show the finding's log_tail.
//  - kNoProgress: no_progress_attempts = K > 0, at least K attempts exist, and each of the last K (the
//    current one included: it ends because of this finding) made no progress: its last_step is absent or
//    < resume_step + min_progress_steps.
// Precedence when several match: kPoisonedCheckpoint, then kReproducibleAnomaly, then kDeterministicCrash,
// then kNoProgress. Demoting a checkpoint keeps the job alive and is tested by the next attempt (resumed
// from the previous good checkpoint): if the anomaly then recurs at the same step the reproducible rule
// ends the job; the rules that end the job must not pre-empt the one remedy that may keep it running.
// No progress is the catch-all that bounds any remaining loop.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "core/job.h"

namespace shepherd {

// A clean exit: process_exit with an exit code and no signal (the program chose to exit).
bool IsCleanExit(const Finding& f);
// A rank killed by the kernel's OOM killer, as its agent judged (SIGKILL, oom_kill true).
bool IsOomKill(const Finding& f);
// Whether `a` and `b` ended the same way, by the job's own doing: both clean exits with equal codes, or both
// OOM kills; and at steps `a_step`, `b_step` within `window` of each other (both absent also match).
bool SameJobExit(const Finding& a, std::optional<int64_t> a_step, const Finding& b,
                 std::optional<int64_t> b_step, int window);

struct AttemptSummary {
  int number = 0;
  int64_t resume_step = 0;           // the step it resumed from (0: from scratch)
  std::string resume_checkpoint;     // checkpoint id, empty when from scratch
  std::optional<int64_t> last_step;  // highest step any rank reported in it; nullopt when none
  std::set<std::string> nodes;       // the nodes of its placement
};

struct LoopCheck {
  const Finding& finding;                    // the new finding; finding.attempt is the current attempt
  std::span<const Finding> earlier;          // the job's earlier findings, oldest first (attempt, kind, step,
                                             // onset_step, nodes, exit_code, signal)
  std::span<const AttemptSummary> attempts;  // every attempt of the job, oldest first, the current one last
  const Policy& policy;
};

struct LoopVerdict {
  enum class Kind { kNone, kReproducibleAnomaly, kDeterministicCrash, kNoProgress, kPoisonedCheckpoint };
  Kind kind = Kind::kNone;
  std::string reason;          // human-readable; says what reproduced and at which step
  std::string bad_checkpoint;  // kPoisonedCheckpoint: the checkpoint to demote
};

const char* ToString(LoopVerdict::Kind k);  // "none", "reproducible_anomaly", ...

LoopVerdict CheckForLoop(const LoopCheck& in);

}  // namespace shepherd
