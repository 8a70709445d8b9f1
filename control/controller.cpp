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
      agents_(options_.node_heartbeat_timeout_s, options_.agent_lease_s, options_.unknown_process_timeout_s,
              options_.follower_renewal_s),
      events_(options_.event_retention),
      lateness_(options_.late_after_s, clock_->Now()),
      slurm_(&inventory_, &jobs_, &findings_, options_.default_gpu_memory_gib),
      view_({.clock = clock_,
             .inventory = &inventory_,
             .jobs = &jobs_,
             .health = &health_,
             .agents = &agents_,
             .findings = &findings_,
             .events = &events_,
             .rank_tokens = &rank_tokens_,
             .slurm = &slurm_,
             .lateness = &lateness_,
             .report_counts = &report_counts_,
             .reports_ignored = reports_ignored_,
             .heartbeat_ignored = &heartbeat_ignored_,
             .restart_causes = &restart_causes_,
             .writes_started = &writes_started_,
             .storage_failed = &storage_failed_}) {
  recovery_.set_slurm(options_.slurm);
  recovery_.set_requeue(options_.slurm_requeue);
  // The exit hold waits at most the node timeout (plus a margin) for a silent agent; an incident takes in
  // findings of its own attempt within that span too (scheduler/incidents.h, scheduler/exit_hold.h).
  recovery_.set_exit_hold(options_.node_heartbeat_timeout_s);
  recovery_.set_incident_window({.join_window_s = options_.node_heartbeat_timeout_s + 5, .grace_s = 30});
}

Controller::~Controller() = default;

Status Controller::CheckWritable() const {
  if (storage_failed_) return Unavailable("storage failed; the daemon is shutting down");
  if (!ready_) return Unavailable("state is not recovered yet");
  return Status::Ok();
}

Controller::OpScope Controller::Begin(Time now) {
  Close(op_seq_);
  op_.emplace(now);
  return OpScope(this, ++op_seq_);
}

void Controller::Close(uint64_t seq) {
  if (!op_ || seq != op_seq_) return;  // committed, or closed by a later Begin
  Sync();
  if (!op_->batch.empty()) {
    Commit([](Status) {});
    return;
  }
  op_.reset();
}

void Controller::Sync() {
  if (op_ && !settling_ && jobs_.HasEvents()) Settle(op_->now, &op_->batch);
}

void Controller::Commit(std::function<void(Status)> done) {
  Settle(op_->now, &op_->batch);
  WriteBatch batch = std::move(op_->batch);
  op_.reset();
  const Time now = clock_->Now();
  // Each change's event commits with it.
  std::vector<Event> events = CollectEvents(batch, now);
  const int64_t last_event = events_.Append(&events, now, &batch);
  // Attempts this batch starts reach the agents, or become a Slurm step, and the Slurm allocations it asks
  // for are requested, only once it is durable.
  auto saved = [this, starts = std::exchange(unsaved_starts_, {}), requests = slurm_.TakeNewRequests(),
                last_event, events = std::move(events)]() REQUIRES(kControl) {
    if (last_event) {
      events_.MarkDurable(last_event);
      if (on_events_) on_events_(events);
    }
    for (const auto& [job, attempt] : starts) agents_.Saved(job, attempt, clock_->Now());
    slurm_.Saved(starts, requests);
    AnswerWaiters();
  };
  if (batch.empty()) {
    post_([saved, done = std::move(done)]() REQUIRES(kControl) {
      saved();
      done(Status::Ok());
    });
    return;
  }
  writes_started_.push_back(clock_->Now());
  store_->Write(std::move(batch), [this, saved, done = std::move(done)](Status s) mutable {
    post_([this, saved, s = std::move(s), done = std::move(done)]() REQUIRES(kControl) {
      writes_started_.pop_front();  // the store answers its batches in order
      if (s.ok())
        saved();
      else
        OnStorageFailure(s);
      done(s);
    });
  });
}

