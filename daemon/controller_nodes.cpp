// Controller: the node inventory.
#include "daemon/controller.h"

namespace shepherd {

void Controller::UpsertNode(Node node, bool schedulable_given, Done<NodeUpsert> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  Time now = clock_->Now();
  const Node* old = cluster_.Find(node.id);
  bool created = old == nullptr;
  node.created_at = created ? now : old->created_at;
  node.updated_at = now;
  if (!created) {
    node.failed = old->failed;
    node.reason = old->reason;
    node.agent_attached = old->agent_attached;
    if (!schedulable_given) node.schedulable = old->schedulable;
    if (node.spare && cluster_.AllocatedGpus(node.id) > 0)
      return done(Conflict("node " + node.id + " runs ranks and cannot become a spare"));
  }
  if (Status s = cluster_.UpsertNode(node); !s.ok()) return done(s);
  WriteBatch batch;
  batch.Put(NodeRecord(node));
  ScheduleQueued(&batch);
  Commit(std::move(batch), [this, id = node.id, created, done = std::move(done)](Status s) {
    if (!s.ok()) return done(s);
    const Node* n = cluster_.Find(id);
    done(NodeUpsert{n ? NodeJson(*n) : Json(), created});
  });
}

void Controller::PatchNode(const std::string& id, NodePatch patch, Done<Json> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  const Node* old = cluster_.Find(id);
  if (!old) return done(NotFound("no node " + id));
  Node n = *old;
  if (patch.spare && *patch.spare && cluster_.AllocatedGpus(id) > 0)
    return done(Conflict("node " + id + " runs ranks and cannot become a spare"));
  if (patch.schedulable) n.schedulable = *patch.schedulable;
  if (patch.spare) n.spare = *patch.spare;
  if (patch.failed) n.failed = *patch.failed;
  if (patch.reason)
    n.reason = *patch.reason;
  else if (n.schedulable && !n.failed)
    n.reason.clear();
  n.updated_at = clock_->Now();
  if (Status s = cluster_.UpsertNode(n); !s.ok()) return done(s);
  WriteBatch batch;
  batch.Put(NodeRecord(n));
  ScheduleQueued(&batch);
  Commit(std::move(batch), [this, id, done = std::move(done)](Status s) {
    if (!s.ok()) return done(s);
    done(NodeJson(*cluster_.Find(id)));
  });
}

void Controller::DeleteNode(const std::string& id, Done<Json> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  const Node* n = cluster_.Find(id);
  if (!n) return done(NotFound("no node " + id));
  Json last = NodeJson(*n);
  if (Status s = cluster_.RemoveNode(id); !s.ok()) return done(s);
  WriteBatch batch;
  batch.Erase(Collection::kNodes, id);
  Commit(std::move(batch), [last = std::move(last), done = std::move(done)](Status s) {
    if (!s.ok()) return done(s);
    done(last);
  });
}

Result<Json> Controller::GetNode(const std::string& id) const {
  const Node* n = cluster_.Find(id);
  if (!n) return NotFound("no node " + id);
  return NodeJson(*n);
}

std::vector<SpareDeficit> Controller::SpareDeficits() const {
  return CheckSpareReserve(cluster_, options_.min_spares_per_leaf, options_.min_spares_per_spine).deficits;
}

Json Controller::ListNodes(const NodeFilter& f) const {
  Json items = Json::array();
  std::map<std::string, int> by_state;
  for (const Node* n : cluster_.nodes()) {
    std::string state = ToString(StateOf(*n, cluster_.AllocatedGpus(n->id)));
    ++by_state[state];
    if (f.state && *f.state != state) continue;
    if (f.spare && *f.spare != n->spare) continue;
    bool match = true;
    for (const auto& [level, label] : f.topology) {
      if (level == "nvlink_domain")
        match = match && n->nvlink_domain == label;
      else {
        auto it = n->topology.find(level);
        match = match && it != n->topology.end() && it->second == label;
      }
    }
    if (match) items.push_back(NodeJson(*n));
  }
  Json deficits = Json::array();
  for (const auto& d : SpareDeficits())
    deficits.push_back({{"level", d.level}, {"label", d.label}, {"have", d.have}, {"want", d.want}});
  return {{"nodes", items},
          {"summary",
           {{"nodes", cluster_.size()},
            {"by_state", by_state},
            {"usable_gpus", cluster_.UsableGpus()},
            {"free_usable_gpus", cluster_.FreeUsableGpus()},
            {"spare_deficits", deficits}}}};
}

}  // namespace shepherd
