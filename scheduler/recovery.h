// The recovery policy: what to do about a finding (cordon or fail nodes, replace them, restart from which
// checkpoint, when, or queue or fail the job), and what a user's forced restart means. Pure functions of
// the state they are given: no I/O, no clock reads, no threads. The caller (the daemon's Controller)
// executes a decision: node PATCHes, stopping the attempt, allocating the new placement, persisting the
// attempt, and appending `actions` to the finding's record.
//
// Rules of DecideRecovery, by finding kind ("blame" = cordon, or fail, the node and move its ranks):
//  - node_lost, gpu_fault: the node is at fault: fail it, replace it, restart.
//  - heartbeat_lost with every rank silent while each node's agent lists its processes running
//    (vouched_nodes): the job is paused (SIGSTOP, a debugger) or frozen as a whole, not lost: kNone,
//    recorded. A silent rank whose agent vouches for its process is never evidence against the node.
//  - heartbeat_lost, process_exit (a rank crashed or went silent): restart on the same nodes the first time;
//    a node is cordoned only when this loss and an earlier one in `earlier_findings` on it are both losses a
//    node can cause (heartbeat_lost, or process_exit by a signal). A clean exit (an exit code, no signal:
//    an exception, a rendezvous port in use, a peer that died under a collective) is no evidence against
//    its node: recurring, the node is avoided (the ranks move off it, action "avoid <node> (no blame)"),
//    never cordoned; the same clean exit elsewhere is then a deterministic crash (loop_breakers.h).
//  - hang with culprit ranks: cordon the culprits' nodes (suspects) and replace them. Hang with no ranks but
//    nodes (communication fault): restart without blame the first time (often transient); cordon the nodes
//    that an earlier communication-fault hang also named. Hang with neither: restart without blame.
//  - sdc_confirmed: cordon the named nodes and replace them; a named node that hosts no rank of the job
//    any more (the one a replay set aside) is cordoned with nothing restarted. sdc_suspected with verdict
//    kMajority (3+ replicas, the odd one out named): cordon the culprits' nodes and restart from
//    last-known-good. sdc_suspected with verdict kNeedsReplay (2 replicas, or no majority such as a 2-2
//    split): restart from last-known-good on the SAME nodes with replay = true; the caller remembers
//    replay_nodes (pending_replay_nodes next time). If nodes it implicates are among pending_replay_nodes
//    (a recurrence, which names no node by itself: both replicas' nodes were there both times, and replicas
//    diverging by design recur too), the first of them is set aside: its ranks move to another node without
//    blame and the job replays again (set_aside); a check that then agrees confirms it (the caller's
//    sdc_confirmed), a recurrence clears it and moves the next. Recurring with every suspect moved off
//    (set_aside_replay, none implicated pending): the code, kNone, recorded (sdc_settled). With no node to
//    move the ranks to, the suspects are cordoned (unproven, and says so). Neither while no hash check of the
//    job has ever agreed (hashes_ever_agreed false), nor with verdict kNoAgreement (3+ replicas, no two
//    equal; even after checks that agreed: replicas diverging between syncs by design look the same): kNone,
//    recorded. A cordon for SDC (majority, persistent, confirmed) settles the job's replay (sdc_settled).
//  - grad_norm_spike: kNone, recorded (an outlier batch under clipping is normal training; corrupted
//    parameters show in the replicas' hashes).
//  - loss_divergence, nonfinite_loss: restart from last-known-good without blame (the
//    ledger already grades checkpoints after the onset bad; checkpoints at or after onset_step, or at or
//    after step when there is no onset, are also skipped here, in case grading lags).
//  - loss_spike (a one-step outlier of the job-level loss): kNone, action "record only: loss spike
//    (one-step outlier)". Noisy training must not restart; divergence is the loss_divergence finding.
//  - straggler: as policy.straggler_action says, for a straggler named from arrival order (finding.straggler
//    set) of a job Shepherd launches; otherwise (the step-time rule's, another launcher's job) kNone,
//    reported. record (default): kNone. replace: cordon the node (the reason names the finding) and restart
//    from last-known-good on a spare; with no spare or free node, or no budget left, kNone, recorded (a
//    slow job is never queued or failed for its straggler). cordon_after_restart: kNone now; any later
//    restart decision of the same attempt (whatever its finding; the straggler finding among
//    earlier_findings) also cordons that node and moves its ranks, unless that alone would queue the job.
//  - anything else, a finding of another attempt, or a job that is not running: kNone.
//
// Every restart-bearing decision checks the budget first: job.restarts >= policy.max_restarts → kFail
// (node actions are still returned: a dead node is dead whatever happens to the job). The caller counts a
// kRestart or kQueue decision against job.restarts, unless spends_budget is false: a fence while the daemon
// was late, or a free restart inside an incident that already spent its unit (free_restart).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "core/time.h"
#include "scheduler/cluster.h"

