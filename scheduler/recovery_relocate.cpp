// Relocation of a job off faulty nodes, and ManualRestart. See recovery.h for the contracts.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/placement.h"
#include "scheduler/recovery.h"
#include "scheduler/recovery_internal.h"

namespace shepherd::recovery_internal {

void Relocate(const Job& job, const Placement& placement, const Cluster& cluster,
              const std::vector<NodeAction>& faulty, const std::set<std::string>& avoid,
              RecoveryDecision* d) {
  const int next_attempt = job.attempt + 1;
  // What the next attempt would see: the job's own GPUs free again, faulty nodes out of service. Placement
  // is asked that what-if through its options rather than on a copy of the Cluster (O(nodes) per finding).
  std::set<std::string> exclude = avoid, out_of_service;
  for (const NodeAction& a : faulty) {
    exclude.insert(a.node);
    out_of_service.insert(a.node);
  }
  // Nodes to leave, in rank order of first appearance: faulty or avoided, or no longer usable.
  std::vector<std::string> move;
  for (const RankSlot& s : placement.ranks) {
    if (std::find(move.begin(), move.end(), s.node) != move.end()) continue;
    const Node* n = cluster.Find(s.node);
    if (exclude.count(s.node) != 0 || n == nullptr || n->failed || !n->schedulable) move.push_back(s.node);
  }
  for (const std::string& m : move) exclude.insert(m);

  const bool whole = static_cast<int>(placement.ranks.size()) == job.plan.world_size();
  Placement current = placement;
  std::vector<std::string> replaced, lines;
  bool ok = whole;
  for (size_t i = 0; ok && i < move.size(); ++i) {
    if (cluster.Find(move[i]) == nullptr) {  // removed from the inventory: ReplaceNode cannot help
      ok = false;
      break;
    }
    ReplaceOptions ro{.use_spares = job.spec.policy.use_spares,
                      .replace_without_spare = true,
                      .exclude_nodes = exclude,
                      .release_job = job.id};
    Result<Replacement> r = ReplaceNode(cluster, current, move[i], ro);
    if (!r.ok()) {
      ok = false;
      break;
    }
    current = std::move(r->placement);
    replaced.push_back(move[i] + "->" + r->spare + " (" + r->locality + ")");
    lines.push_back("replace " + move[i] + " with " + r->spare + " (" + r->locality +
                    (r->from_spare_pool ? ")" : "; free node, not a spare)"));
  }
  if (ok) {
    current.attempt = next_attempt;
    d->new_placement = std::move(current);
    d->replaced = std::move(replaced);
    d->actions.insert(d->actions.end(), lines.begin(), lines.end());
    d->action = RecoveryDecision::kRestart;
    return;
  }
  // No spare or free node per failed node: place the whole job again on what is left (same plan).
  PlaceOptions po;
  po.attempt = next_attempt;
  po.exclude_nodes = exclude;
  po.release_job = job.id;
  po.out_of_service = std::move(out_of_service);
  Result<Placement> p = Place(cluster, job.plan, po);
  if (p.ok()) {
    std::set<std::string> nodes;
    for (const RankSlot& s : p->ranks) nodes.insert(s.node);
    std::string list;
    for (const std::string& n : nodes) list += (list.empty() ? "" : ", ") + n;
    d->actions.push_back("re-place the whole job (no replacement node fits): " + list);
    d->new_placement = std::move(p.value());
    d->action = RecoveryDecision::kRestart;
    return;
  }
  d->action = RecoveryDecision::kQueue;
  d->reason = "waiting for capacity: no spare and not enough free GPUs";
  if (p.status().code() == Code::kInvalidContent) d->reason += " (the usable inventory is now too small)";
  d->actions.push_back("queue the job: " + d->reason);
}

std::string ResumeLine(const std::optional<Checkpoint>& c, const std::string& why) {
  if (!c) return "restart from scratch (step 0): " + why;
  return "restart from checkpoint " + c->id + " (step " + std::to_string(c->step) + ", " + why + ")";
}

}  // namespace shepherd::recovery_internal

