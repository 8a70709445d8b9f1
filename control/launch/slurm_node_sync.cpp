#include "control/launch/slurm_node_sync.h"

#include <spdlog/spdlog.h>

#include "core/json.h"

namespace shepherd {

Status SlurmNodeSync::Restore(const std::string& body) {
  Result<Json> j = ParseJsonText(body, 4);
  if (!j.ok() || !j->is_array()) return Internal("stored " + kDrainedKey + " is not a JSON array");
  drained_.clear();
  for (const Json& n : *j)
    if (n.is_string()) drained_.insert(n.get<std::string>());
  return Status::Ok();
}

void SlurmNodeSync::Persist(WriteBatch* batch) const {
  Json j = Json::array();
  for (const std::string& n : drained_) j.push_back(n);
  batch->Put(Record{Collection::kMeta, kDrainedKey, "", j.dump()});
}

std::string SlurmNodeSync::DrainReason(const Node& n) const {
  if (const Finding* f = findings_->Find(n.cordon_source))
    return slurm::DrainReasonFor(f->id + " " + ToString(f->kind));
  return slurm::DrainReasonFor(n.reason.empty() ? n.cordon_source : n.reason);
}

std::vector<SlurmNodeCommand> SlurmNodeSync::Apply(const slurm::SlurmView& view, Time now, WriteBatch* batch) {
  slurm::ReconcileInput in;
  in.slurm = view.nodes;
  in.topology = view.topology;
  for (const Node* n : inventory_->cluster().nodes()) in.shepherd.push_back(*n);
  in.drained_by_shepherd = drained_;
  in.gpu_memory_gib = gpu_memory_gib_;
  std::vector<SlurmNodeCommand> commands;
  bool drained_changed = false;
  for (slurm::NodeChange& c : slurm::Reconcile(in)) {
    Result<NodeView> r = Status::Ok();
    bool created = false;
    NodePatch patch;
    switch (c.kind) {
      case slurm::NodeChangeKind::kAdd:
        r = inventory_->Upsert(std::move(c.record), /*schedulable_given=*/true, now, batch, &created);
        break;
      case slurm::NodeChangeKind::kUpdate:
        r = inventory_->Upsert(std::move(c.record), /*schedulable_given=*/false, now, batch, &created);
        break;
      case slurm::NodeChangeKind::kCordon:  // like an operator's cordon: only Slurm's return lifts it
        patch.schedulable = false;
        patch.reason = c.reason;
        r = inventory_->Patch(c.node, patch, now, batch);
        break;
      case slurm::NodeChangeKind::kFail:
        patch.failed = true;
        patch.reason = c.reason;
        r = inventory_->Patch(c.node, patch, now, batch);
        break;
      case slurm::NodeChangeKind::kRelease:
        patch.schedulable = true;
        patch.failed = false;
        r = inventory_->Patch(c.node, patch, now, batch);
        drained_changed |= drained_.erase(c.node) > 0;
        break;
      case slurm::NodeChangeKind::kDrainInSlurm:
        commands.push_back({SlurmNodeCommand::Kind::kDrain, c.node, DrainReason(*inventory_->Find(c.node))});
        continue;
      case slurm::NodeChangeKind::kResumeInSlurm:
        commands.push_back({SlurmNodeCommand::Kind::kResume, c.node, ""});
        continue;
      case slurm::NodeChangeKind::kHeldInSlurm:
        drained_changed |= drained_.insert(c.node).second;
        continue;
      case slurm::NodeChangeKind::kMissing:
      case slurm::NodeChangeKind::kSkipped:
        spdlog::debug("slurm sync: node {} {}{}", c.node, slurm::ToString(c.kind),
                      c.reason.empty() ? "" : ": " + c.reason);
        continue;
    }
    if (!r.ok())
      spdlog::warn("slurm sync: {} {}: {}", slurm::ToString(c.kind), c.node, r.status().message());
    else
      spdlog::info("slurm sync: {} {}{}", slurm::ToString(c.kind), c.node,
                   c.reason.empty() ? "" : " (" + c.reason + ")");
  }
  if (drained_changed) Persist(batch);
  return commands;
}

void SlurmNodeSync::OnCommandsDone(const std::vector<SlurmCommandResult>& results, WriteBatch* batch) {
  bool changed = false;
  for (const SlurmCommandResult& r : results) {
    const bool drain = r.command.kind == SlurmNodeCommand::Kind::kDrain;
    if (!r.status.ok()) {
      spdlog::error("slurm: {} {} failed: {}", drain ? "drain" : "resume", r.command.node,
                    r.status.message());
      continue;
    }
    spdlog::warn("slurm: {} {}{}", drain ? "drained" : "resumed", r.command.node,
                 drain ? " with reason '" + r.command.reason + "'" : "");
    changed |= drain ? drained_.insert(r.command.node).second : drained_.erase(r.command.node) > 0;
  }
  if (changed) Persist(batch);
}

}  // namespace shepherd
