// Controller::CheckLaunches: attempts our agents did not start within policy.launch_timeout_s; PlaceAgain.
#include <spdlog/spdlog.h>

#include "control/controller.h"
#include "control/launch/launcher.h"

namespace shepherd {
namespace {

std::string Join(const std::vector<std::string>& v, size_t max = 8) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < max; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > max) out += " and " + std::to_string(v.size() - max) + " more";
  return out;
}

}  // namespace

Status Controller::PlaceAgain(const std::string& id, const std::set<std::string>& exclude,
                              const std::string& reason, Time now, WriteBatch* batch) {
  const JobEntry& e = *jobs_.Find(id);
  PlaceOptions o;
  o.attempt = e.job.attempt + 1;
  o.dp_edge_bytes = e.estimate.comm.dp;
  o.pp_edge_bytes = e.estimate.comm.pp;
  o.exclude_nodes = exclude;
  o.release_job = id;  // as if this attempt's GPUs were free
  Result<Placement> p = Place(inventory_.cluster(), e.job.plan, o);
  if (!p.ok()) return p.status();
  std::optional<Checkpoint> resume;
  if (!e.attempt->resume_checkpoint.empty())
    resume = HealthOf(id).ledger().Find(e.attempt->resume_checkpoint);
  jobs_.EndAttempt(id, now, batch);
  if (!jobs_.StartAttempt(id, std::move(p).value(), reason, resume, now, batch).ok())
    jobs_.SetState(id, JobState::kQueued, "placing again: " + reason, now, batch);
  return Status::Ok();
}

void Controller::CheckLaunches(Time now, WriteBatch* batch) {
  std::vector<std::string> stuck;
  for (const auto& [id, e] : jobs_.all()) {
    if (e.job.state != JobState::kLaunching || !LauncherFor(e.job).AgentsStartRanks()) continue;
    const JobHealth* h = FindHealth(id);
    if (!h || h->unlaunched_nodes().empty()) continue;
    const Duration timeout = Seconds(e.job.spec.policy.launch_timeout_s);
    if (now - h->attempt_started_at() < timeout) continue;
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
    std::set<std::string> exclude(waiting.begin(), waiting.end());  // alive, yet did not start them
    for (const Node* n : inventory_.cluster().nodes())
      if (!agents_.Live(n->id)) exclude.insert(n->id);
    const std::string what = "no agent started ranks on " + Join(waiting) + " within " +
                             std::to_string(static_cast<int>(e.job.spec.policy.launch_timeout_s)) + " s";
    if (Status s = PlaceAgain(
            id, exclude, "launch timeout: " + what + "; re-placed onto nodes with live agents", now, batch);
        !s.ok()) {
      std::string reason = "waiting for agents: " + what +
                           "; the job does not fit on nodes with live agents (" + s.message() + ")";
      if (e.job.reason != reason) jobs_.SetState(id, JobState::kLaunching, reason, now, batch);
      continue;
    }
    spdlog::warn("job {}: {}; re-placed onto nodes with live agents", id, what);
    ++restart_causes_[id]["launch_timeout"];
    launch_checked_at_.erase(id);
  }
}

}  // namespace shepherd
