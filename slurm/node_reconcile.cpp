#include "slurm/node_reconcile.h"

#include <algorithm>
#include <map>

namespace shepherd::slurm {
namespace {

bool StartsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string SlurmReason(const SlurmNode& s) {
  std::string what = s.state_text.empty() ? ToString(s.state.base) : s.state_text;
  return std::string(kSlurmReasonPrefix) + what + (s.reason.empty() ? "" : ": " + s.reason);
}

std::map<std::string, std::string> LabelsOf(const std::string& node, const TopologyMapping& t) {
  auto it = t.labels.find(node);
  return it == t.labels.end() ? std::map<std::string, std::string>{} : it->second;
}

}  // namespace

std::string DrainReasonFor(const std::string& shepherd_reason) {
  if (StartsWith(shepherd_reason, kShepherdDrainPrefix)) return shepherd_reason;
  if (shepherd_reason.empty()) return "shepherd";
  return kShepherdDrainPrefix + shepherd_reason;
}

bool IsShepherdDrainReason(const std::string& slurm_reason) {
  return StartsWith(slurm_reason, kShepherdDrainPrefix) || slurm_reason == "shepherd";
}

const char* ToString(NodeChangeKind k) {
  switch (k) {
    case NodeChangeKind::kAdd:
      return "add";
    case NodeChangeKind::kUpdate:
      return "update";
    case NodeChangeKind::kCordon:
      return "cordon";
    case NodeChangeKind::kFail:
      return "fail";
    case NodeChangeKind::kRelease:
      return "release";
    case NodeChangeKind::kDrainInSlurm:
      return "drain_in_slurm";
    case NodeChangeKind::kResumeInSlurm:
      return "resume_in_slurm";
    case NodeChangeKind::kHeldInSlurm:
      return "held_in_slurm";
    case NodeChangeKind::kMissing:
      return "missing";
    case NodeChangeKind::kSkipped:
      return "skipped";
  }
  return "unknown";
}

Node NodeFromSlurm(const SlurmNode& s, const TopologyMapping& topology, double gpu_memory_gib,
                   const std::string& default_gpu_model) {
  Node n;
  n.id = s.name;
  n.hostname = s.address;
  n.gpus = s.gpus.count;
  n.gpu_memory_gib = gpu_memory_gib;
  n.gpu_model = s.gpus.model.empty() ? default_gpu_model : s.gpus.model;
  n.topology = LabelsOf(s.name, topology);
  NodeState st = ShepherdStateOf(s.state);
  n.failed = st == NodeState::kFailed;
  n.schedulable = st == NodeState::kAvailable;
  if (st != NodeState::kAvailable) n.reason = SlurmReason(s);
  return n;
}

std::vector<NodeChange> Reconcile(const ReconcileInput& in) {
  std::map<std::string, const Node*> mine;
  for (const Node& n : in.shepherd) mine[n.id] = &n;
  std::map<std::string, const SlurmNode*> theirs;
  for (const SlurmNode& s : in.slurm) theirs[s.name] = &s;

  std::vector<NodeChange> out;
  for (const auto& [name, s] : theirs) {
    auto it = mine.find(name);
    if (it == mine.end()) {
      if (s->gpus.count < 1) {
        out.push_back({NodeChangeKind::kSkipped, name, "no gpu in the node's Gres", {}});
        continue;
      }
      out.push_back(
          {NodeChangeKind::kAdd, name, "", NodeFromSlurm(*s, in.topology, in.gpu_memory_gib, in.gpu_model)});
      continue;
    }
    const Node& h = *it->second;
    Node fresh = NodeFromSlurm(*s, in.topology, h.gpu_memory_gib, h.gpu_model);
    if (s->gpus.count >= 1 &&
        (fresh.gpus != h.gpus || fresh.hostname != h.hostname || fresh.topology != h.topology ||
         (!s->gpus.model.empty() && s->gpus.model != h.gpu_model))) {
      Node record = h;
      record.gpus = fresh.gpus;
      record.hostname = fresh.hostname;
      record.topology = fresh.topology;
      record.gpu_model = fresh.gpu_model;
      out.push_back({NodeChangeKind::kUpdate, name, "", std::move(record)});
    }
    // A node Shepherd already has whose state Slurm does not know (plain UNKNOWN: slurmctld restarted and
    // its slurmd has not registered again yet) tells nothing: it keeps the state it has.
    if (s->state == SlurmNodeState{}) continue;
    NodeState slurm_state = ShepherdStateOf(s->state);
    bool held = !h.schedulable || h.failed;
    bool from_slurm = held && StartsWith(h.reason, kSlurmReasonPrefix);
    bool drained_by_us = in.drained_by_shepherd.count(name) != 0;
    if (slurm_state == NodeState::kFailed) {
      if (!h.failed)
        out.push_back({NodeChangeKind::kFail, name, SlurmReason(*s), {}});
      else if (!from_slurm && !drained_by_us)
        // Down in Slurm, and Shepherd failed it on its own evidence: drained now, so that its slurmd coming
        // back (ReturnToService) does not return it to service before someone looked at it; already drained
        // (an operator's), held as it is, and an operator's RESUME later returns it in Shepherd too (before,
        // Shepherd drained it again over the operator's RESUME).
        out.push_back({s->state.drain ? NodeChangeKind::kHeldInSlurm : NodeChangeKind::kDrainInSlurm,
                       name,
                       DrainReasonFor(h.reason),
                       {}});
    } else if (slurm_state == NodeState::kCordoned) {
      if (s->state.drain && IsShepherdDrainReason(s->reason) && drained_by_us && !held)
        out.push_back({NodeChangeKind::kResumeInSlurm, name, "", {}});
      else if (!held)
        out.push_back({NodeChangeKind::kCordon, name, SlurmReason(*s), {}});
      else if (!from_slurm && !drained_by_us)
        out.push_back({NodeChangeKind::kHeldInSlurm, name, DrainReasonFor(h.reason), {}});
    } else if (held) {
      if (from_slurm || drained_by_us)
        out.push_back({NodeChangeKind::kRelease, name, "", {}});
      else
        out.push_back({NodeChangeKind::kDrainInSlurm, name, DrainReasonFor(h.reason), {}});
    }
  }
  for (const auto& [name, h] : mine)
    if (!theirs.count(name)) out.push_back({NodeChangeKind::kMissing, name, "", {}});
  std::stable_sort(out.begin(), out.end(),
                   [](const NodeChange& a, const NodeChange& b) { return a.node < b.node; });
  return out;
}

}  // namespace shepherd::slurm
