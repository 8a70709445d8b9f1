#include "control/job_book.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "control/launch/launcher.h"
#include "control/records.h"
#include "scheduler/placement.h"
#include "scheduler/queue.h"

namespace shepherd {

Hardware JobBook::HardwareFor(const JobSpec& spec) const {
  // From the Cluster's indexes: O(1), whatever the inventory's size.
  const Cluster& c = inventory_->cluster();
  Resources r = spec.resources;
  // No GPU named: the one the usable nodes have, when they all have one the planner knows (its speeds; the
  // memory stays the inventory's, which is what a rank gets).
  if (r.gpu.empty())
    if (std::optional<std::string> model = c.UsableGpuModel()) {
      r.gpu = *model;
      if (!r.gpu_memory_gib) r.gpu_memory_gib = c.MinUsableGpuMemory();
    }
  Hardware hw = HardwareForResources(r, c.MinUsableGpuMemory().value_or(default_gpu_memory_gib_));
  // The widest domain: one small node must not cap every job's TP (placement gives it no slot for a
  // wider group). Memory stays the smallest: any usable node may receive a rank.
  const int64_t domain_gpus = c.MaxUsableDomainGpus();
  if (!spec.resources.gpu_memory_gib && domain_gpus > 0)
    hw.nvlink_domain_gpus = static_cast<int>(domain_gpus);
  return hw;
}

void JobBook::Track(const JobEntry& e) {
  if (e.job.state == JobState::kQueued)
    queued_.emplace(e.job.seq, e.job.id);
  else
    queued_.erase({e.job.seq, e.job.id});
}

Result<std::string> JobBook::Submit(JobSpec spec, PlanEstimate estimate, Time now, WriteBatch* batch) {
  int64_t gpus = estimate.plan.world_size();
  int64_t usable = inventory_->cluster().UsableGpus();
  if (gpus > usable)
    return InvalidContent(
        "the job is larger than the usable inventory",
        {{"resources.gpus", "needs " + std::to_string(gpus) +
                                " GPUs; the usable (non-spare, schedulable) inventory has " +
                                std::to_string(usable)}});
  if (!spec.external_id.empty())
    if (const JobEntry* other = FindExternal(spec.external_id))
      return Status(Code::kConflict, "job " + other->job.id + " has external_id " + spec.external_id,
                    {{"external_id", "is the external id of " + other->job.id + ", which has not ended"}});
  JobEntry e;
  e.job.seq = next_seq_++;
  char id[32];
  std::snprintf(id, sizeof id, "job-%06lld", static_cast<long long>(e.job.seq));
  e.job.id = id;
  e.job.spec = std::move(spec);
  // auto, or an explicit layout's open knobs (PlanJob), may have chosen full recompute where the spec named
  // none: the job runs (and is re-planned) with it. An explicit layout's spec is written as it runs.
  e.job.spec.training.activation_recompute = estimate.activation_recompute;
  e.job.spec.training.recompute_num_layers = estimate.recompute_num_layers;
  if (!e.job.spec.parallelism.automatic) {
    ParallelismSpec& p = e.job.spec.parallelism;
    p.vpp = estimate.plan.vpp;
    p.zero_stage = estimate.plan.zero_stage;
    p.vpp_given = p.zero_stage_given = true;
    e.job.spec.training.micro_batch_size = estimate.plan.micro_batch_size;
    e.job.spec.training.micro_batch_size_given = true;
  }
  e.job.plan = estimate.plan;
  e.job.state = JobState::kQueued;
  e.job.reason = "waiting for capacity";
  e.job.created_at = e.job.updated_at = now;
  e.estimate = std::move(estimate);
  batch->Put(JobRecord(e.job, e.estimate));
  state_changes_.push_back({e.job.id, e.job.state, 0, e.job.reason, batch->ops.size() - 1});
  if (!e.job.spec.external_id.empty()) by_external_id_[e.job.spec.external_id].insert(e.job.id);
  Track(e);
  jobs_[e.job.id] = std::move(e);
  return std::string(id);
}

void JobBook::Event(AttemptEvent::Kind kind, const JobEntry& e) {
  AttemptEvent ev{kind, e.job.id, e.attempt->number, {}};
  for (const RankSlot& r : e.attempt->placement.ranks) ev.nodes.insert(r.node);
  events_.push_back(std::move(ev));
}

Status JobBook::StartAttempt(const std::string& job, Placement placement, const std::string& reason,
                             std::optional<Checkpoint> resume, Time now, WriteBatch* batch,
                             std::optional<int> number) {
  JobEntry& e = jobs_.at(job);
  Attempt a;
  a.job = job;
  a.number = number.value_or(e.job.attempt + 1);
  a.started_at = now;
  a.reason = reason;
  a.not_before = e.next_not_before;
  if (resume) {
    a.resume_checkpoint = resume->id;
    a.resume_step = resume->step;
  }
  placement.attempt = a.number;
  a.placement = std::move(placement);
  if (Status s = inventory_->Allocate(job, a.placement); !s.ok()) return s;
  e.job.attempt = a.number;
  e.job.state = JobState::kLaunching;  // running once its ranks are known to have started
  e.job.reason.clear();
  e.job.updated_at = now;
  Track(e);
  batch->Put(JobRecord(e.job, e.estimate));
  state_changes_.push_back({job, e.job.state, a.number, reason, batch->ops.size() - 1});
  batch->Put(AttemptRecord(a));
  spdlog::info("job {} attempt {} started on {} ranks ({})", job, a.number, a.placement.ranks.size(), reason);
  if (e.attempt) {
    e.previous = std::move(e.attempt->placement);
    e.attempt->placement.ranks.clear();
    e.attempt->placement.ranks.shrink_to_fit();
    e.earlier.push_back({std::move(*e.attempt), e.attempt_size});
  }
  e.attempt_size = SizeOf(a, e.job);
  e.attempt = std::move(a);
  e.exited_ok.clear();
  e.next_not_before.reset();
  Event(AttemptEvent::Kind::kStarted, e);
  return Status::Ok();
}

void JobBook::EndAttempt(const std::string& job, Time now, WriteBatch* batch) {
  JobEntry& e = jobs_.at(job);
  if (!e.attempt) return;
  inventory_->Release(job);
  if (e.attempt->ended_at) return;
  e.attempt->ended_at = now;
  batch->Put(AttemptRecord(*e.attempt));
  Event(AttemptEvent::Kind::kEnded, e);
  events_.back().ended = *e.attempt;
}

void JobBook::RecordFinalMarks(const AttemptEvent& ev, const MarksSnapshot& marks, WriteBatch* batch) {
  Attempt recorded = *ev.ended;
  AttemptMarks::Apply(marks, &recorded);
  batch->Put(AttemptRecord(recorded));
  auto it = jobs_.find(ev.job);
  if (it == jobs_.end()) return;
  JobEntry& e = it->second;
  if (e.attempt && e.attempt->number == ev.attempt) {
    AttemptMarks::Apply(marks, &*e.attempt);
    return;
  }
  for (PastAttempt& p : e.earlier)
    if (p.attempt.number == ev.attempt) AttemptMarks::Apply(marks, &p.attempt);
}

void JobBook::SetState(const std::string& job, JobState state, const std::string& reason, Time now,
                       WriteBatch* batch) {
  JobEntry& e = jobs_.at(job);
  if (IsTerminal(state) && !IsTerminal(e.job.state))
    events_.push_back({AttemptEvent::Kind::kJobEnded, job, e.job.attempt, {}});
  e.job.state = state;
  e.job.reason = reason;
  e.job.updated_at = now;
  if (IsTerminal(state)) e.next_not_before.reset();
  Track(e);
  batch->Put(JobRecord(e.job, e.estimate));
  state_changes_.push_back({job, state, e.job.attempt, reason, batch->ops.size() - 1});
}

void JobBook::Persist(const std::string& job, WriteBatch* batch) {
  batch->Put(JobRecord(jobs_.at(job).job, jobs_.at(job).estimate));
}

std::vector<std::string> JobBook::Schedule(const ResumeChooser& resume, Time now, WriteBatch* batch,
                                           const std::set<std::string>& held,
                                           const std::function<std::set<std::string>()>& avoid) {
  std::optional<std::set<std::string>> avoided;
  std::vector<QueuedJob> queue;  // in submission order
  const int64_t free = inventory_->cluster().FreeUsableGpus();
  const int64_t usable = inventory_->cluster().UsableGpus();
  std::vector<std::pair<std::string, std::string>> reasons;  // job -> new reason
  for (const auto& [seq, id] : queued_) {
    const JobEntry& e = jobs_.at(id);
    const int64_t gpus = e.job.plan.world_size();
    // Larger than the usable inventory: it waits for nodes and holds back no job (AdmitFromQueue), and its
    // reason says so while it lasts.
    std::string why;
    if (gpus > usable)
      why = "waiting for nodes: needs " + std::to_string(gpus) +
            " GPUs, the usable (schedulable, not failed, non-spare) inventory has " + std::to_string(usable);
    else if (e.job.reason.starts_with("waiting for nodes:"))
      why = "waiting for capacity";
    if (!why.empty() && why != e.job.reason) reasons.emplace_back(id, why);
    if (gpus > usable) continue;
    // A first job larger than the free GPUs blocks every job behind it (AdmitFromQueue's head rule), so a
    // full cluster costs one look here, not a pass over the whole queue on every write.
    if (queue.empty() && gpus > free) break;
    PlaceOptions o;
    o.attempt = e.job.attempt + 1;
    o.dp_edge_bytes = e.estimate.comm.dp;
    o.pp_edge_bytes = e.estimate.comm.pp;
    o.exclude_nodes = held;
    if (avoid && LauncherFor(e.job).AgentsStartRanks()) {
      if (!avoided) avoided = avoid();
      o.avoid_nodes = *avoided;
    }
    queue.push_back({id, e.job.plan, o});
  }
  for (const auto& [id, why] : reasons) SetState(id, JobState::kQueued, why, now, batch);
  std::vector<std::string> started;
  for (Admission& a : AdmitFromQueue(inventory_->cluster(), queue)) {
    // AdmitFromQueue placed it on free GPUs, so this cannot conflict.
    const Job& job = jobs_.at(a.job).job;
    const char* why =
        job.attempt == 0 && job.created_at == now ? "placed at submission" : "placed from the queue";
    if (Status s = StartAttempt(a.job, std::move(a.placement), why, resume(a.job), now, batch); s.ok())
      started.push_back(a.job);
    else
      spdlog::error("starting {} failed: {}", a.job, s.message());
  }
  return started;
}

Status JobBook::End(const std::string& job, JobState state, const std::string& reason, Time now,
                    WriteBatch* batch) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return NotFound("no job " + job);
  if (IsTerminal(it->second.job.state))
    return Conflict("job " + job + " is already " + ToString(it->second.job.state));
  EndAttempt(job, now, batch);
  SetState(job, state, reason, now, batch);
  return Status::Ok();
}

