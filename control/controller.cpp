// Controller: construction, commits, settling attempt events, nodes, jobs and their views.
#include "control/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "control/launch/launcher.h"

namespace shepherd {

Controller::Controller(Store* store, const Clock* clock, Post post, ControllerOptions options)
    : store_(store),
      clock_(clock),
      post_(std::move(post)),
      options_(std::move(options)),
      inventory_(options_.levels, {options_.min_spares_per_leaf, options_.min_spares_per_spine}),
      jobs_(&inventory_, options_.default_gpu_memory_gib),
      recovery_(&inventory_, &jobs_, options_.remediation_hook),
      agents_([this](const std::string& node) { return DesiredRanks(node); },
              options_.node_heartbeat_timeout_s, options_.agent_lease_s, options_.unknown_process_timeout_s,
              options_.follower_renewal_s),
      events_(options_.event_retention),
      lateness_(options_.late_after_s, clock_->Now()),
      slurm_(&inventory_, &jobs_, &findings_, options_.default_gpu_memory_gib) {
  // An ending attempt is recorded with its final marks (open checkpoint phases included).
  jobs_.set_marks_source([this](Attempt* a) {
    auto h = health_.find(a->job);
    if (h == health_.end()) return;
    if (auto m = h->second->Marks(a->number, /*full=*/true)) AttemptMarks::Apply(*m, a);
  });
  recovery_.set_slurm(options_.slurm);
  recovery_.set_requeue(options_.slurm_requeue);
  recovery_.set_cluster_for([this](const std::string& job) { return slurm_.AllocationView(job); });
  // The exit hold waits at most the node timeout (plus a margin) for a silent agent; an incident takes in
  // findings of its own attempt within that span too (scheduler/incidents.h, scheduler/exit_hold.h).
  recovery_.set_exit_hold([this](const std::string& node) { return agents_.LastHeard(node); },
                          options_.node_heartbeat_timeout_s);
  recovery_.set_incident_window({.join_window_s = options_.node_heartbeat_timeout_s + 5, .grace_s = 30});
  recovery_.set_launcher_nodes([this](const Job& job) -> std::optional<std::set<std::string>> {
    if (options_.slurm && !job.spec.external_id.empty()) return slurm_.WatchedNodesOf(job.id);
    const JobEntry* e = jobs_.Find(job.id);
    if (!e || !e->attempt) return std::nullopt;
    std::set<std::string> nodes;
    for (const RankSlot& r : e->attempt->placement.ranks) nodes.insert(r.node);
    return nodes;
  });
}

Controller::~Controller() = default;

Status Controller::CheckWritable() const {
  if (storage_failed_) return Unavailable("storage failed; the daemon is shutting down");
  if (!ready_) return Unavailable("state is not recovered yet");
  return Status::Ok();
}

void Controller::Commit(WriteBatch batch, std::function<void(Status)> done) {
  const Time now = clock_->Now();
  Settle(now, &batch);
  // Each change's event commits with it.
  std::vector<Event> events = CollectEvents(batch, now);
  const int64_t last_event = events_.Append(&events, now, &batch);
  // Attempts this batch starts reach the agents, or become a Slurm step, and the Slurm allocations it asks
  // for are requested, only once it is durable.
  auto saved = [this, starts = std::exchange(unsaved_starts_, {}),
                requests = slurm_.TakeNewRequests(), last_event,
                events = std::move(events)] {
    if (last_event) {
      events_.MarkDurable(last_event);
      if (on_events_) on_events_(events);
    }
    for (const auto& [job, attempt] : starts) agents_.Saved(job, attempt, clock_->Now());
    slurm_.Saved(starts, requests);
  };
  if (batch.empty()) {
    post_([saved, done = std::move(done)] {
      saved();
      done(Status::Ok());
    });
    return;
  }
  writes_started_.push_back(clock_->Now());
  store_->Write(std::move(batch), [this, saved, done = std::move(done)](Status s) mutable {
    post_([this, saved, s = std::move(s), done = std::move(done)] {
      writes_started_.pop_front();  // the store answers its batches in order
      if (s.ok())
        saved();
      else
        OnStorageFailure(s);
      done(s);
    });
  });
}

void Controller::OnStorageFailure(const Status& s) {
  if (storage_failed_) return;
  storage_failed_ = true;
  spdlog::critical("storage write failed: {}; refusing further writes", s.message());
  if (on_storage_failure_) on_storage_failure_(s);
}

JobHealth& Controller::HealthOf(const std::string& job) {
  auto& slot = health_[job];
  if (!slot) slot = std::make_unique<JobHealth>(jobs_.Find(job)->job);
  return *slot;
}

void Controller::Settle(Time now, WriteBatch* batch) {
  std::vector<AttemptEvent> events = jobs_.TakeEvents();
  // Gates and rank tokens first: a bump below answers long polls at once (one job's end bumps the nodes
  // another job was just placed on), so a started attempt's ranks must not reach an agent before the older
  // attempt's ranks have stopped (or stop_timeout_s passed), nor before their token exists.
  for (const AttemptEvent& ev : events) {
    if (ev.kind != AttemptEvent::Kind::kStarted) continue;
    const JobEntry* e = jobs_.Find(ev.job);
    const Launcher& launcher = LauncherFor(e->job);
    const LaunchGates gates = launcher.GatesFor(ev.attempt);
    if (gates.wait_for_older_attempt)
      agents_.HoldLaunch(ev.job, ev.attempt, ev.nodes, now + Seconds(options_.stop_timeout_s));
    if (gates.wait_until_saved) agents_.HoldUntilSaved(ev.job, ev.attempt, ev.nodes);
    unsaved_starts_.emplace_back(ev.job, ev.attempt);
    slurm_.AttemptStarted(ev.job, ev.attempt);  // Slurm: no step before it is durable
    if (launcher.Credential() != RankCredential::kPerJob && IsActive(e->job.state))
      rank_tokens_.Mint({ev.job, ev.attempt}, batch);
  }
  for (const AttemptEvent& ev : events) {
    const JobEntry* e = jobs_.Find(ev.job);
    JobHealth& health = HealthOf(ev.job);
    const Launcher& launcher = LauncherFor(e->job);
    const bool ours = launcher.Credential() != RankCredential::kPerJob;  // its attempts' tokens
    if (ev.kind == AttemptEvent::Kind::kStarted) {
      if (e->attempt->number == ev.attempt)
        health.OnAttemptStart(e->job, *e->attempt, launcher.Arming(), now);
    } else {
      // Not "is it the job's current attempt": a restart ends attempt n and starts n + 1 in one pass, and
      // attempt n's events come first. Skipping them lost the step attempt n reached, and three restarted
      // attempts looked like no progress.
      health.OnAttemptEnd(ev.attempt);
      if (ours) rank_tokens_.Revoke(ev.job, ev.attempt, batch);  // its ranks can no longer report
      if (IsTerminal(e->job.state)) {
        rank_tokens_.Revoke(ev.job, std::nullopt, batch);
        health.OnJobEnd();
        recovery_.Forget(ev.job);
        agents_.DropGate(ev.job);
      }
    }
    if (launcher.HoldsAllocation()) slurm_.Settle(ev, now, batch);
    if (launcher.GatesFor(ev.attempt).bump_nodes)
      for (const std::string& node : ev.nodes) agents_.Bump(node);
  }
}

void Controller::MarkLaunched(const std::string& job, Time now, WriteBatch* batch) {
  const JobEntry* e = jobs_.Find(job);
  if (!e || e->job.state != JobState::kLaunching) return;
  jobs_.SetState(job, JobState::kRunning, "", now, batch);
  spdlog::info("job {} attempt {} launched", job, e->job.attempt);
}

std::set<std::string> Controller::UnservedNodes() const {
  std::set<std::string> out;
  for (const Node* n : inventory_.cluster().nodes())
    if (IsUsable(*n) && !agents_.Live(n->id)) out.insert(n->id);
  return out;
}

void Controller::Schedule(Time now, WriteBatch* batch) {
  // A job our agents launch goes to a node no live agent serves only when it fits nowhere else, or it waits
  // its launch timeout (a first deployment's inventory file lists nodes before their agents run).
  jobs_.Schedule([this](const std::string& job) { return HealthOf(job).DefaultResume(); }, now, batch,
                 slurm_.HeldNodes(), [this] { return UnservedNodes(); });
}

// ---- Nodes

void Controller::UpsertNode(Node node, bool schedulable_given, Done<NodeUpsert> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  Time now = clock_->Now();
  WriteBatch batch;
  bool created = false;
  std::string id = node.id;
  auto v = inventory_.Upsert(std::move(node), schedulable_given, now, &batch, &created);
  if (!v.ok()) return done(v.status());
  Schedule(now, &batch);
  // The node as written, should a DELETE committed meanwhile have removed it (the answer is read then).
  CommitThen<NodeUpsert>(std::move(batch), std::move(done), [this, id, created, written = *v] {
    return NodeUpsert{WithAgent(inventory_.View(id).value_or(written)), created};
  });
}

void Controller::PatchNode(const std::string& id, NodePatch patch, Done<NodeView> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  Time now = clock_->Now();
  WriteBatch batch;
  auto v = inventory_.Patch(id, patch, now, &batch);
  if (!v.ok()) return done(v.status());
  Schedule(now, &batch);
  CommitThen<NodeView>(std::move(batch), std::move(done), [this, id, written = *v] {
    return WithAgent(inventory_.View(id).value_or(written));  // removed meanwhile: the node as patched
  });
}

void Controller::DeleteNode(const std::string& id, Done<NodeView> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  // Its agent would register it again at once, schedulable and without its cordon or failure.
  if (inventory_.Find(id) && agents_.Live(id))
    return done(Conflict("node " + id +
                         "'s agent is still heartbeating: stop the agent first (it would register "
                         "the node again, without its cordon)"));
  WriteBatch batch;
  auto last = inventory_.Remove(id, &batch);
  if (!last.ok()) return done(last.status());
  CommitThen<NodeView>(std::move(batch), std::move(done), [last = *last] { return last; });
}

NodeView Controller::WithAgent(NodeView v) const {
  v.unknown_processes = agents_.Unknown(v.node.id);
  v.node.agent_attached = agents_.Live(v.node.id);
  return v;
}

Result<NodeView> Controller::GetNode(const std::string& id) const {
  auto v = inventory_.View(id);
  if (!v) return NotFound("no node " + id);
  return WithAgent(std::move(*v));
}

NodeList Controller::ListNodes(const NodeFilter& filter) const {
  NodeList list = inventory_.List(filter);
  for (NodeView& v : list.nodes) v = WithAgent(std::move(v));
  return list;
}

void Controller::StopUnknownProcesses(const std::string& id, Done<NodeView> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (!inventory_.Find(id)) return done(NotFound("no node " + id));
  agents_.StopUnknownProcesses(id);
  done(GetNode(id));
}

// ---- Jobs

void Controller::SubmitJob(JobSpec spec, PlanEstimate estimate, Done<JobView> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (Status s = LauncherFor(spec.launch_mode).Admit(options_.slurm); !s.ok()) return done(s);
  Time now = clock_->Now();
  WriteBatch batch;
  auto id = jobs_.Submit(std::move(spec), std::move(estimate), now, &batch);
  if (!id.ok()) return done(id.status());
  std::optional<std::string> token;  // another launcher's ranks report with the job's own credential
  if (LauncherFor(jobs_.Find(*id)->job).Credential() == RankCredential::kPerJob)
    token = rank_tokens_.Mint({*id, {}}, &batch);
  Schedule(now, &batch);
  CommitThen<JobView>(std::move(batch), std::move(done), [this, id = *id, token] {
    JobView v = ViewOf(*jobs_.Find(id));
    v.rank_token = token;
    return v;
  });
}

void Controller::CancelJob(const std::string& id, const std::string& by, Done<JobView> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  Time now = clock_->Now();
  WriteBatch batch;
  if (Status s = EndJob(id, JobState::kCancelled, "cancelled by " + by, now, &batch); !s.ok()) return done(s);
  Schedule(now, &batch);
  CommitThen<JobView>(std::move(batch), std::move(done), [this, id] { return ViewOf(*jobs_.Find(id)); });
}

Status Controller::EndJob(const std::string& id, JobState state, const std::string& reason, Time now,
                          WriteBatch* batch) {
  if (Status s = jobs_.End(id, state, reason, now, batch); !s.ok()) return s;
  // A job waiting for its backoff has no attempt to end (so no event to settle): forget it here.
  recovery_.Forget(id);
  agents_.DropGate(id);
  rank_tokens_.Revoke(id, std::nullopt, batch);
  if (auto it = health_.find(id); it != health_.end()) it->second->OnJobEnd();
  slurm_.Release(id, batch);  // launcher "slurm": its allocation is cancelled (unless adopted)
  return Status::Ok();
}

JobView Controller::ViewOf(const JobEntry& e) const {
  JobView v;
  static_cast<JobEntry&>(v) = e;
  if (const SlurmAllocationRecord* a = slurm_.Find(e.job.id)) v.slurm_allocation = *a;
  auto h = health_.find(e.job.id);
  if (e.job.state != JobState::kLaunching || !LauncherFor(e.job).AgentsStartRanks() || h == health_.end())
    return v;
  LaunchView l;
  l.nodes_waiting = h->second->unlaunched_nodes();
  for (const std::string& n : l.nodes_waiting)
    if (!agents_.Live(n)) l.nodes_without_agent.push_back(n);
  l.since = h->second->attempt_started_at();
  v.launch = std::move(l);
  return v;
}

std::optional<std::string> Controller::EndedExternalRun(const std::string& external_id,
                                                        const ReportBatch& batch) const {
  const std::set<std::string>& ids = jobs_.WithExternalId(external_id);
  if (ids.empty()) return std::nullopt;
  const Job& last = jobs_.Find(*ids.rbegin())->job;
  int highest = 0;
  for (const auto& [index, r] : batch.reports) highest = std::max(highest, r.attempt);
  if (!IsTerminal(last.state) || highest > std::max(last.attempt, 1)) return std::nullopt;
  return "job " + last.id + " of external id " + external_id + " is " + ToString(last.state) +
         "; reports of attempt " + std::to_string(highest) +
         " are not taken (a requeued run, a later attempt, starts a new job)";
}

Result<JobView> Controller::GetJob(const std::string& id) const {
  const JobEntry* e = jobs_.Find(id);
  if (!e) return NotFound("no job " + id);
  return ViewOf(*e);
}

std::vector<JobView> Controller::ListJobs(std::optional<JobState> state, const std::string& after,
                                          std::size_t limit, bool* more,
                                          const std::optional<std::string>& external_id) const {
  std::vector<JobView> out;
  if (more) *more = false;
  // Adds `e` when it matches; false once the page is full.
  auto take = [&](const JobEntry& e) {
    if (state && e.job.state != *state) return true;
    if (out.size() == limit) {
      if (more) *more = true;
      return false;
    }
    out.push_back(ViewOf(e));
    return true;
  };
  if (external_id) {  // the external-id index: only the jobs that have it
    const std::set<std::string>& ids = jobs_.WithExternalId(*external_id);
    for (auto it = after.empty() ? ids.begin() : ids.upper_bound(after); it != ids.end(); ++it)
      if (!take(*jobs_.Find(*it))) break;
    return out;
  }
  const auto& all = jobs_.all();
  for (auto it = after.empty() ? all.begin() : all.upper_bound(after); it != all.end(); ++it)
    if (!take(it->second)) break;
  return out;
}

int Controller::ActiveJobsOf(const std::string& owner) const {
  int n = 0;
  for (const auto& [id, e] : jobs_.all()) n += e.job.spec.owner == owner && !IsTerminal(e.job.state) ? 1 : 0;
  return n;
}

Result<PlacementView> Controller::GetPlacement(const std::string& id) const {
  const JobEntry* e = jobs_.Find(id);
  if (!e) return NotFound("no job " + id);
  if (!e->attempt)
    return Conflict("job " + id + " is " + ToString(e->job.state) + " and has no placement yet");
  // Re-queued by recovery: its last attempt's ranks are not where it will run.
  if (e->job.state == JobState::kQueued)
    return Conflict("job " + id + " is queued: it has no placement until it is placed again");
  PlacementView v{e->attempt->number, e->job.state, std::nullopt, &e->attempt->placement};
  if (inventory_.cluster().Holds(id))
    v.quality = EvaluatePlacement(inventory_.cluster(), e->job.plan, e->attempt->placement,
                                  e->estimate.comm.dp, e->estimate.comm.pp);
  return v;
}

}  // namespace shepherd