namespace shepherd {

using recovery_internal::Relocate;
using recovery_internal::ResumeLine;
using recovery_internal::StragglerMarks;

namespace {

// Newest checkpoint satisfying `pred`, nullopt when none.
template <typename Pred>
std::optional<Checkpoint> Newest(std::span<const Checkpoint> all, Pred pred) {
  const Checkpoint* best = nullptr;
  for (const Checkpoint& c : all) {
    if (pred(c) && (best == nullptr || c.step > best->step)) best = &c;
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

}  // namespace

RecoveryDecision PlaceRestart(const Job& job, const Placement& placement, const Cluster& cluster,
                              const std::set<std::string>& avoid, bool spares_only) {
  RecoveryDecision d;
  Relocate(job, placement, cluster, {}, avoid, &d);
  if (!spares_only || d.action != RecoveryDecision::kRestart) return d;
  // An old node may be a spare itself: the job ran there after an earlier recovery.
  std::set<std::string> before;
  for (const RankSlot& r : placement.ranks) before.insert(r.node);
  auto old_nodes_and_spares = [&] {
    bool spare = false;
    for (const RankSlot& r : d.new_placement->ranks) {
      const Node* n = cluster.Find(r.node);
      if (n == nullptr || (!n->spare && before.count(r.node) == 0)) return false;
      spare = spare || n->spare;
    }
    return spare;
  };
  if (old_nodes_and_spares()) return d;
  RecoveryDecision q;
  q.action = RecoveryDecision::kQueue;
  q.reason = "no spare to restart on";
  return q;
}

Result<RecoveryDecision> ManualRestart(const RestartRequest& req) {
  const JobState st = req.job.state;
  if (st == JobState::kQueued || st == JobState::kSucceeded || st == JobState::kCancelled)
    return Conflict(std::string("job ") + req.job.id + " is " + ToString(st) + ": nothing to restart");
  // Another launcher's job: Shepherd can stop none of its ranks, and an attempt it started would only make
  // the real ranks' reports an old attempt's (ignored: the job unwatched).
  if (req.job.spec.launch_mode == LaunchMode::kExternal)
    return Conflict("job " + req.job.id +
                    " is launched by someone else (no command): Shepherd cannot stop or restart its ranks; "
                    "restart it with its own launcher (its reports then name the new attempt)");

  std::optional<Checkpoint> from;
  std::string why;
  if (req.from.empty() || req.from == "last-known-good") {
    from = Newest(req.checkpoints, [](const Checkpoint& c) { return c.status == CheckpointStatus::kGood; });
    if (!from) return Conflict("no checkpoint qualifies: job " + req.job.id + " has no good checkpoint");
    why = "last-known-good";
  } else if (req.from == "latest") {
    from = Newest(req.checkpoints, [](const Checkpoint& c) {
      return c.status == CheckpointStatus::kGood || c.status == CheckpointStatus::kComplete;
    });
    if (!from) return Conflict("no checkpoint qualifies: job " + req.job.id + " has no complete checkpoint");
    why = std::string("latest, ") + ToString(from->status);
  } else {
    auto it = std::find_if(req.checkpoints.begin(), req.checkpoints.end(),
                           [&](const Checkpoint& c) { return c.id == req.from; });
    if (it == req.checkpoints.end())
      return Status(Code::kNotFound, "checkpoint " + req.from + " not found",
                    {{"from", "no checkpoint " + req.from + " of job " + req.job.id}});
    if (it->status != CheckpointStatus::kGood && it->status != CheckpointStatus::kComplete)
      return Status(Code::kConflict,
                    "no checkpoint qualifies: checkpoint " + req.from + " is " + ToString(it->status),
                    {{"from", "checkpoint " + req.from + " is " + ToString(it->status)}});
    from = *it;
    why = std::string("requested, ") + ToString(from->status);
  }

  std::set<std::string> avoid;
  for (std::size_t i = 0; i < req.replace_nodes.size(); ++i) {
    const std::string& n = req.replace_nodes[i];
    if (req.cluster.Find(n) == nullptr) return NotFound("node " + n + " not found");
    bool hosts = std::any_of(req.placement.ranks.begin(), req.placement.ranks.end(),
                             [&](const RankSlot& s) { return s.node == n; });
    if (!hosts) {
      const std::string why = "node " + n + " hosts no rank of job " + req.job.id;
      return InvalidContent(why, {{"replace_nodes[" + std::to_string(i) + "]", why}});
    }
    avoid.insert(n);
  }

  RecoveryDecision d;
  d.reason = "manual restart" + (req.reason.empty() ? std::string() : ": " + req.reason);
  d.not_before = req.now;
  d.resume_from = from;
  if (IsActive(st) || st == JobState::kRecovering)
    d.actions.push_back("stop attempt " + std::to_string(req.job.attempt));
  const std::vector<NodeAction> marks = StragglerMarks(req.job, req.placement, req.earlier_findings, nullptr, {});
  const RecoveryDecision before = d;
  Relocate(req.job, req.placement, req.cluster, marks, avoid, &d);
  if (!marks.empty() && d.action == RecoveryDecision::kQueue) {  // the marks wait for a restart with room
    d = before;
    Relocate(req.job, req.placement, req.cluster, {}, avoid, &d);
  } else if (!marks.empty()) {
    d.node_actions = marks;
    for (size_t i = 0; i < marks.size(); ++i)  // after "stop attempt N", before the "replace" lines
      d.actions.insert(d.actions.begin() + static_cast<std::ptrdiff_t>(before.actions.size() + i),
                       "cordon " + marks[i].node + " (" + marks[i].reason + ")");
  }
  if (d.action == RecoveryDecision::kQueue && !avoid.empty()) {
    // Queued, the job would be placed on whatever frees up first, the node to leave among them (a fleet
    // operator's restart "off n1" stopped the job and put it back on n1): nothing is done instead.
    std::string nodes;
    for (const std::string& n : avoid) nodes += (nodes.empty() ? "" : ", ") + n;
    const std::string why = "no spare or free node can take the ranks of " + nodes +
                            " now; nothing was stopped (cordon the node to move the job once capacity frees "
                            "up, or free a node first)";
    return Status(Code::kConflict, why, {{"replace_nodes", why}});
  }
  d.actions.push_back(ResumeLine(from, why));
  return d;
}

}  // namespace shepherd
