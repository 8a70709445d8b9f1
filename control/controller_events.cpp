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

// Job states in the order they were entered and findings in the order they were recorded, each at its
// place in the batch (a finding before what recovery did about it), actions right after their finding,
// then the nodes whose state differs from the last one told (a node allocated and released within one
// operation changed nothing).
std::vector<Event> Controller::CollectEvents(const WriteBatch& batch, Time now) {
  std::vector<Event> out;
  auto add = [&](EventType type, std::string job, std::string node, Json detail) {
    out.push_back({0, now, type, std::move(job), std::move(node), std::move(detail)});
  };
  auto tell_finding = [&](const std::string& id) REQUIRES_SHARED(kControl) {
    const Finding* f = findings_.Find(id);
    if (!f) return;
    const std::string node = f->nodes.size() == 1 ? f->nodes.front() : "";
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
      add(EventType::kFinding, f->job, node, std::move(d));
    }
    for (; told->second < f->actions.size(); ++told->second)
      add(EventType::kAction, f->job, node,
          {{"finding", f->id}, {"kind", ToString(f->kind)}, {"action", f->actions[told->second]}});
  };
  std::vector<JobBook::StateChange> jobs = jobs_.TakeStateChanges();
  std::vector<std::pair<std::size_t, std::string>> findings = std::exchange(finding_order_, {});
  auto job = jobs.begin();
  auto finding = findings.begin();
  // Everything that began at or before `position`, in order; a finding first on a tie.
  auto up_to = [&](std::size_t position) REQUIRES_SHARED(kControl) {
    for (;;) {
      const bool f = finding != findings.end() && finding->first <= position;
      const bool j = job != jobs.end() && job->position <= position;
      if (f && (!j || finding->first <= job->position)) {
        tell_finding((finding++)->second);
      } else if (j) {
        Json d = {{"state", ToString(job->state)}, {"attempt", job->attempt}};
        if (!job->reason.empty()) d["reason"] = job->reason;
        add(EventType::kJobState, job->job, "", std::move(d));
        ++job;
      } else {
        return;
      }
    }
  };
  for (std::size_t i = 0; i < batch.ops.size(); ++i) {
    up_to(i);
    const WriteBatch::Op& op = batch.ops[i];
    if (!op.erase && op.record.collection == Collection::kFindings)
      tell_finding(op.record.key);  // new actions
  }
  up_to(SIZE_MAX);
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
