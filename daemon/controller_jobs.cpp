// Controller: planning, admission, the queue and job lifecycle.
#include <spdlog/spdlog.h>

#include <cstdio>

#include "daemon/controller.h"
#include "scheduler/placement.h"
#include "scheduler/queue.h"

namespace shepherd {

Hardware Controller::HardwareFor(const JobSpec& spec) const {
  double gib = options_.default_gpu_memory_gib;
  int domain_gpus = 0;
  std::map<std::string, int> domains;
  bool any = false;
  for (const Node* n : cluster_.nodes()) {
    if (!IsUsable(*n)) continue;
    gib = any ? std::min(gib, n->gpu_memory_gib) : n->gpu_memory_gib;
    any = true;
    domains[n->nvlink_domain] += n->gpus;
  }
  for (const auto& [name, gpus] : domains) domain_gpus = domain_gpus ? std::min(domain_gpus, gpus) : gpus;
  Hardware hw = HardwareForResources(spec.resources, gib);
  if (!spec.resources.gpu_memory_gib && domain_gpus > 0) hw.nvlink_domain_gpus = domain_gpus;
  return hw;
}

Result<PlanEstimate> Controller::PlanFor(const JobSpec& spec) const {
  return PlanJob(spec, HardwareFor(spec));
}

void Controller::SubmitJob(JobSpec spec, PlanEstimate estimate, Done<Json> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  int64_t gpus = estimate.plan.world_size();
  if (gpus > cluster_.UsableGpus())
    return done(InvalidContent("the job is larger than the usable inventory",
                               {{"resources.gpus", "needs " + std::to_string(gpus) +
                                                       " GPUs; the usable (non-spare, schedulable) "
                                                       "inventory has " +
                                                       std::to_string(cluster_.UsableGpus())}}));
  Time now = clock_->Now();
  JobEntry e;
  e.job.seq = next_job_seq_++;
  char id[32];
  std::snprintf(id, sizeof id, "job-%06lld", static_cast<long long>(e.job.seq));
  e.job.id = id;
  e.job.spec = std::move(spec);
  e.job.plan = estimate.plan;
  e.job.state = JobState::kQueued;
  e.job.reason = "waiting for capacity";
  e.job.created_at = e.job.updated_at = now;
  e.estimate = std::move(estimate);
  std::string job_id = e.job.id;
  jobs_[job_id] = std::move(e);
  WriteBatch batch;
  batch.Put(JobRecord(jobs_[job_id].job));
  ScheduleQueued(&batch);
  Commit(std::move(batch), [this, job_id, done = std::move(done)](Status s) {
    if (!s.ok()) return done(s);
    done(JobJson(jobs_.at(job_id)));
  });
}

Status Controller::StartAttempt(JobEntry& e, Placement placement, const std::string& reason,
                                WriteBatch* batch, std::optional<Checkpoint> resume) {
  Attempt a;
  a.job = e.job.id;
  a.number = e.job.attempt + 1;
  a.started_at = clock_->Now();
  a.reason = reason;
  if (!resume && e.ledger)
    resume = e.ledger->LastKnownGood() ? e.ledger->LastKnownGood() : e.ledger->Latest();
  if (resume) {
    a.resume_checkpoint = resume->id;
    a.resume_step = resume->step;
  }
  placement.attempt = a.number;
  a.placement = std::move(placement);
  if (Status s = cluster_.Allocate(e.job.id, a.placement); !s.ok()) return s;
  e.job.attempt = a.number;
  e.job.state = JobState::kRunning;
  e.job.reason.clear();
  e.job.updated_at = a.started_at;
  batch->Put(JobRecord(e.job));
  batch->Put(AttemptRecord(a));
  spdlog::info("job {} attempt {} started on {} ranks ({})", e.job.id, a.number, a.placement.ranks.size(),
               reason);
  e.attempt = std::move(a);
  e.exited_ok.clear();
  // A restart waits until the older attempt's ranks are stopped (CheckAgents opens the gate).
  e.launched = e.attempt->number == 1;
  e.launch_deadline = e.attempt->started_at + Seconds(options_.stop_timeout_s);
  if (e.launched) BumpAssignments(e.attempt->placement);
  StartMonitor(e, e.attempt->started_at);
  return Status::Ok();
}

void Controller::ScheduleQueued(WriteBatch* batch) {
  std::vector<QueuedJob> queue;
  for (const auto& [id, e] : jobs_)
    if (e.job.state == JobState::kQueued) {
      PlaceOptions o;
      o.attempt = e.job.attempt + 1;
      o.dp_edge_bytes = e.estimate.comm.dp;
      o.pp_edge_bytes = e.estimate.comm.pp;
      queue.push_back({id, e.job.plan, o});
    }
  std::sort(queue.begin(), queue.end(), [&](const QueuedJob& a, const QueuedJob& b) {
    return jobs_[a.id].job.seq < jobs_[b.id].job.seq;
  });
  for (Admission& a : AdmitFromQueue(cluster_, queue))
    if (Status s = StartAttempt(jobs_[a.job], std::move(a.placement), "placed from the queue", batch);
        !s.ok())
      spdlog::error("starting {} failed: {}", a.job, s.message());  // AdmitFromQueue placed it on free GPUs
}

void Controller::ScheduleAndCommit() {
  if (!CheckWritable().ok()) return;
  WriteBatch batch;
  ScheduleQueued(&batch);
  if (!batch.empty()) Commit(std::move(batch), [](Status) {});
}

void Controller::CancelJob(const std::string& id, Done<Json> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return done(NotFound("no job " + id));
  JobEntry& e = it->second;
  if (IsTerminal(e.job.state)) return done(Conflict("job " + id + " is already " + ToString(e.job.state)));
  Time now = clock_->Now();
  WriteBatch batch;
  EndAttempt(e, now, &batch);  // agents stop its ranks
  e.pending_restart.reset();
  e.job.state = JobState::kCancelled;
  e.job.reason = "cancelled by user";
  e.job.updated_at = now;
  sdc_history_.Forget(id);
  batch.Put(JobRecord(e.job));
  ScheduleQueued(&batch);
  Commit(std::move(batch), [this, id, done = std::move(done)](Status s) {
    if (!s.ok()) return done(s);
    done(JobJson(jobs_.at(id)));
  });
}

Result<Json> Controller::GetJob(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + id);
  return JobJson(it->second);
}

