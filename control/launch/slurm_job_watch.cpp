#include "control/launch/slurm_job_watch.h"

#include <spdlog/spdlog.h>

namespace shepherd {
namespace {

// Slurm's word for how the job ended; unknown words (kOther) are not taken as an end.
bool IsEnd(slurm::SlurmJobState s) {
  return !slurm::IsActive(s) && s != slurm::SlurmJobState::kOther;
}

JobState ShepherdStateOf(slurm::SlurmJobState s) {
  switch (s) {
    case slurm::SlurmJobState::kCompleted:
      return JobState::kSucceeded;
    case slurm::SlurmJobState::kCancelled:
      return JobState::kCancelled;
    default:
      return JobState::kFailed;
  }
}

}  // namespace

std::vector<WatchedSlurmJob> SlurmJobWatch::ToRead(const JobBook& jobs) {
  std::vector<WatchedSlurmJob> out;
  for (const auto& [id, e] : jobs.all())
    if (e.job.spec.launch_mode == LaunchMode::kExternal && !e.job.spec.external_id.empty() &&
        !IsTerminal(e.job.state))
      out.push_back({id, e.job.spec.external_id});
  return out;
}

SlurmJobWatch::Observation SlurmJobWatch::Observe(const std::vector<SlurmJobSighting>& sightings) {
  std::set<std::string> read;
  for (const SlurmJobSighting& s : sightings) read.insert(s.watched.job);
  std::erase_if(last_, [&](const auto& kv) { return !read.contains(kv.first); });
  std::erase_if(unknown_, [&](const std::string& job) { return !read.contains(job); });
  std::erase_if(forgotten_, [&](const std::string& job) { return !read.contains(job); });
  std::erase_if(nodes_, [&](const auto& kv) { return !read.contains(kv.first); });
  Observation out;
  for (const SlurmJobSighting& s : sightings) {
    const std::string& job = s.watched.job;
    const std::string& slurm_job = s.watched.external_id;
    auto last = last_.find(job);
    if (!s.record.ok()) {
      if (s.record.status().code() != Code::kNotFound) continue;  // Slurm did not answer: no evidence
      if (last != last_.end()) {
        if (forgotten_.insert(job).second) {  // the first read that does not find it
          out.hold[job] = true;
          continue;
        }
        out.ended.push_back({job, JobState::kFailed,
                             "slurm job " + slurm_job + " has ended: Slurm no longer knows it (last seen " +
                                 slurm::ToString(last->second) + "; how it ended was not seen)"});
        last_.erase(last);
        forgotten_.erase(job);
      } else if (unknown_.insert(job).second) {
        spdlog::warn("job {}: Slurm does not know job {}; it is not followed until Slurm shows it", job,
                     slurm_job);
      }
      continue;
    }
    const slurm::SlurmJob& r = *s.record;
    unknown_.erase(job);
    forgotten_.erase(job);
    const bool again = last != last_.end() && last->second == r.state;
    last_[job] = r.state;
    if (!r.nodes.empty()) nodes_[job] = std::set<std::string>(r.nodes.begin(), r.nodes.end());
    out.hold[job] = r.state == slurm::SlurmJobState::kSuspended || IsEnd(r.state);
    if (!IsEnd(r.state) || !again) continue;
    std::string reason = "slurm job " + slurm_job + " is " + r.state_text;
    if (!r.exit_code.empty()) reason += " (exit code " + r.exit_code + ")";
    out.ended.push_back({job, ShepherdStateOf(r.state), std::move(reason)});
    last_.erase(job);
  }
  return out;
}

std::optional<std::set<std::string>> SlurmJobWatch::NodesOf(const std::string& job) const {
  auto it = nodes_.find(job);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

}  // namespace shepherd
