// Controller::CheckLaunches: attempts our agents did not start within policy.launch_timeout_s.
#include <spdlog/spdlog.h>

#include "control/controller.h"

namespace shepherd {
namespace {

std::string Join(const std::vector<std::string>& v, size_t max = 8) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < max; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > max) out += " and " + std::to_string(v.size() - max) + " more";
  return out;
}

}  // namespace

void Controller::CheckLaunches(Time now, WriteBatch* batch) {
  std::vector<std::string> stuck;
  for (const auto& [id, e] : jobs_.all()) {
    if (e.job.state != JobState::kLaunching || e.job.spec.command.empty() || ViaSlurm(e.job)) continue;
    auto h = health_.find(id);
    if (h == health_.end() || h->second->unlaunched_nodes().empty()) continue;
    const Duration timeout = Seconds(e.job.spec.policy.launch_timeout_s);
    if (now - h->second->attempt_started_at() < timeout) continue;
    auto checked = launch_checked_at_.find(id);
    if (checked != launch_checked_at_.end() && now - checked->second < timeout) continue;
    stuck.push_back(id);
  }
  for (const std::string& id : stuck) {
    launch_checked_at_[id] = now;
    const JobEntry& e = *jobs_.Find(id);
    JobHealth& health = HealthOf(id);
    std::vector<std::string> waiting = health.unlaunched_nodes();
    // Nodes where nothing can start ranks: no agent ever attached, or it is lost.
    PlaceOptions o;
    o.attempt = e.job.attempt + 1;
    o.dp_edge_bytes = e.estimate.comm.dp;
    o.pp_edge_bytes = e.estimate.comm.pp;
    for (const Node* n : inventory_.cluster().nodes())
      if (!agents_.Live(n->id)) o.exclude_nodes.insert(n->id);
    for (const std::string& n : waiting) o.exclude_nodes.insert(n);  // alive, yet did not start them
    o.release_job = id;                                              // as if this attempt's GPUs were free
    Result<Placement> p = Place(inventory_.cluster(), e.job.plan, o);
    const std::string what = "no agent started ranks on " + Join(waiting) + " within " +
                             std::to_string(static_cast<int>(e.job.spec.policy.launch_timeout_s)) + " s";
    if (!p.ok()) {
      std::string reason = "waiting for agents: " + what +
                           "; the job does not fit on nodes with live agents (" + p.status().message() + ")";
      if (e.job.reason != reason) jobs_.SetState(id, JobState::kLaunching, reason, now, batch);
      continue;
    }
    std::optional<Checkpoint> resume;
    if (!e.attempt->resume_checkpoint.empty()) resume = health.ledger().Find(e.attempt->resume_checkpoint);
    spdlog::warn("job {}: {}; re-placing onto nodes with live agents", id, what);
    jobs_.EndAttempt(id, now, batch);
    if (!jobs_
             .StartAttempt(id, std::move(p).value(),
                           "launch timeout: " + what + "; re-placed onto nodes with live agents", resume, now,
                           batch)
             .ok())
      jobs_.SetState(id, JobState::kQueued, "re-placing after a launch timeout", now, batch);
    launch_checked_at_.erase(id);
  }
  Settle(now, batch);
}

}  // namespace shepherd