bool JobBook::OnRankExitedOk(const RankRef& rank, Time now, WriteBatch* batch, const char* reason) {
  auto it = jobs_.find(rank.job);
  if (it == jobs_.end()) return false;
  JobEntry& e = it->second;
  if (!IsActive(e.job.state) || !e.attempt || e.attempt->number != rank.attempt) return false;
  e.exited_ok.insert(rank.rank);
  if (static_cast<int>(e.exited_ok.size()) < e.job.plan.world_size()) return false;
  EndAttempt(rank.job, now, batch);
  SetState(rank.job, JobState::kSucceeded, reason, now, batch);
  spdlog::info("job {} succeeded", rank.job);
  return true;
}

void JobBook::Restore(JobEntry entry) {
  next_seq_ = std::max(next_seq_, entry.job.seq + 1);
  std::string id = entry.job.id;
  if (!entry.job.spec.external_id.empty()) by_external_id_[entry.job.spec.external_id].insert(id);
  if (auto old = jobs_.find(id); old != jobs_.end()) queued_.erase({old->second.job.seq, id});
  Track(entry);
  jobs_[id] = std::move(entry);
}

Status JobBook::RestoreAttempt(Attempt a) {
  JobEntry& e = jobs_.at(a.job);
  const Plan& p = e.job.plan;
  for (RankSlot& r : a.placement.ranks) SetRankCoords(p, &r);
  if (e.job.state == JobState::kRecovering) {  // a restart was waiting for its backoff: place it anew
    e.job.state = JobState::kQueued;
    e.job.reason = "restart pending when the daemon restarted";
    Track(e);
  }
  if (IsActive(e.job.state)) {
    if (Status s = inventory_->Allocate(a.job, a.placement); !s.ok())
      return Internal("recovering placement of " + a.job + ": " + s.message());
  }
  e.attempt_size = SizeOf(a, e.job);
  e.attempt = std::move(a);
  return Status::Ok();
}

void JobBook::RestoreEarlier(const std::string& job, std::vector<PastAttempt> earlier) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (PastAttempt& p : earlier)
    if (p.size.gpus == 0) p.size = SizeOf(p.attempt, it->second.job);
  std::sort(earlier.begin(), earlier.end(),
            [](const PastAttempt& x, const PastAttempt& y) { return x.attempt.number < y.attempt.number; });
  it->second.earlier = std::move(earlier);
}

const JobEntry* JobBook::Find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobEntry* JobBook::FindExternal(const std::string& external_id) const {
  // Submit keeps at most one of them not ended; the others ended (a few per id at most).
  for (const std::string& id : WithExternalId(external_id))
    if (const JobEntry* e = Find(id); !IsTerminal(e->job.state)) return e;
  return nullptr;
}

const std::set<std::string>& JobBook::WithExternalId(const std::string& external_id) const {
  static const std::set<std::string> kNone;
  auto it = by_external_id_.find(external_id);
  return it == by_external_id_.end() ? kNone : it->second;
}

JobEntry* JobBook::Mutable(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

}  // namespace shepherd
