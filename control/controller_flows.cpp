// Controller: the flows that cross owners. Rank reports and the tick (health → findings → recovery), agent
// heartbeats (exits and faults → findings), forced restarts, and the health views.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>

#include "control/controller.h"
#include "control/launch/launcher.h"
#include "control/records.h"
#include "core/redact.h"

namespace shepherd {
namespace {

// Recurrence is judged against this many of the job's latest findings.
constexpr size_t kRecurrenceWindow = 64;

Finding NodeFinding(const std::string& job, int attempt, FindingKind kind, const std::string& node, Time now,
                    std::string detail) {
  Finding f;
  f.job = job;
  f.attempt = attempt;
  f.kind = kind;
  f.nodes = {node};
  f.detected_at = now;
  // An agent's report (an exit, a GPU fault) carries no time of its own: its receipt is the onset.
  f.onset_at = now;
  f.detail = std::move(detail);
  return f;
}

}  // namespace

void Controller::PersistTransitions(const std::vector<CheckpointTransition>& ts, WriteBatch* batch) {
  for (const CheckpointTransition& t : ts) {
    batch->Put(CheckpointRecord(t.checkpoint));
    if (t.part) batch->Put(CheckpointPartRecord(t.checkpoint, *t.part));
    for (int rank : t.settled_parts)
      batch->Erase(Collection::kMeta, CheckpointPartKey(t.checkpoint.id, rank));
    if (!t.created && t.from != t.checkpoint.status)
      spdlog::info("checkpoint {} {} -> {}: {}", t.checkpoint.id, ToString(t.from),
                   ToString(t.checkpoint.status), t.checkpoint.reason);
  }
}

void Controller::RecordFinding(Finding f, Time now, WriteBatch* batch) {
  f.id = findings_.NextId();
  finding_order_.emplace_back(batch->ops.size(), f.id);  // its event comes before what recovery does
  if (const JobEntry* e = jobs_.Find(f.job)) {
    if (LauncherFor(e->job).BlamesReportedNodes() && !f.ranks.empty()) {
      // Another launcher's job: blame follows the nodes its ranks reported.
      const std::vector<std::string> reported = HealthOf(f.job).ReportedNodes();
      std::set<std::string> nodes;
      for (int r : f.ranks)
        if (r >= 0 && r < static_cast<int>(reported.size()) && !reported[r].empty())
          nodes.insert(reported[r]);
      f.nodes.assign(nodes.begin(), nodes.end());
    }
    // One fault, one incident: a node found lost after its peers' exits becomes their root.
    for (const std::string& id : recovery().AssignIncident(f, batch))
      if (Finding* member = findings_.Mutable(f.job, id); member && member->incident != f.incident) {
        member->incident = f.incident;
        batch->Put(FindingRecord(*member));
      }
    RunRecovery(f, now, batch, /*may_hold=*/true);
  }
  spdlog::warn("finding {} {} job {} attempt {}: {}", f.id, ToString(f.kind), f.job, f.attempt, f.detail);
  batch->Put(FindingRecord(f));
  findings_.Add(std::move(f));
}

RecoveryContext Controller::RecoveryContextOf(const Job& job) const {
  RecoveryContext ctx{.allocation = slurm_.AllocationView(job.id), .agents = &agents_};
  // A job Shepherd only watches under a Slurm job id: its launcher's nodes are Slurm's.
  ctx.slurm_bound = options_.slurm && !job.spec.external_id.empty();
  if (ctx.slurm_bound) ctx.slurm_nodes = slurm_.WatchedNodesOf(job.id);
  return ctx;
}

void Controller::RunRecovery(Finding& f, Time now, WriteBatch* batch, bool may_hold) {
  const JobEntry* e = jobs_.Find(f.job);
  std::vector<Finding> earlier = findings_.Recent(f.job, kRecurrenceWindow);
  std::erase_if(earlier, [&](const Finding& x) { return x.id == f.id; });  // a held finding is recorded
  JobHealth& health = HealthOf(f.job);
  std::vector<std::string> reported;
  const bool by_reports = LauncherFor(e->job).BlamesReportedNodes();
  if (by_reports) reported = health.ReportedNodes();
  std::set<std::string> vouched;  // a launched job's silent ranks whose agents still list them running
  if (f.kind == FindingKind::kHeartbeatLost && !by_reports)
    for (const std::string& n : f.nodes)
      if (agents().VouchesFor(n, f.job, f.attempt)) vouched.insert(n);
  const bool daemon_was_late = ToSeconds(now - lateness_.listening_since()) <= 2 * options_.agent_lease_s;
  const JobState state_before = e->job.state;
  const int attempt_before = e->job.attempt;
  const HealthUpdate update = recovery_.OnFinding(f, health, earlier, now, batch, reported, std::move(vouched),
                                                  daemon_was_late, may_hold, RecoveryContextOf(e->job));
  for (const CheckpointTransition& t : health.Apply(update, now)) batch->Put(CheckpointRecord(t.checkpoint));
  // A restart: a new attempt, or the old one ended to start again (backoff, re-queued); not a failure. It
  // counts under its incident's root cause (a node_lost, not the exits it caused).
  const Job& after = jobs_.Find(f.job)->job;
  if (IsActive(state_before) && !IsTerminal(after.state) &&
      (after.attempt != attempt_before || after.state != state_before)) {
    const Incident* incident = recovery_.OpenIncident(f.job);
    const bool rooted = incident && !f.incident.empty() && incident->root == f.incident;
    ++restart_causes_[f.job][ToString(rooted ? incident->root_kind : f.kind)];
  }
  // A restart's new monitor and the agents' assignments are settled before the next step reads them.
}

void Controller::ReleaseHolds(Time now, WriteBatch* batch) {
  for (const RecoveryExecutor::HoldOutcome& h : recovery().DueHolds(now, agents_)) {
    const Finding* stored = findings_.Find(h.finding);
    if (!stored) continue;
    Finding f = *stored;
    f.actions.push_back(h.line);
    if (h.decide && jobs_.Find(f.job)) RunRecovery(f, now, batch, /*may_hold=*/false);
    spdlog::info("finding {} job {}: {}", f.id, f.job, h.line);
    batch->Put(FindingRecord(f));
    if (Finding* m = findings_.Mutable(f.job, f.id)) *m = std::move(f);
  }
}

void Controller::EvaluateJob(const std::string& job, Time now, WriteBatch* batch) {
  JobHealth* health = FindHealth(job);
  if (!health) return;
  // The attempt trained (a step past its resume step): an incident it was started by closes after a grace.
  if (const JobMonitor* m = health->monitor(); m && m->JobStep() >= 0)
    if (const JobEntry* e = jobs_.Find(job); e && e->attempt && e->attempt->number == m->context().attempt &&
                                             m->JobStep() > e->attempt->resume_step)
      recovery_.OnStep(job, e->attempt->number, now);
  JobHealth::Evaluation ev = health->Evaluate(now, lateness_.listening_since());
  PersistTransitions(ev.transitions, batch);
  if (ev.good_progress) recovery_.OnGoodProgress(job);
  // Recovery may end the attempt (and its monitor) while these are recorded.
  for (Finding& f : ev.findings) RecordFinding(std::move(f), now, batch);
}

void Controller::IngestReports(const std::string& job, const ReportBatch& reports, Done<IngestSummary> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (!jobs_.Find(job)) return done(NotFound("no job " + job));
  OpScope op = Begin(Turn());
  Result<IngestSummary> out = IngestInto(job, reports, op->now, &op->batch);
  if (!out.ok() || op->batch.empty()) return done(std::move(out));
  CommitThen<IngestSummary>(std::move(done), [out = std::move(*out)] { return out; });
}

Result<IngestSummary> Controller::IngestInto(const std::string& job, const ReportBatch& reports, Time now,
                                             WriteBatch* batch) {
  const JobEntry* e = jobs_.Find(job);
  if (!e) return NotFound("no job " + job);
  lateness_.OnReports(now);
  // A far-future step refuses the batch before anything of it is used (JobHealth::CheckSteps).
  if (JobHealth* h = FindHealth(job))
    if (Status s = h->CheckSteps(reports); !s.ok()) return s;
  FollowExternalAttempt(job, reports, now, batch);
  JobHealth* h = FindHealth(job);  // a followed attempt's monitor, settled
  if (!h || !h->running())
    return Conflict("job " + job + " is " + ToString(e->job.state) + ": no attempt is running");
  JobHealth::IngestOutcome in = h->Ingest(reports, now);
  // The attempt's marks in memory stay current (views, goodput); the record follows at most once a
  // minute (PersistMarks) and at the attempt's end.
  if (JobEntry* m = jobs_.Mutable(job); m->attempt && !m->attempt->ended_at)
    if (auto marks = h->Marks(m->attempt->number, /*full=*/false))
      AttemptMarks::Apply(*marks, &*m->attempt);
  report_counts_["accepted"] += in.accepted - in.ignored;
  report_counts_["ignored"] += in.ignored;
  report_counts_["rejected"] += in.rejected.size();
  for (int i = 0; i < kIgnoredReasons; ++i) reports_ignored_[i] += in.ignored_by_reason[i];
  if (in.launched_now) MarkLaunched(job, now, batch);
  PersistTransitions(in.transitions, batch);
  if (in.urgent) EvaluateJob(job, now, batch);
  // Another launcher's job whose ranks all finished has ended, unless Slurm says when its job ends
  // (control/launch/slurm_job_watch.h: the batch script may run another step). Our agents report our ranks' exits.
  if (in.all_finished) {
    const JobSpec& spec = jobs_.Find(job)->job.spec;
    if (LauncherFor(spec.launch_mode).EndsWhenEveryRankFinished(spec, options_.slurm) &&
        EndJob(job, JobState::kSucceeded, "every rank reported finished", now, batch).ok())
      Schedule(now, batch);
  }
  return IngestSummary{in.accepted, in.ignored, std::move(in.rejected)};
}

void Controller::FollowExternalAttempt(const std::string& job, const ReportBatch& reports, Time now,
                                       WriteBatch* batch) {
  const JobEntry* e = jobs_.Find(job);
  if (LauncherFor(e->job).StartsAttempts() || !e->attempt || !IsActive(e->job.state)) return;
  // A launcher's restarts count up one by one (Slurm's SLURM_RESTART_COUNT); a far jump is a wrong
  // SHEPHERD_ATTEMPT or a forged one, and following it would leave every real report an old attempt's.
  constexpr int kMaxAttemptJump = 64;
  int highest = 0;
  for (const auto& [index, r] : reports.reports)
    if (r.attempt <= e->attempt->number + kMaxAttemptJump) highest = std::max(highest, r.attempt);
  if (highest <= e->attempt->number) return;
  // Its own launcher restarted it (e.g. Slurm requeued it): the attempt follows the ranks, on the same
  // placement; nothing is stopped or blamed.
  Placement p = e->attempt->placement;
  const std::string reason = "the job's launcher started attempt " + std::to_string(highest);
  jobs_.EndAttempt(job, now, batch);
  if (!jobs_.StartAttempt(job, std::move(p), reason, std::nullopt, now, batch, highest).ok())
    spdlog::error("job {}: cannot follow attempt {}", job, highest);
}

void Controller::Tick() {
  control_thread_.Assert();
  events_.Expire(clock_->Now());
  if (!CheckWritable().ok()) return;
  OpScope op = Begin(Turn());
  const Time now = op->now;
  WriteBatch& batch = op->batch;
  // Agents first: a dead node silences its agent and its ranks at once, and the node's verdict (fail it,
  // move the ranks) must come before the ranks' (restart in place, no blame), which would restart the job
  // onto the dead node and then again off it.
  CheckAgents(now, &batch);
  std::vector<std::string> ids;
  for (const auto& [id, h] : healths()) ids.push_back(id);
  for (const std::string& id : ids) EvaluateJob(id, now, &batch);
  ReleaseHolds(now, &batch);  // after the agents: a node declared lost decides before a held exit
  CheckLaunches(now, &batch);
  // Slurm allocations not started that name nodes no longer usable: their jobs placed again off them
  // (one that fits nowhere else keeps waiting, Slurm's pending reason its own).
  for (const BlockedSlurmAllocation& b : slurm().Blocked())
    if (PlaceAgain(b.job, b.unusable, b.reason, now, &batch).ok()) {
      slurm_.Release(b.job, &batch);
      spdlog::warn("job {}: {}", b.job, b.reason);
    }
  auto unserved = [this]() REQUIRES_SHARED(kControl) { return UnservedNodes(); };
  std::map<std::string, Cluster> allocations;  // Slurm-launched jobs restart inside their allocation
  for (const std::string& job : recovery().DueRestarts(now))
    if (std::optional<Cluster> a = slurm_.AllocationView(job)) allocations.emplace(job, std::move(*a));
  recovery_.StartDue(now, &batch, unserved, allocations);
  recovery_.StartQueuedOnSpares(
      now, &batch,
      [this](const std::string& job) REQUIRES(kControl) { return HealthSlot(job).DefaultResume(); }, unserved);
  Schedule(now, &batch);
  PersistMarks(now, &batch);  // the attempts still running after this tick's decisions (settled first)
  PruneFindings(now, &batch);
  if (!batch.empty()) Commit([](Status) {});
}

void Controller::PruneFindings(Time now, WriteBatch* batch) {
  const FindingRetention& r = options_.finding_retention;
  if (r.max_age_s <= 0 || now < next_findings_prune_) return;
  next_findings_prune_ = now + Seconds(r.pass_interval_s);
  std::set<std::string> cordons;  // findings a node's cordon names stay while it lasts
  for (const Node* n : inventory_.cluster().nodes())
    if (!n->cordon_source.empty()) cordons.insert(n->cordon_source);
  const std::vector<std::string> ids = findings_.Expired(
      now - Seconds(r.max_age_s),
      [&](const Finding& f) REQUIRES_SHARED(kControl) {
        const JobEntry* e = jobs_.Find(f.job);
        return (!e || IsTerminal(e->job.state)) && !cordons.count(f.id);
      },
      r.prune_batch);
  if (ids.empty()) return;
  for (const std::string& id : ids) {
    batch->Erase(Collection::kFindings, id);
    event_finding_actions_.erase(id);
  }
  findings_.Erase(std::set<std::string>(ids.begin(), ids.end()));
  spdlog::info("retention: {} resolved findings older than {} days erased", ids.size(), r.max_age_s / 86400);
}

void Controller::PersistMarks(Time now, WriteBatch* batch) {
  for (auto& [id, h] : healths()) {
    JobEntry* e = jobs_.Mutable(id);
    if (!e || !e->attempt || e->attempt->ended_at || !h->MarksDue(now, kMarksPersistEvery_s)) continue;
    auto marks = h->Marks(e->attempt->number, /*full=*/true);
    if (!marks || (!marks->last_step_at && marks->load_s == 0 && marks->save_s == 0)) continue;
    AttemptMarks::Apply(*marks, &*e->attempt);
    batch->Put(AttemptRecord(*e->attempt));
  }
}

void Controller::CheckAgents(Time now, WriteBatch* batch) {
  for (const auto& [node, silent] : agents_.CheckLiveness(now, lateness_.listening_since())) {
    for (const std::string& job : inventory_.cluster().JobsOn(node)) {
      const JobEntry* e = jobs_.Find(job);
      // Only ranks our agents run go with their agent. A watched job's slots are bookkeeping (its ranks run
      // wherever its own launcher put them), and a Slurm-launched job's nodes are Slurm's to judge: the
      // agent's silence says nothing of them.
      if (!LauncherFor(e->job).AgentsStartRanks()) continue;
      // GPUs held for a restart waiting for its backoff: no ranks to lose; its start moves off the node.
      if (e->job.state == JobState::kRecovering) continue;
      Finding f = NodeFinding(job, e->job.attempt, FindingKind::kNodeLost, node, now,
                              "no agent heartbeat from " + node + " for " +
                                  std::to_string(static_cast<int>(ToSeconds(silent))) + " s");
      f.onset_at = now - silent;  // the agent's last heartbeat
      if (e->attempt)
        for (const RankSlot& r : e->attempt->placement.ranks)
          if (r.node == node) f.ranks.push_back(r.rank);
      RecordFinding(std::move(f), now, batch);
    }
  }
  agents().OnTick(now);  // after this tick's node_lost restarts are settled (their launch gates)
  AnswerWaiters();
}

const JobEntry* Controller::CurrentRankOn(const std::string& node, const RankRef& rank) const {
  const JobEntry* e = jobs_.Find(rank.job);
  if (!e || !e->attempt || e->attempt->number != rank.attempt || !IsActive(e->job.state)) return nullptr;
  const auto& ranks = e->attempt->placement.ranks;  // indexed by rank
  if (rank.rank < 0 || rank.rank >= static_cast<int>(ranks.size())) return nullptr;
  const RankSlot& slot = ranks[rank.rank];
  return slot.rank == rank.rank && slot.node == node ? e : nullptr;
}

void Controller::OnRankExit(const std::string& node, const ProcessStatus& p, Time now, WriteBatch* batch) {
  const JobEntry* e = CurrentRankOn(node, p.rank);
  if (!e) {
    // An old attempt's rank, stopped on purpose; or a rank this node does not run, which its agent
    // cannot speak for (a node's credential must not blame another node).
    const JobEntry* j = jobs_.Find(p.rank.job);
    if (j && j->attempt && j->attempt->number == p.rank.attempt)
      spdlog::warn("agent of {} reports an exit of rank {} of job {}, which it does not run: ignored", node,
                   p.rank.rank, p.rank.job);
    return;
  }
  if (p.exit_code == 0) {
    // A rank that finished before its peers (they save, export or tear down for a while) is not lost.
    if (JobHealth* h = FindHealth(p.rank.job)) h->OnRankExitedOk(p.rank.attempt, p.rank.rank, now);
    if (jobs_.OnRankExitedOk(p.rank, now, batch)) Schedule(now, batch);
    return;
  }
  std::string how = p.signal      ? "killed by signal " + std::to_string(*p.signal)
                    : p.exit_code ? "exited with code " + std::to_string(*p.exit_code)
                                  : "exited (code unknown)";
  if (p.oom_kill) how += *p.oom_kill ? " (the kernel's OOM killer)" : " (not an OOM kill)";
  if (p.fenced)
    how +=
        ": stopped by its agent, whose lease ran out (no heartbeat answer in time: the daemon or the "
        "network was late, not the rank or the node)";
  Finding f = NodeFinding(p.rank.job, p.rank.attempt, FindingKind::kProcessExit, node, now,
                          "rank " + std::to_string(p.rank.rank) + " on " + node + " " + how);
  f.ranks = {p.rank.rank};
  if (JobHealth* h = FindHealth(p.rank.job)) f.step = h->RankStep(p.rank.rank);
  f.exit_code = p.exit_code;
  f.signal = p.signal;
  f.oom_kill = p.oom_kill;
  f.fenced = p.fenced;
  // Findings are viewer-readable: credentials a rank printed (or a path naming one) never land in them.
  if (!p.error.empty()) f.detail += ": " + RedactSecrets(p.error);
  f.log_tail = RedactSecrets(p.log_tail);
  f.flight_recorder = p.flight_recorder;
  for (FlightRecorderDump& d : f.flight_recorder) d.path = RedactSecrets(d.path);
  RecordFinding(std::move(f), now, batch);
}

bool Controller::PlacedOn(const std::string& node, const RankRef& rank) const {
  const JobEntry* e = jobs_.Find(rank.job);
  if (!e) return false;
  const Placement* p = e->attempt && e->attempt->number == rank.attempt      ? &e->attempt->placement
                       : e->previous && e->previous->attempt == rank.attempt ? &*e->previous
                                                                             : nullptr;
  if (!p || rank.rank < 0 || rank.rank >= static_cast<int>(p->ranks.size())) return false;
  const RankSlot& slot = p->ranks[rank.rank];  // indexed by rank
  return slot.rank == rank.rank && slot.node == node;
}

void Controller::AttachFlightRecorder(const ProcessStatus& p, WriteBatch* batch) {
  Finding* hang = findings_.Latest(p.rank.job, p.rank.attempt, FindingKind::kHang);
  if (!hang) return;
  DumpIndex& index = dump_index_[p.rank.job];
  if (index.finding != hang->id) {
    index = DumpIndex{hang->id, {}, {}};
    for (std::size_t i = 0; i < hang->flight_recorder.size(); ++i)
      index.by_path.emplace(hang->flight_recorder[i].path, i);
  }
  bool added = false;
  int& of_rank = index.per_rank[p.rank.rank];
  for (const FlightRecorderDump& d : p.flight_recorder) {  // paths redacted when parsed (api/)
    if (auto same = index.by_path.find(d.path); same != index.by_path.end()) {
      FlightRecorderDump& known = hang->flight_recorder[same->second];
      if (known.size != d.size) {
        known.size = d.size;  // still being written when first seen
        added = true;
      }
    } else if (of_rank >= kMaxDumpsPerRank || hang->flight_recorder.size() >= kMaxDumpsPerFinding) {
      ++heartbeat_ignored_["flight_recorder"];
    } else {
      index.by_path.emplace(d.path, hang->flight_recorder.size());
      hang->flight_recorder.push_back(d);
      ++of_rank;
      added = true;
    }
  }
  if (added) batch->Put(FindingRecord(*hang));
}

void Controller::NodeHeartbeat(const std::string& node, const AgentHeartbeat& hb, Done<HeartbeatAck> done,
                               const std::vector<RelayedReports>& relayed) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (!inventory_.Find(node)) return done(NotFound("no node " + node + "; register it first"));
  OpScope op = Begin(Turn());
  const Time now = op->now;
  WriteBatch& batch = op->batch;
  inventory_.MarkAgentAttached(node, now, &batch);
  // Known: a job the daemon has, at an attempt it started (health/unknown_processes.h).
  auto knows = [this](const RankRef& r) REQUIRES_SHARED(kControl) {
    const JobEntry* e = jobs_.Find(r.job);
    return e && r.attempt <= e->job.attempt;
  };
  const Node* n = inventory_.Find(node);
  AgentBoard::HeartbeatOutcome out =
      agents_.OnHeartbeat(node, hb, now, knows, n && !n->schedulable ? n->cordoned_at : std::nullopt);
  // A node cordoned for corrupting data returns by an operator only: a passing health check says nothing
  // of silent corruption.
  auto for_sdc = [this](const Node* n) REQUIRES_SHARED(kControl) {
    const Finding* f = findings_.Find(n->cordon_source);
    return f && (f->kind == FindingKind::kSdcSuspected || f->kind == FindingKind::kSdcConfirmed);
  };
  if (out.health_check_passes >= options_.health_check_passes && n && !for_sdc(n) &&
      inventory_.ReturnSuspect(node, now, &batch)) {
    spdlog::info("node {} passed its health check {} times in a row: schedulable again", node,
                 out.health_check_passes);
    Schedule(now, &batch);
  }
  HeartbeatAck ack;
  // Relayed reports first: a rank's last reports (its final checkpoint, `finished`) precede its exit.
  for (const RelayedReports& r : relayed) {
    const int n = static_cast<int>(r.batch.reports.size() + r.batch.rejected.size());
    // Only the node's own ranks of the current attempt: the agent's credential speaks for no other node,
    // and an old attempt's reports would be refused by the job anyway.
    if (!CurrentRankOn(node, r.rank)) {
      ++heartbeat_ignored_["reports"];
      reports_ignored_[static_cast<int>(IgnoredReason::kRelayForeign)] += n;
      ack.reports_rejected += n;
      continue;
    }
    Result<IngestSummary> in = IngestInto(r.rank.job, r.batch, now, &batch);
    if (!in.ok()) {  // refused as a whole (a far-future step, no attempt running): counted, nothing else
      report_counts_["rejected"] += n;
      ack.reports_rejected += n;
      spdlog::debug("agent of {}: reports relayed for rank {} of {} refused: {}", node, r.rank.rank,
                    r.rank.job, in.status().message());
      continue;
    }
    ack.reports_accepted += in->accepted;  // in->rejected includes those the parser refused
    ack.reports_rejected += static_cast<int>(in->rejected.size());
  }
  // An agent speaks only for the ranks placed on its node (in the current attempt or the one before, whose
  // ranks may still be stopping), each once per heartbeat: the rest is ignored and counted, so no entry of
  // one heartbeat costs more than a lookup.
  std::set<std::tuple<std::string_view, int, int>> seen;
  std::size_t ignored = 0;
  for (const ProcessStatus& p : hb.processes) {
    if (!PlacedOn(node, p.rank) || !seen.emplace(p.rank.job, p.rank.attempt, p.rank.rank).second) {
      ++ignored;
      heartbeat_ignored_["flight_recorder"] += p.flight_recorder.size();
      continue;
    }
    // The agent started these ranks: their attempt is launched on this node.
    const JobEntry* e = CurrentRankOn(node, p.rank);
    if (e && e->job.state == JobState::kLaunching)
      if (JobHealth* h = FindHealth(p.rank.job); h && h->OnNodeLaunched(node, now))
        MarkLaunched(p.rank.job, now, &batch);
    // Dumps of an attempt that hung (also of its ranks being stopped for the restart) join the hang finding.
    if (!p.flight_recorder.empty()) AttachFlightRecorder(p, &batch);
  }
  if (ignored > 0) {
    heartbeat_ignored_["process"] += ignored;
    spdlog::debug("agent of {} lists {} processes of ranks not placed on it (or listed twice): ignored", node,
                  ignored);
  }
  // Every exit is acknowledged (the agent forgets it); only those of ranks placed here count, once each.
  seen.clear();
  for (const ProcessStatus& p : out.exits) {
    ack.ack_exits.push_back(p.rank);
    if (PlacedOn(node, p.rank) && seen.emplace(p.rank.job, p.rank.attempt, p.rank.rank).second)
      OnRankExit(node, p, now, &batch);
  }
  for (const GpuFault& g : out.new_faults) {
    const std::string what =
        "agent of " + node + " reports GPU " + std::to_string(g.gpu) + " " + g.kind + ": " + g.detail;
    bool recovered = false;  // a running job of ours whose recovery fails the node
    for (const std::string& job : inventory_.cluster().JobsOn(node)) {
      const JobEntry* e = jobs_.Find(job);
      recovered = recovered || (IsActive(e->job.state) && LauncherFor(e->job).StartsAttempts());
      RecordFinding(NodeFinding(job, e->job.attempt, FindingKind::kGpuFault, node, now, what), now, &batch);
    }
    // An idle node, one held for a restart in backoff, or one only another launcher's job uses: the fault
    // is the hardware's own report all the same (it was ignored, and the next job placed there).
    if (!recovered)
      inventory_.Apply({node, NodeActionKind::kFail, "gpu_fault: " + what}, "agent", now, &batch);
  }
  // This agent is heard from now: a held exit may be decided (after its GPU faults, which would explain it).
  ReleaseHolds(now, &batch);
  // Only what this heartbeat can change: a launch gate waiting for this node's old ranks to stop. Other
  // agents' liveness and long-poll deadlines are the tick's (walking every agent on every heartbeat made
  // 20,000 agents at 1 Hz cost 20,000² steps a second).
  agents().OpenGates(now);
  CommitThen<HeartbeatAck>(std::move(done), [this, node, ack = std::move(ack)]() REQUIRES_SHARED(kControl) mutable {
    ack.assignments_version = agents_.version(node);
    ack.lease_s = options_.agent_lease_s;
    return std::move(ack);
  });
}

