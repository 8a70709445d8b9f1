// SlurmOwner (control/launch/slurm_owner.h): jobs launched through Slurm ("launcher": "slurm",
// docs/slurm.md), the inventory sync and the watched Slurm jobs.
// Each attempt is one srun step inside the job's allocation, which holds the placement's nodes plus
// resources.spare_nodes hot spares. Recovery sees only the allocation (AllocationView), so a failed node is
// replaced by the closest of the job's own spares; when none fits, the job is re-placed inside the
// allocation if it still fits there, and otherwise queued: its allocation is then given back and a new one
// is requested when it is placed again (requeue).
#include "control/launch/slurm_owner.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/launch/launcher.h"
#include "control/launch/slurm_launcher.h"
#include "core/redact.h"
#include "scheduler/placement.h"
#include "slurm/node_state.h"
#include "slurm/step_order.h"

namespace shepherd {

Result<bool> SlurmOwner::Restore(const Record& r) {
  if (r.key == SlurmNodeSync::kDrainedKey) {
    if (Status s = sync_.Restore(r.body); !s.ok()) return s;
    return true;
  }
  return allocations_.Restore(r);
}

void SlurmOwner::Saved(const std::vector<std::pair<std::string, int>>& attempts,
                       const std::vector<std::string>& requests) {
  for (const auto& a : attempts) {
    unsaved_attempts_.erase(a);
    // An attempt's first launch order was written in the batch of its start.
    if (auto it = unsaved_orders_.find("start/" + a.first + "/" + std::to_string(a.second));
        it != unsaved_orders_.end()) {
      mine_[it->second.first] = it->second.second;
      unsaved_orders_.erase(it);
    }
  }
  for (const std::string& r : requests) {
    unsaved_requests_.erase(r);
    if (auto it = unsaved_orders_.find(r); it != unsaved_orders_.end()) {
      mine_[it->second.first] = it->second.second;
      unsaved_orders_.erase(it);
    }
  }
}

void SlurmOwner::NewOrder(const std::string& job, int attempt, WriteBatch* batch, bool with_start) {
  const int64_t order = allocations_.NewOrder(job, attempt, batch);
  if (order == 0) return;
  mine_.erase(job);
  std::erase_if(unsaved_orders_, [&](const auto& u) { return u.second.first == job; });
  // Durable with the attempt's start (Saved's `attempts`), or else named among the requests Saved takes
  // back (a name no allocation request has: those are 16 hex digits).
  std::string name;
  if (with_start) {
    name = "start/" + job + "/" + std::to_string(attempt);
  } else {
    name = "order/" + job + "/" + std::to_string(order);
    new_requests_.push_back(name);
  }
  unsaved_orders_[name] = {job, Order{attempt, order}};
}

bool SlurmOwner::OrderCurrent(const std::string& job, const std::string& allocation, int attempt,
                              int64_t order) const {
  const JobEntry* e = jobs_->Find(job);
  const SlurmAllocationRecord* a = allocations_.Find(job);
  return e && e->attempt && e->attempt->number == attempt && IsActive(e->job.state) && a &&
         !a->id.empty() && a->id == allocation && a->order_attempt == attempt && a->order == order &&
         order > 0;
}

bool SlurmOwner::Touch(const std::string& job, WriteBatch* batch) const {
  if (!allocations_.Find(job)) return false;
  allocations_.Touch(job, batch);
  return true;
}

void SlurmOwner::Settle(const AttemptEvent& ev, Time now, WriteBatch* batch) {
  const JobEntry* e = jobs_->Find(ev.job);
  const SlurmAllocationRecord* a = allocations_.Find(ev.job);
  if (ev.kind == AttemptEvent::Kind::kEnded) {
    if (IsTerminal(e->job.state) || e->job.state == JobState::kQueued) allocations_.Release(ev.job, batch);
    return;
  }
  if (!e->attempt || e->attempt->number != ev.attempt || !IsActive(e->job.state)) return;
  SlurmLauncher::AllocationChange c = SlurmLauncher().AllocationFor(
      e->job, e->attempt->placement, a, inventory_->cluster(), allocations_.HeldNodes(ev.job));
  if (c.release) allocations_.Release(ev.job, batch);
  // The attempt's first launch order commits with its start: its step may start once that is durable.
  if (!c.want) return NewOrder(ev.job, ev.attempt, batch, /*with_start=*/true);
  if (c.spares_missing > 0)
    spdlog::warn("job {}: only {} of {} spare nodes are free for its Slurm allocation", ev.job,
                 e->job.spec.resources.spare_nodes - c.spares_missing, e->job.spec.resources.spare_nodes);
  allocations_.Want(ev.job, std::move(c.nodes), e->job.spec.slurm.allocation, c.named, batch);
  if (const std::string& r = allocations_.Find(ev.job)->request; !r.empty()) {
    new_requests_.push_back(r);
    unsaved_requests_.insert(r);
  }
  jobs_->SetState(ev.job, JobState::kLaunching, "waiting for the Slurm allocation", now, batch);
  NewOrder(ev.job, ev.attempt, batch, /*with_start=*/true);
}

// An allocation Slurm has not started (wanted or pending, not adopted) that names a node drained or down in
// Slurm, cordoned, failed or removed here waits for it (ReqNodeNotAvail) while other nodes may be free.
// Nothing runs in it yet, so the job is placed again off those nodes and the allocation given back for a
// new one (even when the new placement lies inside it: it names those nodes); a job that fits nowhere else
// keeps waiting for it.
std::vector<BlockedSlurmAllocation> SlurmOwner::Blocked() const {
  std::vector<BlockedSlurmAllocation> out;
  for (const auto& [id, a] : allocations_.all()) {
    if (a.adopted || a.state == SlurmAllocationRecord::State::kRunning) continue;
    const JobEntry* e = jobs_->Find(id);
    if (!e || e->job.state != JobState::kLaunching || !e->attempt) continue;
    BlockedSlurmAllocation b{.job = id};
    std::string names;
    for (const std::string& n : a.nodes)
      if (const Node* node = inventory_->cluster().Find(n); !node || !node->schedulable || node->failed) {
        b.unusable.insert(n);
        names += (names.empty() ? "" : ", ") + n;
      }
    if (b.unusable.empty()) continue;
    b.reason = "re-placed before its Slurm allocation started: " + names + " no longer usable";
    out.push_back(std::move(b));
  }
  return out;
}

std::optional<Cluster> SlurmOwner::AllocationView(const std::string& job) const {
  const JobEntry* e = jobs_->Find(job);
  const SlurmAllocationRecord* a = allocations_.Find(job);
  if (!e || !LauncherFor(e->job).HoldsAllocation() || !a ||
      a->state != SlurmAllocationRecord::State::kRunning)
    return std::nullopt;
  const Cluster& all = inventory_->cluster();
  Cluster view(all.levels());
  std::vector<std::string> placed =
      e->attempt ? NodesInRankOrder(e->attempt->placement) : std::vector<std::string>{};
  for (const std::string& id : a->nodes) {
    const Node* n = all.Find(id);
    if (!n) continue;
    Node copy = *n;
    // The allocation's nodes outside the placement are this job's hot spares.
    copy.spare = std::find(placed.begin(), placed.end(), id) == placed.end();
    (void)view.UpsertNode(copy);
  }
  // A placed node Slurm dropped from the allocation stays in the view, failed: recovery then replaces it
  // with the allocation's spares (gone from the view, its ranks could not be moved, and the job was
  // queued out of its allocation).
  for (const std::string& id : placed) {
    const Node* n = all.Find(id);
    if (!n || std::find(a->nodes.begin(), a->nodes.end(), id) != a->nodes.end()) continue;
    Node copy = *n;
    copy.spare = false;
    copy.failed = true;
    (void)view.UpsertNode(copy);
  }
  if (e->attempt && IsActive(e->job.state)) (void)view.Allocate(job, e->attempt->placement);
  return view;
}

SlurmOrders SlurmOwner::Orders(const std::map<std::string, int>& started, double stop_grace_s) const {
  SlurmOrders out;
  out.cancel.assign(allocations_.releasing().begin(), allocations_.releasing().end());
  for (const auto& [job, a] : allocations_.all()) {
    const JobEntry* e = jobs_->Find(job);
    if (!e) continue;
    SlurmJobOrder o;
    o.job = job;
    o.allocation = a;
    o.sbatch_args = e->job.spec.slurm.sbatch_args;
    o.stop_grace_s = stop_grace_s;
    o.attempt = e->job.attempt;
    o.allocation_durable = !unsaved_requests_.count(a.request);
    o.step_wanted = IsActive(e->job.state) && e->attempt &&
                    a.state == SlurmAllocationRecord::State::kRunning &&
                    PlacedWithin(e->attempt->placement, a.nodes) &&
                    !unsaved_attempts_.count({job, e->attempt->number});  // durable first
    o.step_ran = o.step_wanted && e->job.state == JobState::kRunning;
    if (e->attempt && a.order_attempt == e->attempt->number) o.order = a.order;
    auto m = mine_.find(job);
    o.order_mine = o.order > 0 && m != mine_.end() && m->second == Order{o.attempt, o.order};
    auto known = started.find(job);
    if (o.step_wanted && (known == started.end() || known->second != o.attempt)) o.step = StepFor(*e, a);
    out.jobs.push_back(std::move(o));
  }
  return out;
}

slurm::StepSpec SlurmOwner::StepFor(const JobEntry& e, const SlurmAllocationRecord& a) const {
  slurm::StepSpec s;
  s.job_id = a.id;
  // Named by its launch order when this daemon holds the current one (the only case it starts a step);
  // otherwise the name is a placeholder the worker never starts.
  const int64_t order = a.order_attempt == e.attempt->number ? a.order : 0;
  s.name = slurm::StepName(e.attempt->number, order);
  if (order > 0) s.env[slurm::kStepOrderVar] = std::to_string(order);
  s.placement = e.attempt->placement;
  s.command = e.job.spec.command;
  // Every GPU of each node (the fewest any of the step's nodes has in the inventory, which is Slurm's GPU
  // GRES under --slurm): under ConstrainDevices=yes a task sees only its step's GPUs, and holding them all
  // keeps the placement's GPU indices the node's own (docs/slurm.md, "GPUs and ConstrainDevices").
  int gpus = 0;
  for (const std::string& node : NodesInRankOrder(s.placement))
    if (const Node* n = inventory_->cluster().Find(node))
      gpus = gpus == 0 ? n->gpus : std::min(gpus, n->gpus);
  s.gpus_per_node = gpus;
  return s;
}

void SlurmOwner::SetStepEnv(slurm::StepSpec* s, std::vector<slurm::EnvMap> per_rank) {
  // The agents' environment, node by node; what every rank shares goes to srun, the rest into the tables.
  // CUDA_VISIBLE_DEVICES always goes into the tables: on a node with GPU GRES, Slurm's gres/gpu plugin
  // sets or unsets it in every task of a step (unset when the step asks for no GPUs), whatever srun was
  // given, and shepherd-slurm-rank applies the tables after that.
  for (const auto& [k, v] : per_rank.at(0))
    if (k != "CUDA_VISIBLE_DEVICES" &&
        std::all_of(per_rank.begin(), per_rank.end(), [&, &k = k, &v = v](const slurm::EnvMap& m) {
          auto it = m.find(k);
          return it != m.end() && it->second == v;
        }))
      s->env[k] = v;
  for (slurm::EnvMap& m : per_rank)
    for (const auto& [k, v] : s->env) m.erase(k);
  s->rank_env = std::move(per_rank);
}

std::vector<SlurmEffect> SlurmOwner::OnLaunchEvent(const SlurmLaunchEvent& ev, const JobHealth* health,
                                                   Time now, WriteBatch* batch) {
  std::vector<SlurmEffect> out;
  const JobEntry* e = jobs_->Find(ev.job);
  const bool current = e && e->attempt && e->attempt->number == ev.attempt && IsActive(e->job.state);
  switch (ev.kind) {
    case SlurmLaunchEvent::Kind::kSubmitted:
      allocations_.Submitted(ev.job, ev.allocation, batch);
      if (e && e->job.state == JobState::kLaunching)
        jobs_->SetState(ev.job, JobState::kLaunching, "waiting for Slurm allocation " + ev.allocation, now,
                        batch);
      break;
    case SlurmLaunchEvent::Kind::kPending:
      if (e && e->job.state == JobState::kLaunching && !ev.message.empty())
        jobs_->SetState(ev.job, JobState::kLaunching,
                        "waiting for Slurm allocation " + ev.allocation + " (Slurm: " + ev.message + ")", now,
                        batch);
      break;
    case SlurmLaunchEvent::Kind::kAllocated:
      OnAllocationRunning(ev, now, batch, &out);
      break;
    case SlurmLaunchEvent::Kind::kAllocationEnded:
      allocations_.Forget(ev.job, batch);
      if (e && !IsTerminal(e->job.state)) {
        spdlog::warn("job {}: Slurm allocation {} {}: the job fails", ev.job, ev.allocation, ev.message);
        jobs_->EndAttempt(ev.job, now, batch);
        jobs_->SetState(ev.job, JobState::kFailed,
                        (ev.allocation.empty() ? "Slurm allocation" : "Slurm allocation " + ev.allocation) +
                            ": " + ev.message,
                        now, batch);
      }
      break;
    case SlurmLaunchEvent::Kind::kStepStarted:
      if (current && e->job.state == JobState::kLaunching) {
        spdlog::info("job {} attempt {}: Slurm step {} runs", ev.job, ev.attempt, ev.step_id);
        out.push_back({.kind = SlurmEffect::Kind::kLaunched,
                       .job = ev.job,
                       .attempt = ev.attempt,
                       .nodes = NodesInRankOrder(e->attempt->placement)});
      }
      break;
    case SlurmLaunchEvent::Kind::kStepFailed:  // no rank ran: no rank or node is blamed; recovery restarts
      if (current)
        out.push_back(
            {.kind = SlurmEffect::Kind::kFinding,
             .job = ev.job,
             .attempt = ev.attempt,
             .finding = StepFinding(
                 ev, "Slurm refused the step of attempt " + std::to_string(ev.attempt) + ": " + ev.message,
                 now)});
      break;
    case SlurmLaunchEvent::Kind::kStepEnded:
      if (current) OnStepEnded(ev, health, now, batch, &out);
      break;
    case SlurmLaunchEvent::Kind::kSuspended:  // an admin's or the scheduler's pause, not a rank fault
    case SlurmLaunchEvent::Kind::kResumed:
      if (e && IsActive(e->job.state)) {
        const bool suspended = ev.kind == SlurmLaunchEvent::Kind::kSuspended;
        out.push_back(
            {.kind = suspended ? SlurmEffect::Kind::kSuspend : SlurmEffect::Kind::kResume, .job = ev.job});
        spdlog::info("job {}: Slurm allocation {} {}", ev.job, ev.allocation,
                     suspended ? "suspended: nothing is judged until it runs again" : "runs again");
        jobs_->SetState(ev.job, e->job.state,
                        suspended ? "Slurm allocation " + ev.allocation + " is suspended" : "", now, batch);
      }
      break;
    case SlurmLaunchEvent::Kind::kCancelled:
      allocations_.Cancelled(ev.allocation, batch);
      break;
    case SlurmLaunchEvent::Kind::kOrderWanted: {
      // Once per need: not while one is being written, nor when this daemon's durable order is still
      // unused by the worker.
      if (!current) break;
      const bool pending = std::any_of(unsaved_orders_.begin(), unsaved_orders_.end(),
                                       [&](const auto& u) { return u.second.first == ev.job; });
      const SlurmAllocationRecord* a = allocations_.Find(ev.job);
      auto m = mine_.find(ev.job);
      const bool fresh = m != mine_.end() && a && m->second == Order{ev.attempt, a->order} &&
                         a->order_attempt == ev.attempt && a->order != ev.order;
      if (pending || fresh || !a) break;
      spdlog::info("job {} attempt {}: a new Slurm launch order before its step starts", ev.job, ev.attempt);
      NewOrder(ev.job, ev.attempt, batch, /*with_start=*/false);
      break;
    }
  }
  return out;
}

void SlurmOwner::OnAllocationRunning(const SlurmLaunchEvent& ev, Time now, WriteBatch* batch,
                                     std::vector<SlurmEffect>* out) {
  std::vector<std::string> left = allocations_.Running(ev.job, ev.allocation, ev.nodes, batch);
  const JobEntry* e = jobs_->Find(ev.job);
  if (!e || !e->attempt || !IsActive(e->job.state)) return;
  // Slurm dropped a node from the allocation: it judged the node failed (--no-kill keeps the rest).
  for (const std::string& node : left) {
    Finding f;
    f.job = ev.job;
    f.attempt = e->attempt->number;
    f.kind = FindingKind::kNodeLost;
    f.nodes = {node};
    f.detected_at = now;
    f.onset_at = now;  // Slurm's word arrives as it is known: its receipt
    f.detail = "Slurm removed " + node + " from allocation " + ev.allocation + " (node failure)";
    for (const RankSlot& r : e->attempt->placement.ranks)
      if (r.node == node) f.ranks.push_back(r.rank);
    if (!f.ranks.empty())
      out->push_back({.kind = SlurmEffect::Kind::kFinding,
                      .job = ev.job,
                      .attempt = f.attempt,
                      .finding = std::move(f)});
  }
  // An adopted allocation: the first placement could not know its nodes; re-place the job inside it.
  out->push_back({.kind = SlurmEffect::Kind::kPlaceInside,
                  .job = ev.job,
                  .nodes = ev.nodes,
                  .allocation = ev.allocation});
}

void SlurmOwner::PlaceInside(const std::string& job, const std::string& allocation,
                             const std::vector<std::string>& nodes, std::optional<Checkpoint> resume,
                             Time now, WriteBatch* batch) {
  const JobEntry* e = jobs_->Find(job);
  if (!e || e->job.state != JobState::kLaunching || PlacedWithin(e->attempt->placement, nodes)) return;
  std::optional<Cluster> view = AllocationView(job);
  PlaceOptions o;
  o.attempt = e->job.attempt + 1;
  o.dp_edge_bytes = e->estimate.comm.dp;
  o.pp_edge_bytes = e->estimate.comm.pp;
  if (view) {
    (void)view->Release(job);
    for (const Node* n : view->nodes()) {  // spares are only for replacement elsewhere; here all may run
      Node copy = *n;
      copy.spare = false;
      (void)view->UpsertNode(copy);
    }
  }
  Result<Placement> p = view ? Place(*view, e->job.plan, o) : Result<Placement>(NotFound("no allocation"));
  jobs_->EndAttempt(job, now, batch);
  if (!p.ok() || !jobs_
                      ->StartAttempt(job, std::move(p).value(),
                                     "placed inside Slurm allocation " + allocation, resume, now, batch)
                      .ok())
    jobs_->SetState(job, JobState::kFailed,
                    "the job does not fit Slurm allocation " + allocation + " (" +
                        (p.ok() ? std::string("its GPUs are taken") : p.status().message()) + ")",
                    now, batch);
}

void SlurmOwner::OnStepEnded(const SlurmLaunchEvent& ev, const JobHealth* health, Time now, WriteBatch* batch,
                             std::vector<SlurmEffect>* out) {
  const JobEntry* e = jobs_->Find(ev.job);
  spdlog::info("job {} attempt {}: Slurm step ended (exit {}, signal {})", ev.job, ev.attempt,
               ev.exit.exit_code, ev.exit.signal);
  // srun exits 0 only when every task did. Ranks that all reported `finished` ended normally too, whatever
  // srun's status says (after a daemon restart the step's srun was another process's child: unknown).
  if (ev.exit.exit_code == 0 || (health && health->all_finished())) {
    const char* why = ev.exit.exit_code == 0 ? "every rank exited 0"
                                             : "every rank reported finished (the step's exit is unknown)";
    for (const RankSlot& r : e->attempt->placement.ranks)
      if (jobs_->OnRankExitedOk({ev.job, ev.attempt, r.rank}, now, batch, why)) break;
    return;
  }
  using slurm::StepCancel;
  if (const StepCancel c = ev.log.cancel;
      c == StepCancel::kTimeLimit || c == StepCancel::kPreemption || c == StepCancel::kJobRequeue) {
    // Slurm is ending the allocation (its time limit, a preemption): no rank or node is at fault, and no
    // restart can run in it. Nothing is judged until the worker sees the allocation end, which ends the
    // job; should it not end within kAllocationEndWait (the notice came from a rank's own output, which
    // shares the step's log), the ranks' silence is judged from then as any other.
    constexpr double kAllocationEndWait = 300;  // Slurm's KillWait (30 s by default) and a few reads
    const SlurmAllocationRecord* a = allocations_.Find(ev.job);
    out->push_back(
        {.kind = SlurmEffect::Kind::kSuspend, .job = ev.job, .until = now + Seconds(kAllocationEndWait)});
    jobs_->SetState(ev.job, e->job.state,
                    std::string("Slurm cancelled the step of attempt ") + std::to_string(ev.attempt) + " (" +
                        slurm::ToString(c) + "): the job ends with allocation " + (a ? a->id : ""),
                    now, batch);
    return;
  }
  // Each applies only while the attempt is still current (an earlier one may restart the job).
  for (const std::string& node : ev.log.node_failures) {
    Finding f;
    f.job = ev.job;
    f.attempt = ev.attempt;
    f.kind = FindingKind::kNodeLost;
    f.nodes = {node};
    f.detected_at = now;
    f.onset_at = now;  // Slurm's word arrives as it is known: its receipt
    f.detail = "srun: node failure on " + node;
    for (const RankSlot& r : e->attempt->placement.ranks)
      if (r.node == node) f.ranks.push_back(r.rank);
    out->push_back(
        {.kind = SlurmEffect::Kind::kFinding, .job = ev.job, .attempt = ev.attempt, .finding = std::move(f)});
  }
  for (const slurm::TaskEnd& t : ev.log.failed) {
    ProcessStatus p;
    p.rank = {ev.job, ev.attempt, t.rank};
    p.running = false;
    p.exit_code = t.exit_code;
    p.signal = t.signal;
    if (!t.exit_code && !t.signal) p.error = "srun: " + t.how;
    p.log_tail = ev.log_tail;
    out->push_back({.kind = SlurmEffect::Kind::kRankExit,
                    .job = ev.job,
                    .attempt = ev.attempt,
                    .node = t.node,
                    .process = std::move(p)});
  }
  if (!out->empty()) return;
  // srun failed without naming a task (it was killed, or its output was lost): no rank or node is blamed.
  const std::string detail =
      !ev.message.empty()
          ? ev.message
          : "the Slurm step ended (srun exit " + std::to_string(ev.exit.exit_code) +
                (ev.exit.signal ? ", signal " + std::to_string(ev.exit.signal) : std::string()) +
                ") without naming a task";
  out->push_back({.kind = SlurmEffect::Kind::kFinding,
                  .job = ev.job,
                  .attempt = ev.attempt,
                  .finding = StepFinding(ev, detail, now)});
}

Finding SlurmOwner::StepFinding(const SlurmLaunchEvent& ev, std::string detail, Time now) {
  Finding f;
  f.job = ev.job;
  f.attempt = ev.attempt;
  f.kind = FindingKind::kProcessExit;
  f.detected_at = now;
  f.onset_at = now;  // Slurm's word arrives as it is known: its receipt
  f.detail = std::move(detail);
  f.log_tail = RedactSecrets(ev.log_tail);
  return f;
}

std::vector<SlurmEffect> SlurmOwner::NodesDown(const slurm::SlurmView& view, Time now) const {
  std::vector<SlurmEffect> out;
  for (const slurm::SlurmNode& s : view.nodes) {
    const Node* n = inventory_->Find(s.name);
    if (!n || n->failed || slurm::ShepherdStateOf(s.state) != NodeState::kFailed) continue;
    for (const std::string& job : inventory_->cluster().JobsOn(s.name)) {
      const JobEntry* e = jobs_->Find(job);
      if (!e || !LauncherFor(e->job).HoldsAllocation() || !e->attempt || !IsActive(e->job.state)) continue;
      Finding f;
      f.job = job;
      f.attempt = e->attempt->number;
      f.kind = FindingKind::kNodeLost;
      f.nodes = {s.name};
      f.detected_at = now;
      f.onset_at = now;  // Slurm's word arrives as it is known: its receipt
      f.detail = "Slurm reports " + s.name + " " + s.state_text;
      for (const RankSlot& r : e->attempt->placement.ranks)
        if (r.node == s.name) f.ranks.push_back(r.rank);
      out.push_back(
          {.kind = SlurmEffect::Kind::kFinding, .job = job, .attempt = f.attempt, .finding = std::move(f)});
    }
  }
  return out;
}

SlurmWork SlurmOwner::Sync(const slurm::SlurmView& view, Time now, WriteBatch* batch) {
  return {sync_.Apply(view, now, batch), SlurmJobWatch::ToRead(*jobs_)};
}

std::vector<SlurmEffect> SlurmOwner::CycleDone(const std::vector<SlurmCommandResult>& results,
                                               const std::vector<SlurmJobSighting>& sightings,
                                               WriteBatch* batch) {
  std::vector<SlurmEffect> out;
  sync_.OnCommandsDone(results, batch);
  SlurmJobWatch::Observation seen = watch_.Observe(sightings);
  // Slurm suspended or is ending the job: its ranks' silence is Slurm's doing (a scancel was recorded as
  // heartbeat_lost before the second read ended the job). Judged again from when it runs again.
  for (const auto& [job, hold] : seen.hold)
    out.push_back({.kind = SlurmEffect::Kind::kHold, .job = job, .hold = hold});
  for (const SlurmJobWatch::Ended& end : seen.ended)
    out.push_back(
        {.kind = SlurmEffect::Kind::kEndJob, .job = end.job, .state = end.state, .reason = end.reason});
  return out;
}

}  // namespace shepherd
