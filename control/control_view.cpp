// ControlView: nodes, jobs and health as the API reads them (control/control_view.h).
#include "control/control_view.h"

#include <algorithm>

#include "control/launch/launcher.h"

namespace shepherd {

// ---- Nodes

NodeView ControlView::WithAgent(NodeView v) const {
  v.unknown_processes = s_.agents->Unknown(v.node.id);
  v.node.agent_attached = s_.agents->Live(v.node.id);
  return v;
}

Result<NodeView> ControlView::GetNode(const std::string& id) const {
  auto v = inventory().View(id);
  if (!v) return NotFound("no node " + id);
  return WithAgent(std::move(*v));
}

NodeList ControlView::ListNodes(const NodeFilter& filter) const {
  NodeList list = inventory().List(filter);
  for (NodeView& v : list.nodes) v = WithAgent(std::move(v));
  return list;
}

JobView ControlView::ViewOf(const JobEntry& e) const {
  JobView v;
  static_cast<JobEntry&>(v) = e;
  if (const SlurmAllocationRecord* a = s_.slurm->Find(e.job.id)) v.slurm_allocation = *a;
  const JobHealth* h = HealthOf(e.job.id);
  if (e.job.state != JobState::kLaunching || !LauncherFor(e.job).AgentsStartRanks() || !h) return v;
  LaunchView l;
  l.nodes_waiting = h->unlaunched_nodes();
  for (const std::string& n : l.nodes_waiting)
    if (!s_.agents->Live(n)) l.nodes_without_agent.push_back(n);
  l.since = h->attempt_started_at();
  v.launch = std::move(l);
  return v;
}

std::optional<std::string> ControlView::EndedExternalRun(const std::string& external_id,
                                                         const ReportBatch& batch) const {
  const std::set<std::string>& ids = jobs().WithExternalId(external_id);
  if (ids.empty()) return std::nullopt;
  const Job& last = jobs().Find(*ids.rbegin())->job;
  int highest = 0;
  for (const auto& [index, r] : batch.reports) highest = std::max(highest, r.attempt);
  if (!IsTerminal(last.state) || highest > std::max(last.attempt, 1)) return std::nullopt;
  return "job " + last.id + " of external id " + external_id + " is " + ToString(last.state) +
         "; reports of attempt " + std::to_string(highest) +
         " are not taken (a requeued run, a later attempt, starts a new job)";
}

Result<JobView> ControlView::GetJob(const std::string& id) const {
  const JobEntry* e = jobs().Find(id);
  if (!e) return NotFound("no job " + id);
  return ViewOf(*e);
}

std::vector<JobView> ControlView::ListJobs(std::optional<JobState> state, const std::string& after,
                                           std::size_t limit, bool* more,
                                           const std::optional<std::string>& external_id) const {
  std::vector<JobView> out;
  if (more) *more = false;
  // Adds `e` when it matches; false once the page is full.
  auto take = [&](const JobEntry& e) REQUIRES_SHARED(kControl) {
    if (state && e.job.state != *state) return true;
    if (out.size() == limit) {
      if (more) *more = true;
      return false;
    }
    out.push_back(ViewOf(e));
    return true;
  };
  if (external_id) {  // the external-id index: only the jobs that have it
    const std::set<std::string>& ids = jobs().WithExternalId(*external_id);
    for (auto it = after.empty() ? ids.begin() : ids.upper_bound(after); it != ids.end(); ++it)
      if (!take(*jobs().Find(*it))) break;
    return out;
  }
  const auto& all = jobs().all();
  for (auto it = after.empty() ? all.begin() : all.upper_bound(after); it != all.end(); ++it)
    if (!take(it->second)) break;
  return out;
}

int ControlView::ActiveJobsOf(const std::string& owner) const {
  int n = 0;
  for (const auto& [id, e] : jobs().all()) n += e.job.spec.owner == owner && !IsTerminal(e.job.state) ? 1 : 0;
  return n;
}

Result<PlacementView> ControlView::GetPlacement(const std::string& id) const {
  const JobEntry* e = jobs().Find(id);
  if (!e) return NotFound("no job " + id);
  if (!e->attempt)
    return Conflict("job " + id + " is " + ToString(e->job.state) + " and has no placement yet");
  // Re-queued by recovery: its last attempt's ranks are not where it will run.
  if (e->job.state == JobState::kQueued)
    return Conflict("job " + id + " is queued: it has no placement until it is placed again");
  PlacementView v{e->attempt->number, e->job.state, std::nullopt, &e->attempt->placement};
  if (inventory().cluster().Holds(id))
    v.quality = EvaluatePlacement(inventory().cluster(), e->job.plan, e->attempt->placement,
                                  e->estimate.comm.dp, e->estimate.comm.pp);
  return v;
}

// ---- Health

Result<Json> ControlView::GetHealth(const std::string& id) const {
  const JobEntry* e = jobs().Find(id);
  if (!e) return NotFound("no job " + id);
  Time now = s_.clock->Now();
  const JobHealth* health = HealthOf(id);
  Json out;
  if (health && health->running() && IsActive(e->job.state)) {
    out = health->MonitorJson(now);
  } else {
    // Nothing is judged: every check says so, with the same keys as a monitored job's.
    const std::string why = e->job.state == JobState::kQueued ? "the job is queued: no attempt runs"
                            : IsTerminal(e->job.state)
                                ? std::string("the job ended (") + ToString(e->job.state) + ")"
                                : std::string("no attempt is watched now (") + ToString(e->job.state) + ")";
    Json check = {{"status", "not_monitored"}, {"reason", why}};
    out = {{"status", ToString(e->job.state)},
           {"checks",
            {{"heartbeat", check}, {"hang", check}, {"straggler", check}, {"sdc", check}, {"loss", check}}},
           {"suspects", {{"ranks", Json::array()}, {"ranks_count", 0}, {"nodes", Json::array()}}},
           {"ignored_reports", 0},
           {"evaluated_at", nullptr}};
  }
  std::optional<Checkpoint> lkg = health ? health->ledger().LastKnownGood() : std::nullopt;
  out["last_known_good_checkpoint"] = lkg ? ToJson(*lkg) : Json(nullptr);
  out["attempt"] = e->job.attempt;
  out["job_state"] = ToString(e->job.state);
  out["updated_at"] = FormatRfc3339(now);
  return out;
}

Result<Json> ControlView::GetSteps(const std::string& id, size_t limit) const {
  const JobEntry* e = jobs().Find(id);
  if (!e) return NotFound("no job " + id);
  const JobHealth* h = HealthOf(id);
  const JobMonitor* m = h ? h->monitor() : nullptr;
  Json steps = Json::array();
  if (m)
    for (const FinalStep& s : m->step_history().Last(limit))
      steps.push_back({{"step", s.step},
                       {"loss", s.loss ? Json(*s.loss) : Json(nullptr)},
                       {"step_time_s", s.step_time_s ? Json(*s.step_time_s) : Json(nullptr)},
                       {"time", FormatRfc3339(s.time)}});
  return Json{{"attempt", m ? m->context().attempt : e->job.attempt}, {"steps", std::move(steps)}};
}

Result<CheckpointList> ControlView::GetCheckpoints(const std::string& id) const {
  if (!jobs().Find(id)) return NotFound("no job " + id);
  CheckpointList out;
  const JobHealth* h = HealthOf(id);
  if (!h) return out;
  out.checkpoints = h->ledger().All();
  if (auto lkg = h->ledger().LastKnownGood()) out.last_known_good = lkg->id;
  return out;
}

Result<std::vector<Finding>> ControlView::GetFailures(const FindingQuery& q, bool* more) const {
  if (q.job && !jobs().Find(*q.job)) return NotFound("no job " + *q.job);
  return findings().Query(q, more);
}

std::optional<ControlView::JobRef> ControlView::FindExternalJob(const std::string& external_id) const {
  const JobEntry* e = jobs().FindExternal(external_id);
  return e ? std::optional<JobRef>(JobRef{e->job.id, e->job.spec.owner}) : std::nullopt;
}

std::optional<std::string> ControlView::JobOwner(const std::string& id) const {
  const JobEntry* e = jobs().Find(id);
  return e ? std::optional<std::string>(e->job.spec.owner) : std::nullopt;
}

ControlView::StorageFacts ControlView::storage() const {
  const std::deque<Time>& w = *s_.writes_started;
  return {w.size(), w.empty() ? 0 : ToSeconds(s_.clock->Now() - w.front()), *s_.storage_failed};
}

}  // namespace shepherd