namespace shepherd {

enum class NodeActionKind {
  kCordon,  // suspected: schedulable = false (returned by an operator, or by passing health checks)
  kFail,    // at fault: failed = true (cleared by an operator after repair)
};
const char* ToString(NodeActionKind k);  // "cordon", "fail"

struct NodeAction {
  std::string node;
  NodeActionKind action = NodeActionKind::kCordon;
  std::string reason;
  bool operator==(const NodeAction&) const = default;
};

struct RecoveryDecision {
  enum Action { kNone, kRestart, kQueue, kFail };
  Action action = kNone;
  std::vector<NodeAction> node_actions;
  // kRestart: the next attempt's placement (attempt = job.attempt + 1). kQueue, kFail, kNone: nullopt.
  std::optional<Placement> new_placement;
  std::vector<std::string> replaced;  // "old->new (locality)", locality as in Replacement::locality
  // kRestart and kQueue: the checkpoint to resume from; nullopt means from scratch (step 0).
  std::optional<Checkpoint> resume_from;
  Time not_before{};  // earliest start of the next attempt (backoff)
  std::string reason;
  // Human-readable lines for the finding's actions, e.g. "cordon node-0007", "stop attempt 2",
  // "replace node-0007 with node-0033 (leaf)", "restart from checkpoint job-1/2/40 (step 40, good)".
  std::vector<std::string> actions;
  bool replay = false;                    // an SDC replay: recompute on the same nodes
  std::vector<std::string> replay_nodes;  // replay: the nodes to pass to SdcHistory::OnReplayStarted
  // replay: the step whose check mismatched; only a check that agrees at or after it clears the nodes.
  std::optional<int64_t> replay_step;
  // replay: the suspect whose ranks this replay moves off (not blamed); it is no longer a replay node.
  std::optional<std::string> set_aside;
  // The SDC question is answered (its nodes cordoned): the caller forgets the job's replay state.
  bool sdc_settled = false;
  // Whether the restart counts against policy.max_restarts (and the backoff): not when the ranks were
  // fenced while the daemon was late (its slowness is never the job's). A fence without the daemon's
  // lateness (the network path of one agent) still spends it, which bounds a loop on a flaky link.
  bool spends_budget = true;
};

struct RecoveryInput {
  const Job& job;
  const Placement& placement;  // the current attempt's
  // The inventory as it is now: it still holds the current attempt's allocation under job.id.
  const Cluster& cluster;
  const Finding& finding;  // sdc_suspected: finding.sdc_verdict says whether a replay must decide
  std::optional<Checkpoint> last_known_good;
  std::optional<Checkpoint> latest_complete;
  Time now{};
  std::optional<Time> last_restart_at;  // start of the previous automatic restart, if any
  int consecutive_restarts = 0;         // automatic restarts without a healthy stretch in between
  // Nodes implicated by this job's SDC replays that have not yet come back clean (JobHealth keeps them).
  const std::set<std::string>& pending_replay_nodes;
  // The job's earlier findings against which recurrence is judged (the caller picks the window, e.g. the
  // last few attempts). REQUIRES: each carries its nodes; the current finding is not among them.
  std::span<const Finding> earlier_findings = {};
  // Nodes whose agent is live and lists the attempt's rank processes as running (heartbeat_lost of a
  // launched job): their ranks' silence is the processes' (stopped, paused), not the node's.
  std::set<std::string> vouched_nodes = {};
  // A replay that moved a suspect's ranks off (RecoveryDecision::set_aside) is under way.
  bool set_aside_replay = false;
  // Some hash check of the job has agreed across all replicas (or a checkpoint was graded good by one).
  // When none ever has, a mismatch without a majority says the hashed state is not replicated (buffers,
  // nondeterministic kernels), not that a node corrupts it.
  bool hashes_ever_agreed = true;
  // The daemon itself was late (health/lateness.h) within the last two leases: ranks fenced now were
  // stopped by its slowness, not by their node's network.
  bool daemon_was_late = false;
  // The finding's incident already spent its unit of restart budget and this restart is free
  // (scheduler/incidents.h RestartIsFree): no budget check, no count, no backoff.
  bool free_restart = false;
};

RecoveryDecision DecideRecovery(const RecoveryInput& in);

// Where a restart that could not start when it was decided starts now: one deferred by its backoff
// (`placement` as decided) or a recovered job the queue holds (its last attempt's placement). Nodes no
// longer usable (cordoned, failed or removed meanwhile) and `avoid` nodes are replaced as a recovery
// would (a spare or free node, closest first; else the whole job placed anew on non-spare nodes): kRestart
// with new_placement and the "replace ..." lines, else kQueue. The job's own GPUs count as free.
// `spares_only` (a queued job taking a spare ahead of the queue): kQueue too unless the new placement is
// the old nodes and spares, a spare among them; the rest of the inventory is the queue's, in its order.
RecoveryDecision PlaceRestart(const Job& job, const Placement& placement, const Cluster& cluster,
                              const std::set<std::string>& avoid = {}, bool spares_only = false);

// Backoff: max(now, last_restart_at + min(backoff_s · 2^consecutive_restarts, 300 s)); now without a
// previous restart.
Time RestartNotBefore(const Policy& policy, Time now, std::optional<Time> last_restart_at,
                      int consecutive_restarts);

// POST /v1/jobs/{id}/restart.
struct RestartRequest {
  const Job& job;
  const Placement& placement;  // the current (or, for a failed job, the last) attempt's
  const Cluster& cluster;
  std::string from = "last-known-good";  // "last-known-good" | "latest" | a checkpoint id
  // Nodes to move the job off. They are excluded from the new placement but not cordoned: a job's owner
  // does not change shared inventory state (operators cordon with PATCH /v1/nodes/{id}).
  std::vector<std::string> replace_nodes;
  std::string reason;
  std::span<const Checkpoint> checkpoints = {};  // the job's checkpoints, any order
  Time now{};
  // The job's recent findings: straggler findings of this attempt under cordon_after_restart are the
  // marks this restart applies (their nodes replaced and cordoned, as the policy says of any restart).
  std::span<const Finding> earlier_findings = {};
};

// A forced restart: no budget, no backoff (not_before = now). The decision is kRestart, or kQueue when the
// job no longer fits. Straggler marks (cordon_after_restart) move and cordon their nodes unless that alone
// would queue the job. kConflict: no checkpoint qualifies (none good, none complete, or the named one is
// pending or bad), or the job is queued, succeeded or cancelled. kNotFound: the named checkpoint or a
// node of replace_nodes is unknown. kInvalidArgument: a node of replace_nodes hosts no rank of the job.
Result<RecoveryDecision> ManualRestart(const RestartRequest& req);

}  // namespace shepherd