void Controller::AnswerWaiters() {
  if (agents_.HasDue())
    agents_.AnswerDue([this](const std::string& node)
                          REQUIRES_SHARED(kControl) { return DesiredRanks(node); });
}

void Controller::ReleaseWaiters() {
  control_thread_.Assert();
  agents_.ReleaseWaiters();
  AnswerWaiters();
  events_.ReleaseAll();
}

void Controller::WatchEvents(int64_t after, std::size_t limit, Time deadline, Done<EventPage> done) {
  control_thread_.Assert();
  events_.Wait(after, limit, deadline, std::move(done));
}

void Controller::ObserveLateness(Duration tick_lag, Duration queue_age, uint64_t refused) {
  control_thread_.Assert();
  Time now = clock_->Now();
  lateness_.OnTickLag(tick_lag, now);
  lateness_.OnQueueAge(queue_age, now);
  lateness_.OnRefusals(refused, now);
}

void Controller::OnStorageFailure(const Status& s) {
  if (storage_failed_) return;
  storage_failed_ = true;
  spdlog::critical("storage write failed: {}; refusing further writes", s.message());
  if (on_storage_failure_) on_storage_failure_(s);
}

JobHealth& Controller::HealthOf(const std::string& job) {
  Sync();
  return HealthSlot(job);
}

JobHealth* Controller::FindHealth(const std::string& job) {
  Sync();
  auto h = health_.find(job);
  return h == health_.end() ? nullptr : h->second.get();
}

JobHealth& Controller::HealthSlot(const std::string& job) {
  auto& slot = health_[job];
  if (!slot) slot = std::make_unique<JobHealth>(jobs_.Find(job)->job);
  return *slot;
}

void Controller::Settle(Time now, WriteBatch* batch) {
  settling_ = true;
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
    if (ev.kind == AttemptEvent::Kind::kJobEnded) {
      // Every end of a job (cancelled, failed, succeeded, its watched launcher's job ended), with or
      // without an attempt running (a job waiting for its backoff has none).
      rank_tokens_.Revoke(ev.job, std::nullopt, batch);
      if (auto h = health_.find(ev.job); h != health_.end()) h->second->OnJobEnd();
      recovery_.Forget(ev.job);
      agents_.DropGate(ev.job);
      continue;
    }
    const JobEntry* e = jobs_.Find(ev.job);
    JobHealth& health = HealthSlot(ev.job);
    const Launcher& launcher = LauncherFor(e->job);
    const bool ours = launcher.Credential() != RankCredential::kPerJob;  // its attempts' tokens
    if (ev.kind == AttemptEvent::Kind::kStarted) {
      if (e->attempt->number == ev.attempt)
        health.OnAttemptStart(e->job, *e->attempt, launcher.Arming(), now);
    } else {
      // Not "is it the job's current attempt": a restart ends attempt n and starts n + 1 in one pass, and
      // attempt n's events come first. Skipping them lost the step attempt n reached, and three restarted
      // attempts looked like no progress. An ended attempt is recorded with its final marks (open
      // checkpoint phases included) before its monitor closes.
      if (auto m = health.Marks(ev.attempt, /*full=*/true)) jobs_.RecordFinalMarks(ev, *m, batch);
      health.OnAttemptEnd(ev.attempt);
      if (ours) rank_tokens_.Revoke(ev.job, ev.attempt, batch);  // its ranks can no longer report
    }
    if (launcher.HoldsAllocation()) slurm_.Settle(ev, now, batch);
    if (launcher.GatesFor(ev.attempt).bump_nodes)
      for (const std::string& node : ev.nodes) agents_.Bump(node);
  }
  settling_ = false;
  AnswerWaiters();  // after every gate and token of the batch
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
  Sync();
  jobs_.Schedule([this](const std::string& job) REQUIRES(kControl) { return HealthSlot(job).DefaultResume(); },
                 now, batch, slurm_.HeldNodes(), [this]() REQUIRES_SHARED(kControl) { return UnservedNodes(); });
}

// ---- Nodes

