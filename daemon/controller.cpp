// Controller: construction, recovery, persistence and views. Node and job operations are in
// controller_nodes.cpp and controller_jobs.cpp.
#include "daemon/controller.h"

#include <spdlog/spdlog.h>

#include <cstdio>

namespace shepherd {

Controller::Controller(Store* store, const Clock* clock, Post post, ControllerOptions options)
    : store_(store),
      clock_(clock),
      post_(std::move(post)),
      options_(std::move(options)),
      cluster_(options_.levels) {}

Controller::~Controller() = default;

Record Controller::NodeRecord(const Node& n) const {
  return {Collection::kNodes, n.id, "", ToJson(n).dump()};
}
Record Controller::JobRecord(const Job& j) const {
  return {Collection::kJobs, j.id, j.id, ToJson(j).dump()};
}
Record Controller::AttemptRecord(const Attempt& a) const {
  return {Collection::kAttempts, a.job + "/" + std::to_string(a.number), a.job, ToJson(a).dump()};
}

Status Controller::Recover() {
  auto snap = store_->Load();
  if (!snap.ok()) return snap.status();
  std::map<std::string, Attempt> last_attempt;
  std::map<std::string, std::vector<std::pair<int, int64_t>>> resumes;  // job -> (attempt, resume step)
  std::map<std::string, std::vector<Checkpoint>> checkpoints;
  for (const Record& r : snap->records) {
    Result<Json> j = ParseJsonText(r.body, 256);
    if (!j.ok())
      return Internal("stored " + std::string(ToString(r.collection)) + " " + r.key + " is not JSON");
    switch (r.collection) {
      case Collection::kNodes: {
        Node n;
        Json desc = *j;
        for (const char* k : {"failed", "reason", "agent_attached", "created_at", "updated_at"})
          desc.erase(k);
        auto parsed = ParseNode(desc, options_.levels);
        if (!parsed.ok()) return Internal("stored node " + r.key + ": " + parsed.status().message());
        n = std::move(parsed).value();
        n.failed = j->value("failed", false);
        n.reason = j->value("reason", "");
        n.created_at = ParseRfc3339(j->value("created_at", "")).value_or(Time{});
        n.updated_at = ParseRfc3339(j->value("updated_at", "")).value_or(Time{});
        if (Status s = cluster_.UpsertNode(n); !s.ok()) return s;
        break;
      }
      case Collection::kJobs: {
        auto job = JobFromJson(*j);
        if (!job.ok()) return job.status();
        JobEntry e;
        e.job = std::move(job).value();
        auto est = EvaluatePlan(e.job.spec, e.job.plan, HardwareFor(e.job.spec));
        if (est.ok()) e.estimate = *est;
        e.estimate.plan = e.job.plan;
        next_job_seq_ = std::max(next_job_seq_, e.job.seq + 1);
        jobs_[e.job.id] = std::move(e);
        break;
      }
      case Collection::kAttempts: {
        auto a = AttemptFromJson(*j);
        if (!a.ok()) return a.status();
        resumes[a->job].emplace_back(a->number, a->resume_step);
        auto& slot = last_attempt[a->job];
        if (a->number >= slot.number) slot = std::move(a).value();
        break;
      }
      case Collection::kCheckpoints: {
        auto c = CheckpointFromJson(*j);
        if (!c.ok()) return c.status();
        checkpoints[c->job].push_back(std::move(c).value());
        break;
      }
      case Collection::kFindings: {
        auto f = FindingFromJson(*j);
        if (!f.ok()) return f.status();
        ++finding_counts_[f->kind];
        long long seq = 0;
        if (std::sscanf(f->id.c_str(), "f-%lld", &seq) == 1)
          next_finding_seq_ = std::max<int64_t>(next_finding_seq_, seq + 1);
        findings_.push_back(std::move(f).value());
        break;
      }
      default:
        break;
    }
  }
  Time now = clock_->Now();
  for (auto& [job_id, a] : last_attempt) {
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) continue;
    JobEntry& e = it->second;
    const Plan& p = e.job.plan;
    for (RankSlot& r : a.placement.ranks) {  // coordinates from rank = tp + TP·(dp + DP·pp)
      r.tp = r.rank % p.tp;
      r.dp = (r.rank / p.tp) % p.dp;
      r.pp = r.rank / (p.tp * p.dp);
    }
    if (e.job.state == JobState::kRecovering) {  // a restart was waiting for its backoff: place it anew
      e.job.state = JobState::kQueued;
      e.job.reason = "restart pending when the daemon restarted";
    }
    if (e.job.state == JobState::kRunning) {
      if (Status s = cluster_.Allocate(job_id, a.placement); !s.ok())
        return Internal("recovering placement of " + job_id + ": " + s.message());
    }
    e.attempt = std::move(a);
    CheckpointLedger& ledger = Ledger(e);
    ledger.Restore(checkpoints[job_id]);
    auto& rs = resumes[job_id];
    std::sort(rs.begin(), rs.end());
    for (auto [number, step] : rs)
      if (number != e.attempt->number) ledger.OnAttemptStart(number, step);
    // Grace counts from recovery: the ranks' last-seen times were not persisted.
    if (e.job.state == JobState::kRunning)
      StartMonitor(e, now);
    else
      ledger.OnAttemptStart(e.attempt->number, e.attempt->resume_step);
  }
  for (const Node* n : cluster_.nodes())
    if (n->agent_attached) agents_[n->id].last_heartbeat = now;  // grace: liveness was not persisted
  spdlog::info("recovered {} nodes and {} jobs", cluster_.size(), jobs_.size());
  ready_ = true;
  ScheduleAndCommit();
  return Status::Ok();
}

Status Controller::CheckWritable() const {
  if (storage_failed_) return Unavailable("storage failed; the daemon is shutting down");
  if (!ready_) return Unavailable("state is not recovered yet");
  return Status::Ok();
}

void Controller::Commit(WriteBatch batch, std::function<void(Status)> done) {
  if (batch.empty()) {
    post_([done = std::move(done)] { done(Status::Ok()); });
    return;
  }
  store_->Write(std::move(batch), [this, done = std::move(done)](Status s) mutable {
    post_([this, s = std::move(s), done = std::move(done)] {
      if (!s.ok()) OnStorageFailure(s);
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

Json Controller::NodeJson(const Node& n) const {
  Json j = ToJson(n);
  int allocated = cluster_.AllocatedGpus(n.id);
  j["state"] = ToString(StateOf(n, allocated));
  j["allocated_gpus"] = allocated;
  j["jobs"] = cluster_.JobsOn(n.id);
  return j;
}

Json Controller::JobJson(const JobEntry& e) const {
  Json j = ToJson(e.job);  // the stored record, plus what the API shows besides
  j.erase("seq");
  j["name"] = e.job.spec.name;
  j["estimate"] = ToJson(e.estimate);
  if (e.attempt) {
    j["current_attempt"] = {{"number", e.attempt->number},
                            {"started_at", FormatRfc3339(e.attempt->started_at)},
                            {"reason", e.attempt->reason},
                            {"resume_checkpoint", e.attempt->resume_checkpoint},
                            {"resume_step", e.attempt->resume_step}};
    if (e.attempt->ended_at) j["current_attempt"]["ended_at"] = FormatRfc3339(*e.attempt->ended_at);
  }
  return j;
}

}  // namespace shepherd