void Controller::WatchAssignments(const std::string& node, int64_t known, Time deadline, bool can_keep,
                                  Done<Assignments> done) {
  control_thread_.Assert();
  if (!ready()) return done(Unavailable("the daemon is not ready"));
  if (!epoch_saved_) return done(Unavailable("the daemon's epoch is not durable yet"));
  if (!inventory_.Find(node)) return done(NotFound("no node " + node));
  agents_.Watch(node, known, deadline, clock_->Now(), can_keep,
                [done = std::move(done)](Result<Assignments> a) { done(a); });
  AnswerWaiters();
}

void Controller::RestartJob(const std::string& id, const std::string& from,
                            const std::vector<std::string>& replace_nodes, const std::string& reason,
                            const std::string& by, Done<RestartOutcome> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (!jobs_.Find(id)) return done(NotFound("no job " + id));
  OpScope op = Begin(clock_->Now());
  const Time now = op->now;
  WriteBatch& batch = op->batch;
  std::string why = reason.empty() ? "forced by " + by : reason + " (requested by " + by + ")";
  int attempt_before = jobs_.Find(id)->job.attempt;
  const std::vector<Finding> earlier = findings_.Recent(id, kRecurrenceWindow);
  auto forced = recovery_.ForceRestart(id, HealthOf(id), from, replace_nodes, why, earlier, now, &batch,
                                      slurm_.AllocationView(id));
  if (!forced.ok()) return done(forced.status());
  for (const CheckpointTransition& t : HealthOf(id).Apply(forced->health, now))
    batch.Put(CheckpointRecord(t.checkpoint));
  const RecoveryDecision* d = &forced->decision;
  ++restart_causes_[id]["operator"];
  Finding f;
  f.job = id;
  f.attempt = attempt_before;
  f.kind = FindingKind::kRestartRequested;
  f.nodes = replace_nodes;
  f.detected_at = now;
  f.onset_at = now;  // the request
  f.detail = why;
  f.actions = d->actions;
  f.id = findings_.NextId();
  batch.Put(FindingRecord(f));
  findings_.Add(std::move(f));
  Schedule(now, &batch);
  const JobEntry* e = jobs_.Find(id);
  RestartOutcome out{e->job.attempt, e->job.state, d->resume_from};
  CommitThen<RestartOutcome>(std::move(done), [out = std::move(out)] { return out; });
}

}  // namespace shepherd
