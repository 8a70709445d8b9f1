// Controller: the Slurm wiring. The SlurmOwner (control/launch/slurm_owner.h) keeps and decides everything
// about Slurm; here what the daemon's Slurm workers report reaches it, its effects are carried out across
// the owners, and each operation commits. Called on the control thread.
#include <spdlog/spdlog.h>

#include "control/controller.h"
#include "control/launch/slurm_launcher.h"
#include "control/records.h"

namespace shepherd {

void Controller::ApplySlurm(const std::vector<SlurmEffect>& effects, Time now, WriteBatch* batch,
                            bool* ended) {
  using Kind = SlurmEffect::Kind;
  for (const SlurmEffect& x : effects) {
    const JobEntry* e = jobs_.Find(x.job);
    const bool current = e && e->attempt && e->attempt->number == x.attempt && IsActive(e->job.state);
    switch (x.kind) {
      case Kind::kFinding:
        if (current) RecordFinding(x.finding, now, batch);
        break;
      case Kind::kRankExit:
        if (current) OnRankExit(x.node, x.process, now, batch);
        break;
      case Kind::kLaunched:
        if (current && e->job.state == JobState::kLaunching) {
          JobHealth& health = HealthOf(x.job);
          bool launched = false;
          for (const std::string& n : x.nodes) launched |= health.OnNodeLaunched(n, now);
          if (launched) MarkLaunched(x.job, now, batch);
        }
        break;
      case Kind::kSuspend:
        if (e) HealthOf(x.job).Suspend(x.until);
        break;
      case Kind::kResume:
        if (e) HealthOf(x.job).Resume(now);
        break;
      case Kind::kHold:
        if (JobHealth* h = FindHealth(x.job); h && h->suspended() != x.hold) {
          if (x.hold)
            h->Suspend();
          else
            h->Resume(now);
        }
        break;
      case Kind::kEndJob:
        if (!e || IsTerminal(e->job.state)) break;  // cancelled while Slurm was being read
        spdlog::info("job {} {}: {}", x.job, ToString(x.state), x.reason);
        if (EndJob(x.job, x.state, x.reason, now, batch).ok() && ended) *ended = true;
        break;
      case Kind::kPlaceInside:
        if (e) slurm_.PlaceInside(x.job, x.allocation, x.nodes, HealthOf(x.job).DefaultResume(), now, batch);
        break;
    }
  }
}

void Controller::SyncSlurm(const slurm::SlurmView& view, Done<SlurmWork> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  OpScope op = Begin(clock_->Now());
  const Time now = op->now;
  WriteBatch& batch = op->batch;
  // Slurm's verdict on a node (down, not responding) is evidence for the jobs Shepherd runs there through
  // Slurm. Recorded before the sync applies it, so the node fails by that finding (and is drained in Slurm
  // naming it), not as Slurm's own state.
  ApplySlurm(slurm_.NodesDown(view, now), now, &batch);
  SlurmWork work = slurm_.Sync(view, now, &batch);
  Schedule(now, &batch);
  CommitThen<SlurmWork>(std::move(done), [work = std::move(work)] { return work; });
}

SlurmOrders Controller::GetSlurmOrders(const std::map<std::string, int>& started) const {
  control_thread_.AssertShared();
  SlurmOrders out = slurm_.Orders(started, options_.stop_timeout_s);
  // Each step's ranks get the agents' environment, node by node (each with its own rank token).
  for (SlurmJobOrder& o : out.jobs) {
    if (!o.step) continue;
    const JobEntry& e = *jobs_.Find(o.job);
    std::vector<EnvMap> per_rank(o.step->placement.ranks.size());
    for (const std::string& node : NodesInRankOrder(o.step->placement))
      for (LocalRankEnv& r : RankEnvsOn(e, node)) per_rank.at(r.rank) = std::move(r.env);
    SlurmOwner::SetStepEnv(&*o.step, std::move(per_rank));
  }
  return out;
}

void Controller::OnSlurmReport(const SlurmReport& report) {
  control_thread_.Assert();
  if (!CheckWritable().ok()) return;
  // A launch event reads the clock as a turn (it may judge silence); the others as it is.
  OpScope op = Begin(std::holds_alternative<SlurmLaunchEvent>(report) ? Turn() : clock_->Now());
  const Time now = op->now;
  WriteBatch& batch = op->batch;
  if (const auto* ev = std::get_if<SlurmLaunchEvent>(&report)) {
    ApplySlurm(slurm_.OnLaunchEvent(*ev, FindHealth(ev->job), now, &batch), now, &batch);
    Schedule(now, &batch);
  } else if (const auto* cycle = std::get_if<SlurmCycleResults>(&report)) {
    bool ended = false;
    ApplySlurm(slurm_.CycleDone(cycle->commands, cycle->sightings, &batch), now, &batch, &ended);
    if (ended) Schedule(now, &batch);  // their slots go to the queue
  } else if (const auto* o = std::get_if<RequeueOutcome>(&report); o && !o->requeued) {
    if (Finding* f = findings_.Mutable(o->job, o->finding)) {
      f->actions.push_back("not requeued: " + o->detail);
      batch.Put(FindingRecord(*f));
    }
    // Only a requeue that happened counts against max_restarts.
    if (JobEntry* e = jobs_.Mutable(o->job); e && e->job.restarts > 0) {
      --e->job.restarts;
      jobs_.Persist(o->job, &batch);
    }
  }
  if (!batch.empty()) Commit([](Status) {});
}

void Controller::CheckSlurmOrder(const std::string& job, const std::string& allocation, int attempt,
                                 int64_t order, Done<bool> done) {
  control_thread_.Assert();
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  if (!jobs_.Find(job)) return done(NotFound("job " + job + " not found"));
  // Decided on this leader's state now; answered only after a write made afterwards is durable. That write
  // is fenced (a deposed leader's fails), so a `true` means no newer order was durable when it was decided:
  // a step a later leader lists after writing its own order includes this one (docs/slurm.md).
  OpScope op = Begin(clock_->Now());
  const bool current = slurm_.OrderCurrent(job, allocation, attempt, order);
  if (!slurm_.Touch(job, &op->batch)) return done(false);  // no allocation: no order can be current
  CommitThen<bool>(std::move(done), [current] { return current; });
}

}  // namespace shepherd