void Controller::UpsertNode(Node node, bool schedulable_given, Done<NodeUpsert> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  OpScope op = Begin(clock_->Now());
  bool created = false;
  std::string id = node.id;
  auto v = inventory_.Upsert(std::move(node), schedulable_given, op->now, &op->batch, &created);
  if (!v.ok()) return done(v.status());
  Schedule(op->now, &op->batch);
  // The node as written, should a DELETE committed meanwhile have removed it (the answer is read then).
  CommitThen<NodeUpsert>(std::move(done), [this, id, created, written = *v]() REQUIRES_SHARED(kControl) {
    return NodeUpsert{view_.WithAgent(inventory_.View(id).value_or(written)), created};
  });
}

void Controller::PatchNode(const std::string& id, NodePatch patch, Done<NodeView> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  OpScope op = Begin(clock_->Now());
  auto v = inventory_.Patch(id, patch, op->now, &op->batch);
  if (!v.ok()) return done(v.status());
  Schedule(op->now, &op->batch);
  CommitThen<NodeView>(std::move(done), [this, id, written = *v]() REQUIRES_SHARED(kControl) {
    return view_.WithAgent(inventory_.View(id).value_or(written));  // removed meanwhile: the node as patched
  });
}

void Controller::DeleteNode(const std::string& id, Done<NodeView> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  // Its agent would register it again at once, schedulable and without its cordon or failure.
  if (inventory_.Find(id) && agents_.Live(id))
    return done(Conflict("node " + id +
                         "'s agent is still heartbeating: stop the agent first (it would register "
                         "the node again, without its cordon)"));
  OpScope op = Begin(clock_->Now());
  auto last = inventory_.Remove(id, &op->batch);
  if (!last.ok()) return done(last.status());
  CommitThen<NodeView>(std::move(done), [last = *last] { return last; });
}

void Controller::StopUnknownProcesses(const std::string& id, Done<NodeView> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (!inventory_.Find(id)) return done(NotFound("no node " + id));
  agents_.StopUnknownProcesses(id);
  AnswerWaiters();
  done(view_.GetNode(id));
}

// ---- Jobs

void Controller::SubmitJob(JobSpec spec, PlanEstimate estimate, Done<JobView> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (Status s = LauncherFor(spec.launch_mode).Admit(options_.slurm); !s.ok()) return done(s);
  OpScope op = Begin(clock_->Now());
  auto id = jobs_.Submit(std::move(spec), std::move(estimate), op->now, &op->batch);
  if (!id.ok()) return done(id.status());
  std::optional<std::string> token;  // another launcher's ranks report with the job's own credential
  if (LauncherFor(jobs_.Find(*id)->job).Credential() == RankCredential::kPerJob)
    token = rank_tokens_.Mint({*id, {}}, &op->batch);
  Schedule(op->now, &op->batch);
  CommitThen<JobView>(std::move(done), [this, id = *id, token]() REQUIRES_SHARED(kControl) {
    JobView v = view_.ViewOf(*jobs_.Find(id));
    v.rank_token = token;
    return v;
  });
}

void Controller::CancelJob(const std::string& id, const std::string& by, Done<JobView> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  OpScope op = Begin(clock_->Now());
  if (Status s = EndJob(id, JobState::kCancelled, "cancelled by " + by, op->now, &op->batch); !s.ok())
    return done(s);
  Schedule(op->now, &op->batch);
  CommitThen<JobView>(std::move(done),
                      [this, id]() REQUIRES_SHARED(kControl) { return view_.ViewOf(*jobs_.Find(id)); });
}

Status Controller::EndJob(const std::string& id, JobState state, const std::string& reason, Time now,
                          WriteBatch* batch) {
  if (Status s = jobs_.End(id, state, reason, now, batch); !s.ok()) return s;
  // Its health, rank tokens, recovery and gate end with it in Settle (AttemptEvent::Kind::kJobEnded).
  slurm_.Release(id, batch);  // launcher "slurm": its allocation is cancelled (unless adopted)
  return Status::Ok();
}

}  // namespace shepherd
