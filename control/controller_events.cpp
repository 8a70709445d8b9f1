// Controller: the events each committed batch describes (control/event_log.h).
#include "control/controller.h"

namespace shepherd {

void Controller::BaselineEvents() {
  jobs_.TakeStateChanges();  // what recovery restored is not news
  inventory_.TakeChanged();
  for (const Node* n : inventory_.cluster().nodes())
    if (auto v = inventory_.View(n->id)) event_node_state_[n->id] = v->state;
  for (const Finding& f : findings_.Query({})) event_finding_actions_[f.id] = f.actions.size();
}

// Job states in the order they were entered (each at its record's place in the batch), findings and their
// actions as their records come, then the nodes whose state differs from the last one told (a node
// allocated and released within one operation changed nothing).
std::vector<Event> Controller::CollectEvents(const WriteBatch& batch, Time now) {
  std::vector<Event> out;
  auto add = [&](EventType type, std::string job, std::string node, Json detail) {
    out.push_back({0, now, type, std::move(job), std::move(node), std::move(detail)});
  };
  std::vector<JobBook::StateChange> jobs = jobs_.TakeStateChanges();
  auto job = jobs.begin();
  auto jobs_up_to = [&](std::size_t position) {
    for (; job != jobs.end() && job->position <= position; ++job) {
      Json d = {{"state", ToString(job->state)}, {"attempt", job->attempt}};
      if (!job->reason.empty()) d["reason"] = job->reason;
      add(EventType::kJobState, job->job, "", std::move(d));
    }
  };
  for (std::size_t i = 0; i < batch.ops.size(); ++i) {
    jobs_up_to(i);
    const WriteBatch::Op& op = batch.ops[i];
    if (op.erase || op.record.collection != Collection::kFindings) continue;
    const Finding* f = findings_.Find(op.record.key);
    if (!f) continue;
    auto [told, first] = event_finding_actions_.try_emplace(f->id, 0);
    if (first) {
      Json d = {{"finding", f->id},
                {"kind", ToString(f->kind)},
                {"attempt", f->attempt},
                {"nodes", f->nodes},
                {"ranks", f->ranks},
                {"detail", f->detail},
                {"detected_at", FormatRfc3339(f->detected_at)}};
      if (f->step) d["step"] = *f->step;
      add(EventType::kFinding, f->job, f->nodes.size() == 1 ? f->nodes.front() : "", std::move(d));
    }
    for (; told->second < f->actions.size(); ++told->second)
      add(EventType::kAction, f->job, f->nodes.size() == 1 ? f->nodes.front() : "",
          {{"finding", f->id}, {"kind", ToString(f->kind)}, {"action", f->actions[told->second]}});
  }
  jobs_up_to(SIZE_MAX);
  for (const std::string& id : inventory_.TakeChanged()) {
    auto v = inventory_.View(id);
    auto last = event_node_state_.find(id);
    if (!v) {
      if (last == event_node_state_.end()) continue;
      add(EventType::kNodeState, "", id, {{"state", "deleted"}, {"previous", ToString(last->second)}});
      event_node_state_.erase(last);
      continue;
    }
    if (last != event_node_state_.end() && last->second == v->state) continue;
    Json d = {{"state", ToString(v->state)}};
    if (last != event_node_state_.end()) d["previous"] = ToString(last->second);
    if (!v->node.reason.empty()) d["reason"] = v->node.reason;
    if (!v->node.cordon_source.empty()) d["source"] = v->node.cordon_source;
    if (!v->jobs.empty()) d["jobs"] = v->jobs;
    event_node_state_[id] = v->state;
    add(EventType::kNodeState, "", id, std::move(d));
  }
  return out;
}

}  // namespace shepherd