Json Controller::ListJobs(std::optional<JobState> state) const {
  Json items = Json::array();
  for (const auto& [id, e] : jobs_)
    if (!state || e.job.state == *state) items.push_back(JobJson(e));
  return {{"jobs", items}};
}

Result<std::string> Controller::GetPlacement(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + id);
  const JobEntry& e = it->second;
  if (!e.attempt) return Conflict("job " + id + " is " + ToString(e.job.state) + " and has no placement yet");
  Json quality = nullptr;
  if (cluster_.Holds(id)) {
    PlacementQuality q =
        EvaluatePlacement(cluster_, e.job.plan, e.attempt->placement, e.estimate.comm.dp, e.estimate.comm.pp);
    quality = {{"tp_groups_split", q.tp_groups_split},
               {"cross_leaf_edges", q.cross_leaf_edges},
               {"cross_spine_edges", q.cross_spine_edges},
               {"cross_leaf_bytes_per_step", q.cross_leaf_bytes_per_step},
               {"cross_spine_bytes_per_step", q.cross_spine_bytes_per_step}};
  }
  // Written directly, not through a JSON tree: a 131,072-rank tree costs ~90 MB of heap that the
  // allocator keeps; the text is ~9 MB. Node ids are validated ([A-Za-z0-9._-]) and need no escaping.
  std::string out = "{\"attempt\":" + std::to_string(e.attempt->number) + ",\"state\":\"" +
                    ToString(e.job.state) + "\",\"quality\":" + quality.dump() + ",\"ranks\":[";
  out.reserve(out.size() + e.attempt->placement.ranks.size() * 72);
  for (const RankSlot& r : e.attempt->placement.ranks) {
    if (out.back() != '[') out += ',';
    out += "{\"rank\":" + std::to_string(r.rank) + ",\"node\":\"" + r.node +
           "\",\"gpu\":" + std::to_string(r.gpu) + ",\"tp\":" + std::to_string(r.tp) +
           ",\"pp\":" + std::to_string(r.pp) + ",\"dp\":" + std::to_string(r.dp) + "}";
  }
  out += "]}";
  return out;
}

}  // namespace shepherd
