#include "control/inventory.h"

#include <algorithm>

#include "control/records.h"

namespace shepherd {

NodeView Inventory::ViewOf(const Node& n) const {
  int allocated = cluster_.AllocatedGpus(n.id);
  return {n, StateOf(n, allocated), allocated, cluster_.JobsOn(n.id)};
}

Result<NodeView> Inventory::Store(Node n, WriteBatch* batch) {
  if (Status s = cluster_.UpsertNode(n); !s.ok()) return s;
  Recount(n.id);
  batch->Put(NodeRecord(n));
  return ViewOf(*cluster_.Find(n.id));
}

void Inventory::Recount(const std::string& id) {
  auto it = states_.find(id);
  if (it != states_.end() && --by_state_[it->second] == 0) by_state_.erase(it->second);
  const Node* n = cluster_.Find(id);
  if (!n) {
    if (it != states_.end()) {
      states_.erase(it);
      changed_.insert(id);
    }
    return;
  }
  const NodeState state = StateOf(*n, cluster_.AllocatedGpus(id));
  if (it == states_.end() || it->second != state) changed_.insert(id);
  states_[id] = state;
  ++by_state_[state];
}

Status Inventory::Restore(const Node& node) {
  if (Status s = cluster_.UpsertNode(node); !s.ok()) return s;
  Recount(node.id);
  return Status::Ok();
}

std::vector<std::string> Inventory::NodesHeldBy(const std::string& job) const {
  std::vector<std::string> ids;
  for (const auto& [i, mask] : cluster_.HeldBy(job)) ids.push_back(cluster_.node(i).id);
  return ids;
}

Status Inventory::Allocate(const std::string& job, const Placement& p) {
  if (Status s = cluster_.Allocate(job, p); !s.ok()) return s;
  for (const std::string& id : NodesHeldBy(job)) Recount(id);  // once per node, not per rank
  return Status::Ok();
}

void Inventory::Release(const std::string& job) {
  if (!cluster_.Holds(job)) return;
  const std::vector<std::string> nodes = NodesHeldBy(job);
  (void)cluster_.Release(job);
  for (const std::string& id : nodes) Recount(id);
}

namespace {

// A node running ranks keeps what its ranks were given: MASTER_ADDR comes from its hostname and placement
// from its topology (a re-registration must not redirect a running job).
Status CheckBusyReRegistration(const Node& old, const Node& now) {
  const std::string busy = "node " + old.id + " runs ranks: ";
  std::vector<FieldError> errors;
  if (now.spare && !old.spare) errors.push_back({"spare", busy + "it cannot become a spare"});
  if (now.hostname != old.hostname)
    errors.push_back({"hostname", busy + "its hostname cannot change from " + old.hostname});
  for (const auto& [level, label] : old.topology)
    if (auto it = now.topology.find(level); it == now.topology.end() || it->second != label)
      errors.push_back({"topology." + level, busy + "its " + level + " cannot change from " + label});
  for (const auto& [level, label] : now.topology)
    if (!old.topology.count(level))
      errors.push_back({"topology." + level, busy + "its topology cannot change"});
  if (now.gpus < old.gpus) errors.push_back({"gpus", busy + "its GPU count cannot shrink"});
  if (errors.empty()) return Status::Ok();
  std::string message = errors.front().message;
  return Status(Code::kConflict, std::move(message), std::move(errors));
}

}  // namespace

Result<NodeView> Inventory::Upsert(Node node, bool schedulable_given, Time now, WriteBatch* batch,
                                   bool* created) {
  const Node* old = cluster_.Find(node.id);
  *created = old == nullptr;
  node.created_at = old ? old->created_at : now;
  node.updated_at = now;
  if (old) {
    node.failed = old->failed;
    node.reason = old->reason;
    node.cordon_source = old->cordon_source;
    node.drain = old->drain;
    node.cordoned_at = old->cordoned_at;
    node.agent_attached = old->agent_attached;
    // A registration declares hardware; it never lifts a cordon (PATCH does). The --inventory file, with
    // "schedulable": true in every node as gen-inventory writes it, is re-applied at every start and would
    // otherwise put a node cordoned for bad hardware back to work at each restart.
    if (!schedulable_given || !old->schedulable) node.schedulable = old->schedulable;
    if (old->schedulable && !node.schedulable) {
      node.cordon_source = "operator";
      node.cordoned_at = now;
    }
    if (cluster_.AllocatedGpus(node.id) > 0) {
      if (Status s = CheckBusyReRegistration(*old, node); !s.ok()) return s;
    }
  }
  return Store(std::move(node), batch);
}

Result<NodeView> Inventory::Patch(const std::string& id, const NodePatch& patch, Time now,
                                  WriteBatch* batch) {
  const Node* old = cluster_.Find(id);
  if (!old) return NotFound("no node " + id);
  if (patch.spare && *patch.spare && cluster_.AllocatedGpus(id) > 0)
    return Status(Code::kConflict, "node " + id + " runs ranks and cannot become a spare",
                  {{"spare", "node " + id + " runs ranks: it cannot become a spare"}});
  Node n = *old;
  const bool was_out = !n.schedulable || n.failed;
  if (patch.schedulable) n.schedulable = *patch.schedulable;
  if (patch.drain) {
    n.schedulable = false;
    n.drain = true;
  }
  if (patch.spare) n.spare = *patch.spare;
  if (patch.failed) n.failed = *patch.failed;
  if (patch.reason)
    n.reason = *patch.reason;
  else if (n.schedulable && !n.failed)
    n.reason.clear();
  if (n.schedulable) n.drain = false;
  if (n.schedulable && !n.failed) {
    n.cordon_source.clear();
    n.cordoned_at.reset();
  } else if (patch.schedulable == false || patch.drain || !was_out) {
    n.cordon_source = "operator";  // an operator's cordon: never lifted by Shepherd
    n.cordoned_at = now;
  }
  n.updated_at = now;
  return Store(std::move(n), batch);
}

Result<NodeView> Inventory::Remove(const std::string& id, WriteBatch* batch) {
  const Node* n = cluster_.Find(id);
  if (!n) return NotFound("no node " + id);
  NodeView last = ViewOf(*n);
  if (Status s = cluster_.RemoveNode(id); !s.ok()) return s;
  Recount(id);
  batch->Erase(Collection::kNodes, id);
  return last;
}

void Inventory::Apply(const NodeAction& a, const std::string& source, Time now, WriteBatch* batch) {
  const Node* old = cluster_.Find(a.node);
  if (!old) return;
  // An operator's cordon stays whole (reason, source, time): a finding's cordon adds nothing to it, and a
  // failure only its flag (the finding says why).
  const bool operators = old->cordon_source == "operator";  // its cordon or failure is in force
  if (a.action == NodeActionKind::kCordon && operators) return;
  Node n = *old;
  if (a.action == NodeActionKind::kFail)
    n.failed = true;
  else
    n.schedulable = false;
  if (!operators) {
    n.reason = a.reason;
    n.cordon_source = source;
    n.cordoned_at = now;
  }
  n.updated_at = now;
  (void)Store(std::move(n), batch);
}

bool Inventory::ReturnSuspect(const std::string& id, Time now, WriteBatch* batch) {
  const Node* old = cluster_.Find(id);
  if (!old || old->schedulable || old->failed || old->cordon_source.empty() ||
      old->cordon_source == "operator")
    return false;
  Node n = *old;
  n.schedulable = true;
  n.reason.clear();
  n.cordon_source.clear();
  n.cordoned_at.reset();
  n.updated_at = now;
  (void)Store(std::move(n), batch);
  return true;
}

void Inventory::MarkAgentAttached(const std::string& id, Time now, WriteBatch* batch) {
  const Node* old = cluster_.Find(id);
  if (!old || old->agent_attached) return;
  Node n = *old;
  n.agent_attached = true;
  n.updated_at = now;
  (void)Store(std::move(n), batch);
}

std::optional<NodeView> Inventory::View(const std::string& id) const {
  const Node* n = cluster_.Find(id);
  if (!n) return std::nullopt;
  return ViewOf(*n);
}

std::vector<SpareDeficit> Inventory::SpareDeficits() const {
  if (spares_.per_leaf <= 0 && spares_.per_spine <= 0) return {};  // no reserve: nothing to walk
  return CheckSpareReserve(cluster_, spares_.per_leaf, spares_.per_spine).deficits;
}

NodeList Inventory::List(const NodeFilter& f) const {
  NodeList out;
  // Walks the index in id order from the cursor and stops after the page (an unfiltered page visits only
  // its own nodes); the summary is kept, not counted.
  for (auto it = f.after.empty() ? states_.begin() : states_.upper_bound(f.after); it != states_.end();
       ++it) {
    if (f.state && *f.state != it->second) continue;
    const Node* n = cluster_.Find(it->first);
    if (f.spare && *f.spare != n->spare) continue;
    bool match = true;
    for (const auto& [level, label] : f.topology) {
      if (level == "nvlink_domain") {
        match = match && n->nvlink_domain == label;
      } else {
        auto t = n->topology.find(level);
        match = match && t != n->topology.end() && t->second == label;
      }
    }
    if (!match) continue;
    if (out.nodes.size() == f.limit) {
      out.more = true;
      break;
    }
    out.nodes.push_back(ViewOf(*n));
  }
  out.by_state = by_state_;
  out.total = cluster_.size();
  out.usable_gpus = cluster_.UsableGpus();
  out.free_usable_gpus = cluster_.FreeUsableGpus();
  out.spare_deficits = SpareDeficits();
  return out;
}

}  // namespace shepherd
