// Controller::Recover: rebuilds every owner from the durable records at start-up.
#include <spdlog/spdlog.h>

#include "control/controller.h"
#include "control/launch/launcher.h"
#include "control/records.h"

namespace shepherd {
namespace {

Result<Node> StoredNode(const Json& j, const TopologyLevels& levels) {
  Json desc = j;
  for (const char* k : {"failed", "reason", "cordon", "agent_attached", "created_at", "updated_at"})
    desc.erase(k);
  auto parsed = ParseNode(desc, levels);
  if (!parsed.ok()) return parsed.status();
  Node n = std::move(parsed).value();
  n.failed = j.value("failed", false);
  n.reason = j.value("reason", "");
  n.agent_attached = j.value("agent_attached", false);
  if (j.contains("cordon") && j["cordon"].is_object()) {
    n.cordon_source = j["cordon"].value("source", "");
    n.drain = !n.schedulable && j["cordon"].value("drain", false);
    if (j["cordon"].contains("at") && j["cordon"]["at"].is_string())
      n.cordoned_at = ParseRfc3339(j["cordon"]["at"].get<std::string>());
  }
  n.created_at = ParseRfc3339(j.value("created_at", "")).value_or(Time{});
  n.updated_at = ParseRfc3339(j.value("updated_at", "")).value_or(Time{});
  return n;
}

}  // namespace

Status Controller::Recover(bool salvage) {
  control_thread_.Assert();
  auto snap = store_->Load();
  if (!snap.ok()) return snap.status();
  std::map<std::string, Attempt> last_attempt;
  // Attempts before each job's last, for goodput accounting: kept without their placements' ranks.
  std::map<std::string, std::vector<PastAttempt>> earlier;
  auto keep_earlier = [&](Attempt a) {
    PastAttempt p;
    if (!a.placement.ranks.empty()) p.size = SizeOf(a, Job{});  // else from the job's plan, once known
    a.placement.ranks.clear();
    a.placement.ranks.shrink_to_fit();
    p.attempt = std::move(a);
    earlier[p.attempt.job].push_back(std::move(p));
  };
  std::map<std::string, std::vector<std::pair<int, int64_t>>> resumes;  // job -> (attempt, resume step)
  std::map<std::string, std::vector<Checkpoint>> checkpoints;
  std::map<std::string, std::vector<CheckpointPart>> parts;
  std::vector<RankTokens::Stored> rank_tokens;
  int64_t epoch = 0;
  double granted_lease_s = 0;  // the lease the previous run granted
  // One record into memory; an error means it cannot be decoded.
  auto decode = [&](const Record& r) REQUIRES(kControl) -> Status {
    Result<Json> j = ParseJsonText(r.body, kLargeJsonLimits);
    if (!j.ok()) return InvalidArgument("not JSON");
    switch (r.collection) {
      case Collection::kNodes: {
        auto n = StoredNode(*j, options_.levels);
        if (!n.ok()) return n.status();
        return inventory_.Restore(*n);
      }
      case Collection::kJobs: {
        auto job = JobFromJson(*j);
        if (!job.ok()) return job.status();
        JobEntry e;
        e.job = std::move(job).value();
        Hardware hw = jobs_.HardwareFor(e.job.spec);
        if (auto p = j->find("planned_for"); p != j->end() && p->is_object()) {  // absent in older records
          auto m = p->find("gpu_memory_bytes"), d = p->find("nvlink_domain_gpus");
          if (m != p->end() && m->is_number() && *m > 0) hw.gpu_memory_bytes = *m;
          if (d != p->end() && d->is_number_integer() && *d > 0) hw.nvlink_domain_gpus = *d;
        }
        auto est = EvaluatePlan(e.job.spec, e.job.plan, hw);
        if (est.ok()) e.estimate = *est;
        e.estimate.plan = e.job.plan;
        if (auto x = j->find("plan_explanation"); x != j->end() && x->is_string() && !x->empty())
          e.estimate.explanation = *x;
        jobs_.Restore(std::move(e));
        return Status::Ok();
      }
      case Collection::kAttempts: {
        auto a = AttemptFromJson(*j);
        if (!a.ok()) return a.status();
        resumes[a->job].emplace_back(a->number, a->resume_step);
        auto& slot = last_attempt[a->job];
        if (a->number >= slot.number) {
          if (slot.number > 0) keep_earlier(std::move(slot));
          slot = std::move(a).value();
        } else {
          keep_earlier(std::move(a).value());
        }
        return Status::Ok();
      }
      case Collection::kCheckpoints: {
        auto c = CheckpointFromJson(*j);
        if (!c.ok()) return c.status();
        checkpoints[c->job].push_back(std::move(c).value());
        return Status::Ok();
      }
      case Collection::kFindings: {
        auto f = FindingFromJson(*j);
        if (!f.ok()) return f.status();
        findings_.Add(std::move(f).value());
        return Status::Ok();
      }
      case Collection::kMeta:
        if (r.key == "epoch") {
          if (!j->is_object() || !j->contains("epoch") || !(*j)["epoch"].is_number_integer())
            return InvalidArgument("no integer epoch");
          epoch = (*j)["epoch"].get<int64_t>();
          if (auto l = j->find("agent_lease_s"); l != j->end() && l->is_number() && *l > 0)  // absent before
            granted_lease_s = l->get<double>();
        } else if (Result<bool> event = events_.Restore(r); !event.ok()) {
          return event.status();
        } else if (*event) {
        } else if (auto part = DecodeCheckpointPart(r)) {
          if (!part->ok()) return part->status();
          parts[(*part)->job].push_back(**part);
        } else if (Result<bool> mine = slurm_.Restore(r); !mine.ok()) {
          return mine.status();
        } else if (*mine) {
        } else if (auto t = RankTokens::Decode(r)) {
          rank_tokens.push_back(std::move(*t));
        }
        return Status::Ok();
    }
    return Status::Ok();
  };
  for (const Record& r : snap->records) {
    Status s = decode(r);
    if (s.ok()) continue;
    std::string why = s.message();
    for (const FieldError& e : s.fields()) why += "; " + e.field + ": " + e.message;
    const std::string what = std::string("record ") + ToString(r.collection) + "/" + r.key;
    if (!salvage)
      return Internal(
          what + " cannot be decoded (" + why +
          "); start with --salvage to move it aside (table records_quarantine) and start without it");
    if (Status moved = store_->Quarantine(r, why); !moved.ok()) return moved;
    spdlog::error("{} cannot be decoded ({}): moved aside into records_quarantine", what, why);
  }
  events_.Restored();
  Time now = clock_->Now();
  lateness_.Restart(now);  // nothing was heard before: no silence verdict for a full window
  for (auto& [job, list] : earlier) jobs_.RestoreEarlier(job, std::move(list));
  for (auto& [job, a] : last_attempt) {
    if (!jobs_.Find(job)) continue;
    if (Status s = jobs_.RestoreAttempt(std::move(a)); !s.ok()) return s;
    const JobEntry& e = *jobs_.Find(job);
    JobHealth& health = HealthSlot(job);
    health.Restore(checkpoints[job], resumes[job], parts[job]);
    // A running attempt is re-armed now (grace counts from recovery: last-seen times were not persisted);
    // a launching one waits for its launch again.
    if (e.job.state == JobState::kRunning)
      health.OnAttemptStart(e.job, *e.attempt, JobHealth::Launch::kRecovered, now);
    else if (e.job.state == JobState::kLaunching)
      health.OnAttemptStart(e.job, *e.attempt, LauncherFor(e.job).Arming(), now);
  }
  BaselineEvents();
  // Ranks keep their credentials across a restart, as long as their attempt (or job, for another
  // launcher's) is still live; the rest are revoked.
  OpScope op = Begin(now);
  WriteBatch& batch = op->batch;
  for (RankTokens::Stored& t : rank_tokens) {
    const RankGrant grant = t.grant;
    const JobEntry* e = jobs_.Find(grant.job);
    const bool live = e && !IsTerminal(e->job.state) && (!grant.attempt || *grant.attempt == e->job.attempt);
    rank_tokens_.Restore(std::move(t));
    if (!live) rank_tokens_.Revoke(grant.job, grant.attempt, &batch);
  }
  for (const Node* n : inventory_.cluster().nodes())
    if (n->agent_attached) agents_.Restore(n->id, now, granted_lease_s);  // liveness was not persisted
  spdlog::info("recovered {} nodes and {} jobs", inventory_.cluster().size(), jobs_.all().size());
  ready_ = true;
  agents_.SetEpoch(epoch + 1);
  batch.Put(EpochRecord(epoch + 1, options_.agent_lease_s));
  Schedule(now, &batch);
  Commit([this](Status s) REQUIRES(kControl) { epoch_saved_ = s.ok(); });
  return Status::Ok();
}

}  // namespace shepherd
