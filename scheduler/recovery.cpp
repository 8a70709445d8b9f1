// DecideRecovery: the rules per finding kind, the restart budget, backoff and checkpoint choice. See
// recovery.h for the contract; relocation and ManualRestart are in recovery_relocate.cpp.
#include "scheduler/recovery.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <set>
#include <string>
#include <vector>

#include "scheduler/loop_breakers.h"
#include "scheduler/recovery_internal.h"

namespace shepherd {

using recovery_internal::Relocate;
using recovery_internal::ResumeLine;
using recovery_internal::StragglerMarks;

const char* ToString(NodeActionKind k) {
  return k == NodeActionKind::kFail ? "fail" : "cordon";
}

Time RestartNotBefore(const Policy& policy, Time now, std::optional<Time> last_restart_at,
                      int consecutive_restarts) {
  if (!last_restart_at) return now;
  constexpr double kCapS = 300;
  // ldexp saturates to inf for huge exponents; min() then caps it.
  const double delay =
      std::min(kCapS, std::ldexp(policy.restart_backoff_s, std::max(0, consecutive_restarts)));
  return std::max(now, *last_restart_at + Seconds(delay));
}

namespace {

// Anomalies that warrant a restart from last-known-good. A one-step loss_spike does not (record only), nor
// does a grad_norm_spike: one outlier sample's gradient, which clipping absorbs; corruption of the
// parameters themselves shows in the replicas' hashes.
bool IsLossAnomaly(FindingKind k) {
  return k == FindingKind::kLossDivergence || k == FindingKind::kNonfiniteLoss;
}
bool IsSdc(FindingKind k) {
  return k == FindingKind::kSdcSuspected || k == FindingKind::kSdcConfirmed;
}
bool IsRankLoss(FindingKind k) {
  return k == FindingKind::kHeartbeatLost || k == FindingKind::kProcessExit;
}
// A rank of the job was lost or stuck: it exited, fell silent, or is the culprit of a hang.
// A rank its agent stopped for the lease (fenced) is none: the daemon or the network was late.
bool IsRankFault(const Finding& f) {
  if (f.fenced) return false;
  return IsRankLoss(f.kind) || (f.kind == FindingKind::kHang && !f.ranks.empty());
}
// A rank fault its node can cause: a silent rank (a hang culprit that stopped reporting too), or a rank
// killed by a signal a fault of the node can send (SIGBUS and SIGSEGV from bad memory, ...). Not: a clean
// exit (the program chose its code); a hang whose culprits all heartbeat (busy in their own work); a signal
// only people and programs send (a `kill`, Ctrl-C, a scheduler's TERM); a SIGKILL its agent judged, since
// the OOM killer's is the job's own memory use and any other a person's or a program's.
bool NodeCanCause(const Finding& f) {
  if (f.kind == FindingKind::kHang) return !f.ranks.empty() && !f.silent_ranks.empty();
  if (!IsRankLoss(f.kind) || IsCleanExit(f)) return false;
  if (!f.signal) return true;
  switch (*f.signal) {
    case SIGTERM:
    case SIGINT:
    case SIGHUP:
    case SIGQUIT:
    case SIGUSR1:
    case SIGUSR2:
    case SIGPIPE:
    case SIGXCPU:
      return false;
    case SIGKILL:
      return !f.oom_kill.has_value();  // no agent could tell: it may be the node's (a memory failure)
    default:
      return true;
  }
}
bool IsCommFault(const Finding& f) {
  return f.kind == FindingKind::kHang && f.ranks.empty() && !f.nodes.empty();
}

// The nodes a finding names: those of its ranks in the current placement when it names ranks (culprits),
// else its nodes. nodes_first prefers its nodes (node_lost, gpu_fault name the node itself).
std::set<std::string> Implicated(const Finding& f, const Placement& p, bool nodes_first) {
  std::set<std::string> out;
  if (nodes_first && !f.nodes.empty()) return {f.nodes.begin(), f.nodes.end()};
  for (int r : f.ranks) {
    if (r >= 0 && r < static_cast<int>(p.ranks.size())) out.insert(p.ranks[r].node);
  }
  if (out.empty()) out.insert(f.nodes.begin(), f.nodes.end());
  return out;
}

// Nodes of `now` that an earlier finding matching `same_kind` also named. Findings of the current finding's
// own job and attempt are the same incident, not a recurrence: one killed rank takes its peers down in
// their next collective, and those losses (on the same nodes, a second later) are its cascade.
template <typename Pred>
std::set<std::string> Recurring(const std::set<std::string>& now, std::span<const Finding> earlier,
                                const Finding& current, Pred same_kind) {
  std::set<std::string> out;
  for (const Finding& e : earlier) {
    if ((!current.id.empty() && e.id == current.id) || !same_kind(e)) continue;
    if (e.job == current.job && e.attempt == current.attempt) continue;
    for (const std::string& n : e.nodes) {
      if (now.count(n) != 0) out.insert(n);
    }
  }
  return out;
}

std::string WithDetail(const std::string& what, const Finding& f) {
  return f.detail.empty() ? what : what + ": " + f.detail;
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// Last-known-good, else latest complete, else none; never a pending or bad checkpoint, and never one at or
// after the finding's anomaly onset (for SDC and loss findings without an onset: at or after its step).
std::optional<Checkpoint> ChooseCheckpoint(const RecoveryInput& in, std::string* why) {
  const Finding& f = in.finding;
  std::optional<int64_t> bound = f.onset_step;
  if (!bound && (IsSdc(f.kind) || IsLossAnomaly(f.kind))) bound = f.step;
  auto tainted = [&](const Checkpoint& c) { return bound && c.step >= *bound; };
  std::string skipped;
  if (in.last_known_good) {
    const Checkpoint& c = *in.last_known_good;
    if (c.status == CheckpointStatus::kGood && !tainted(c)) {
      *why = "good";
      return c;
    }
    skipped = "last-known-good " + c.id + (tainted(c) ? " is at or after the anomaly onset" : " is not good");
  } else {
    skipped = "no last-known-good";
  }
  if (in.latest_complete) {
    const Checkpoint& c = *in.latest_complete;
    const bool usable = c.status == CheckpointStatus::kComplete || c.status == CheckpointStatus::kGood;
    if (usable && !tainted(c)) {
      *why = std::string("latest ") + ToString(c.status) + "; " + skipped;
      return c;
    }
    skipped +=
        "; latest complete " + c.id + (usable ? " is at or after the anomaly onset" : " is not complete");
  }
  *why = skipped;
  return std::nullopt;
}

// The cordon reason for a straggler's node: it names the finding and its evidence.
std::string StragglerReason(const Finding& f) {
  return "straggler " + (f.id.empty() ? std::string("finding") : f.id) + ": " + f.detail;
}

// What a finding means: the nodes to cordon or fail, and why. *act is false when nothing is to be done.
struct Verdict {
  bool act = true;
  bool replay = false;
  std::vector<NodeAction> faulty;
  std::set<std::string> avoid;  // leave these nodes without blaming them
  std::vector<std::string> replay_nodes;
  std::optional<std::string> set_aside;  // replay: the suspect moved off (also in avoid)
  std::set<std::string> suspects;        // set_aside: every node the recurrence left undecided
  bool restart = true;                   // false: the node actions only (the job runs on)
  // The restart is worth it only as decided: without budget or a node to replace the blamed ones, the
  // job runs on as it is (a straggler replacement) rather than failing or waiting in the queue.
  bool optional = false;
  bool settles_sdc = false;
  std::string record;  // !act: the action line when the kind's usual one would not say why
  std::string why;
};

void Blame(const std::set<std::string>& nodes, NodeActionKind action, const std::string& reason, Verdict* v) {
  for (const std::string& n : nodes) v->faulty.push_back({n, action, reason});
}

Verdict Judge(const RecoveryInput& in) {
  const Finding& f = in.finding;
  const FindingKind k = f.kind;
  const std::string kind = ToString(k);
  Verdict v;
  if (k == FindingKind::kNodeLost || k == FindingKind::kGpuFault) {
    std::set<std::string> nodes = Implicated(f, in.placement, /*nodes_first=*/true);
    // A GPU fault is the hardware's own report, and a Slurm-launched job's node_lost is Slurm's (srun's node
    // failure, the node dropped from the allocation): the node fails (and is drained). Our agent's silence
    // is no more than unreachable, which a dead machine, its network or just the agent (stopped, crashed, an
    // expired credential) all look like: the node is cordoned as suspect, and returns by its agent's health
    // check (or an operator) once back.
    const bool hardware = k == FindingKind::kGpuFault || in.job.spec.launch_mode == LaunchMode::kSlurm;
    Blame(nodes, hardware ? NodeActionKind::kFail : NodeActionKind::kCordon, WithDetail(kind, f), &v);
    v.why = kind + " on " + Join(nodes) + (hardware ? ": node at fault" : ": node unreachable");
  } else if (f.fenced) {
    v.why =
        "ranks stopped by their agent's fence (the daemon's lease ran out): the daemon or the network "
        "was late; restart on the same nodes without blame";
  } else if (IsRankFault(f)) {
    std::set<std::string> nodes = Implicated(f, in.placement, false);
    const bool vouched = k == FindingKind::kHeartbeatLost && !nodes.empty() &&
                         std::all_of(nodes.begin(), nodes.end(),
                                     [&](const std::string& n) { return in.vouched_nodes.count(n) != 0; });
    const bool every_rank = static_cast<int>(f.ranks.size()) == in.job.plan.world_size();
    if (vouched && every_rank) {
      v.act = false;
      v.why =
          "every rank is silent while its agent lists its process running: the job is paused (SIGSTOP, a "
          "debugger) or frozen as a whole, not lost; recorded, nothing stopped";
      return v;
    }
    if (k == FindingKind::kHeartbeatLost && every_rank && in.job.spec.launch_mode == LaunchMode::kExternal) {
      v.act = false;  // nothing recommended, and no requeue (external_remediation)
      v.why =
          "every rank of a job another launcher runs is silent at once: paused, frozen or cut off from the "
          "daemon, which nothing here can tell apart (its launcher says when it ended); recorded";
      return v;
    }
    // A first rank fault restarts on the same nodes: one lost or stuck rank is no evidence against its
    // node. A clean exit (the program chose its exit code: an exception, a rendezvous that could not bind
    // its port, a peer that died under a collective), a hang culprit still heartbeating (rank-0-only work,
    // a deadlock in the code) or a kill is no evidence even recurring: it moves the ranks off the node
    // without blame, and another node decides (there the same exit is a deterministic crash, the same
    // stall no progress; CheckForLoop). Only faults a node can cause (NodeCanCause) recurring suspect it.
    std::set<std::string> again;
    if (NodeCanCause(f)) again = Recurring(nodes, in.earlier_findings, f, NodeCanCause);
    if (k == FindingKind::kHeartbeatLost)  // the agent saw the process run: the process, not the node
      for (const std::string& n : in.vouched_nodes) again.erase(n);
    for (const std::string& n : Recurring(nodes, in.earlier_findings, f, IsRankFault))
      if (again.count(n) == 0) v.avoid.insert(n);
    Blame(again, NodeActionKind::kCordon, "ranks lost again on this node (" + kind + ")", &v);
    v.why = !again.empty()    ? kind + " recurring on " + Join(again) + ": node suspected"
            : v.avoid.empty() ? kind + (nodes.empty() ? "" : " on " + Join(nodes)) +
                                    ": first time, restart without blaming the node"
                              : "ranks lost again on " + Join(v.avoid) +
                                    ": the code or the node; move off it without blame, another node decides";
  } else if (IsCommFault(f)) {
    std::set<std::string> nodes(f.nodes.begin(), f.nodes.end());
    std::set<std::string> again = Recurring(nodes, in.earlier_findings, f, IsCommFault);
    Blame(again, NodeActionKind::kCordon, "communication fault again on this node", &v);
    v.why = again.empty() ? "communication fault on " + Join(nodes) + ": first time, assumed transient"
                          : "communication fault recurring on " + Join(again);
  } else if (k == FindingKind::kHang) {
    v.why = "hang without culprits: restart";
  } else if (k == FindingKind::kSdcConfirmed ||
             (k == FindingKind::kSdcSuspected && f.sdc_verdict == SdcVerdict::kMajority)) {
    std::set<std::string> nodes = Implicated(f, in.placement, false);
    Blame(nodes, NodeActionKind::kCordon, WithDetail(kind, f), &v);
    v.why = kind + (k == FindingKind::kSdcConfirmed ? " on " : " (majority vote) on ") + Join(nodes);
    v.settles_sdc = true;  // a replay under way (a 2-2 split's) is answered too
    if (k == FindingKind::kSdcConfirmed) {
      // The node a replay set aside: the job already runs without it, healthy.
      v.restart = std::any_of(in.placement.ranks.begin(), in.placement.ranks.end(),
                              [&](const RankSlot& s) { return nodes.count(s.node) != 0; });
      if (!v.restart) v.why += ", which runs none of the job's ranks: the job runs on";
    }
  } else if (k == FindingKind::kSdcSuspected && f.sdc_verdict == SdcVerdict::kNoAgreement) {
    // Even after checks that agreed: replicas that diverge between syncs by design (local SGD, custom
    // averaging) look the same, and a replay of them would agree at the next sync and restart them again
    // at the next divergence until their budget ran out. Checkpoints since the last agreeing check are bad.
    v.act = false;
    v.why =
        "no two replicas' parameter hashes agree: one corrupt node would leave the others agreeing, so the "
        "hashed state is not replicated (software), not corruption; recorded";
  } else if (k == FindingKind::kSdcSuspected && !in.hashes_ever_agreed) {
    v.act = false;
    v.why =
        "parameter hashes without a majority, and no check of this job has ever agreed: the hashed "
        "state is not replicated (buffers, nondeterministic kernels), not corruption; recorded";
  } else if (k == FindingKind::kSdcSuspected) {  // no majority (or no verdict): a replay decides
    std::set<std::string> nodes = Implicated(f, in.placement, false);
    std::set<std::string> again;
    for (const std::string& n : in.pending_replay_nodes) {
      if (nodes.count(n) != 0) again.insert(n);
    }
    if (!again.empty()) {
      // A recurrence names no node by itself: both replicas' nodes were there both times, and replicas
      // that diverge by design (local SGD, custom averaging) recur as well. Replay once more with one
      // suspect's ranks elsewhere, unblamed: the mismatch stopping without it is the evidence that names it
      // (sdc_confirmed); recurring, it is cleared and the next suspect is moved.
      v.set_aside = *again.begin();
      v.avoid.insert(*v.set_aside);
      v.suspects = again;
      v.replay = true;
      for (const std::string& n : again)
        if (n != *v.set_aside) v.replay_nodes.push_back(n);
      v.why = "SDC recurred after a replay on " + Join(again) + ": replay again without " + *v.set_aside +
              " to tell whether it is the node";
    } else if (in.set_aside_replay) {
      v.act = false;
      v.settles_sdc = true;
      v.record =
          "record only: the mismatch recurred with every suspect node moved off (the code, not a node)";
      v.why =
          "SDC recurred on a replay with every suspect node moved off: the replicas diverge by the "
          "code (or its data), not by a node; recorded";
    } else {
      v.replay = true;
      v.replay_nodes.assign(nodes.begin(), nodes.end());
      v.why = "SDC suspected without a majority (" + Join(nodes) +
              "): replay from last-known-good on the same nodes";
    }
  } else if (IsLossAnomaly(k)) {
    v.why = kind + ": restart from last-known-good";
  } else if (k == FindingKind::kLossSpike) {
    v.act = false;  // a one-step outlier of noisy training; divergence is loss_divergence
    v.why = "loss spike: a one-step outlier, recorded, no action";
  } else if (k == FindingKind::kGradNormSpike) {
    v.act = false;
    v.why =
        "gradient-norm spike with a normal loss: recorded, no action (an outlier batch; corrupted "
        "parameters would show in the replicas' hashes)";
  } else if (k == FindingKind::kStraggler) {
    const StragglerAction action = in.job.spec.policy.straggler_action;
    std::set<std::string> nodes = Implicated(f, in.placement, false);
    if (f.straggler && action == StragglerAction::kReplace &&
        in.job.spec.launch_mode != LaunchMode::kExternal) {
      // A persistent late arriver (never one window: the arrival rule names a rank only after a sustained
      // run), replaced by a spare from last-known-good. Optional: no spare, or no budget, leaves the job
      // running slow rather than queued or failed.
      Blame(nodes, NodeActionKind::kCordon, StragglerReason(f), &v);
      v.optional = true;
      v.why = "persistent straggler on " + Join(nodes) + ": replace it (policy.straggler_action replace)";
    } else {
      v.act = false;  // throughput only; a restart would cost more than the slow node
      v.why = "straggler: reported, no action";
      if (f.straggler && action == StragglerAction::kCordonAfterRestart &&
          in.job.spec.launch_mode != LaunchMode::kExternal) {
        v.record = "record: " + Join(nodes) +
                   " is replaced at the job's next restart and left cordoned (policy.straggler_action "
                   "cordon_after_restart)";
        v.why = "persistent straggler on " + Join(nodes) + ": recorded, replaced at the next restart";
      }
    }
  } else {
    v.act = false;
    v.why = "no recovery rule for finding kind " + kind;
  }
  return v;
}

// A set-aside replay needs a node to take the suspect's ranks. Without one nothing can be shown: the
// suspects (each present at both mismatches) are cordoned, their reason saying it is unproven.
void SetAsideOrCordon(const RecoveryInput& in, Verdict* v) {
  RecoveryDecision probe;
  Relocate(in.job, in.placement, in.cluster, v->faulty, v->avoid, &probe);
  if (probe.action != RecoveryDecision::kQueue) return;
  v->avoid.erase(*v->set_aside);
  v->set_aside.reset();
  v->replay = false;
  v->replay_nodes.clear();
  v->settles_sdc = true;
  const std::string which = v->suspects.size() == 1 ? Join(v->suspects) : "one of " + Join(v->suspects);
  Blame(v->suspects, NodeActionKind::kCordon,
        "SDC recurred after a replay on " + which + " (no node to replay without it: unproven)", v);
  v->why = "SDC recurred after a replay on " + which +
           ", and no spare or free node can take its ranks to show whether it stops without them: cordoned";
}

}  // namespace

std::vector<NodeAction> recovery_internal::StragglerMarks(const Job& job, const Placement& placement,
                                                          std::span<const Finding> earlier, const Finding* current,
                                                          const std::vector<NodeAction>& blamed) {
  std::vector<NodeAction> out;
  if (job.spec.policy.straggler_action != StragglerAction::kCordonAfterRestart ||
      job.spec.launch_mode == LaunchMode::kExternal)
    return out;
  std::set<std::string> placed;
  for (const RankSlot& s : placement.ranks) placed.insert(s.node);
  auto taken = [&](const std::string& n) {
    auto same = [&](const NodeAction& a) { return a.node == n; };
    return std::any_of(blamed.begin(), blamed.end(), same) || std::any_of(out.begin(), out.end(), same);
  };
  auto mark = [&](const Finding& e) {
    if (e.kind != FindingKind::kStraggler || !e.straggler || e.job != job.id || e.attempt != job.attempt) return;
    for (const std::string& n : Implicated(e, placement, false))
      if (placed.count(n) != 0 && !taken(n)) out.push_back({n, NodeActionKind::kCordon, StragglerReason(e)});
  };
  for (const Finding& e : earlier) mark(e);
  if (current) mark(*current);
  return out;
}

RecoveryDecision DecideRecovery(const RecoveryInput& in) {
  const Job& job = in.job;
  const Finding& f = in.finding;
  RecoveryDecision d;
  d.not_before = in.now;
  if (!IsActive(job.state)) {
    d.reason = std::string("job is ") + ToString(job.state) + ", not running: no action";
    return d;
  }
  if (f.attempt != job.attempt) {
    d.reason = "finding of attempt " + std::to_string(f.attempt) + " while the job runs attempt " +
               std::to_string(job.attempt) + ": ignored";
    return d;
  }
  Verdict v = Judge(in);
  if (v.set_aside) SetAsideOrCordon(in, &v);
  d.reason = v.why;
  if (!v.act) {
    d.sdc_settled = v.settles_sdc;
    if (!v.record.empty()) {
      d.actions.push_back(v.record);
      return d;
    }
    if (f.kind == FindingKind::kStraggler) d.actions.push_back("report only: straggler");
    if (f.kind == FindingKind::kLossSpike) d.actions.push_back("record only: loss spike (one-step outlier)");
    if (f.kind == FindingKind::kGradNormSpike) d.actions.push_back("record only: gradient-norm spike");
    if (f.kind == FindingKind::kSdcSuspected)
      d.actions.push_back(f.sdc_verdict == SdcVerdict::kNoAgreement
                              ? "record only: no two replicas agree (state that is not replicated)"
                              : "record only: no hash check of this job has ever agreed");
    if (f.kind == FindingKind::kHeartbeatLost)
      d.actions.push_back(job.spec.launch_mode == LaunchMode::kExternal
                              ? "record only: every rank silent at once (paused, frozen or cut off; its "
                                "launcher says when it ended)"
                              : "record only: every rank paused or frozen while its agent lists it running");
    return d;
  }
  d.sdc_settled = v.settles_sdc;
  d.node_actions = v.faulty;
  for (const NodeAction& a : v.faulty) d.actions.push_back(std::string(ToString(a.action)) + " " + a.node);
  if (!v.restart) return d;
  d.actions.push_back("stop attempt " + std::to_string(job.attempt));

  const Policy& policy = job.spec.policy;
  d.spends_budget = !(f.fenced && in.daemon_was_late) && !in.free_restart;
  if (in.free_restart)
    d.actions.push_back("spend no restart budget: incident " + f.incident + " already spent it");
  else if (!d.spends_budget)
    d.actions.push_back("spend no restart budget: the daemon itself was late");
  if (v.optional && d.spends_budget && job.restarts >= policy.max_restarts) {
    RecoveryDecision none;
    none.not_before = in.now;
    none.reason = v.why + "; the restart budget is spent (" + std::to_string(job.restarts) + " of " +
                  std::to_string(policy.max_restarts) + "): recorded, the job runs on";
    none.actions.push_back("record only: restart budget spent, " + Join(Implicated(f, in.placement, false)) +
                           " not replaced");
    return none;
  }
  if (d.spends_budget && job.restarts >= policy.max_restarts) {
    d.action = RecoveryDecision::kFail;
    d.reason = "restart budget exhausted (" + std::to_string(job.restarts) + " of " +
               std::to_string(policy.max_restarts) + " restarts used); last finding: " + v.why;
    d.actions.push_back("fail the job: restart budget exhausted");
    return d;
  }

  std::string why;
  d.resume_from = ChooseCheckpoint(in, &why);
  if (d.spends_budget)
    d.not_before = RestartNotBefore(policy, in.now, in.last_restart_at, in.consecutive_restarts);
  for (const std::string& n : v.avoid) d.actions.push_back("avoid " + n + " (no blame)");
  // cordon_after_restart: this restart takes the straggler nodes' ranks elsewhere too (never queueing the
  // job for them: with no room the marks wait for a restart that has room).
  const std::vector<NodeAction> marks =
      StragglerMarks(in.job, in.placement, in.earlier_findings, &in.finding, v.faulty);
  std::vector<NodeAction> faulty = v.faulty;
  faulty.insert(faulty.end(), marks.begin(), marks.end());
  Relocate(job, in.placement, in.cluster, faulty, v.avoid, &d);
  if (!marks.empty() && d.action == RecoveryDecision::kQueue) {
    d.actions.pop_back();  // "queue the job: ..."
    d.reason = v.why;
    Relocate(job, in.placement, in.cluster, v.faulty, v.avoid, &d);
  } else if (!marks.empty()) {
    d.node_actions.insert(d.node_actions.end(), marks.begin(), marks.end());
    for (size_t i = 0; i < marks.size(); ++i)  // after the finding's own cordon lines
      d.actions.insert(d.actions.begin() + static_cast<std::ptrdiff_t>(v.faulty.size() + i),
                       "cordon " + marks[i].node + " (" + marks[i].reason + ")");
  }
  if (v.optional && d.action == RecoveryDecision::kQueue) {
    RecoveryDecision none;
    none.not_before = in.now;
    none.reason = v.why + "; no spare or free node can take its ranks: recorded, the job runs on";
    none.actions.push_back("record only: no spare or free node to replace " +
                           Join(Implicated(f, in.placement, false)));
    return none;
  }
  if (d.action == RecoveryDecision::kQueue && !v.avoid.empty()) {
    // Leaving a node without blame is a preference, not a reason to wait: with no room elsewhere the job
    // restarts where it was (queued, it would have been placed on the same free node anyway).
    d.actions.back() = "no room without " + Join(v.avoid) + ": restart on it";
    d.reason = v.why;
    Relocate(job, in.placement, in.cluster, v.faulty, {}, &d);
  }
  if (d.action == RecoveryDecision::kRestart) {
    d.replay = v.replay;
    d.replay_nodes = v.replay_nodes;
    d.set_aside = v.set_aside;
    if (v.replay) d.replay_step = f.step;
    if (v.set_aside)
      d.actions.push_back("replay without " + *v.set_aside + ": a check that agrees confirms it, a " +
                          "recurrence clears it");
    else if (v.replay)
      d.actions.push_back("replay on the same nodes: " +
                          Join({v.replay_nodes.begin(), v.replay_nodes.end()}));
  }
  d.actions.push_back(ResumeLine(d.resume_from, why));
  if (d.not_before > in.now)
    d.actions.push_back("wait " +
                        std::to_string(static_cast<int64_t>(std::lround(ToSeconds(d.not_before - in.now)))) +
                        " s before the next attempt (backoff)");
  return d;
}

}  // namespace shepherd
