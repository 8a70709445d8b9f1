// Controller: the Slurm inventory sync (control/launch/slurm_node_sync.h), the watched jobs' ends (control/launch/slurm_job_watch.h)
// and the outcomes of requeues. Called on the control thread with what the daemon's Slurm worker read; the
// worker runs the commands returned, reads the watched jobs and reports back.
#include <spdlog/spdlog.h>

#include "control/controller.h"
#include "control/records.h"
#include "slurm/node_state.h"

namespace shepherd {

void Controller::SyncSlurm(const slurm::SlurmView& view, Done<SlurmWork> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  Time now = clock_->Now();
  WriteBatch batch;
  // Slurm's verdict on a node (down, not responding) is evidence for the jobs Shepherd runs there through
  // Slurm. Recorded before the sync applies it, so the node fails by that finding (and is drained in Slurm
  // naming it), not as Slurm's own state.
  std::vector<std::pair<std::string, std::string>> down;  // node, Slurm's state
  for (const slurm::SlurmNode& s : view.nodes)
    if (const Node* n = inventory_.Find(s.name);
        n && !n->failed && slurm::ShepherdStateOf(s.state) == NodeState::kFailed)
      down.emplace_back(s.name, s.state_text);
  OnSlurmNodesFailed(down, now, &batch);
  SlurmWork work{slurm_sync_.Apply(view, now, &batch), SlurmJobWatch::ToRead(jobs_)};
  Schedule(now, &batch);
  CommitThen<SlurmWork>(std::move(batch), std::move(done), [work = std::move(work)] { return work; });
}

void Controller::SlurmCycleDone(const std::vector<SlurmCommandResult>& results,
                                const std::vector<SlurmJobSighting>& sightings) {
  if (!CheckWritable().ok()) return;
  Time now = clock_->Now();
  WriteBatch batch;
  slurm_sync_.OnCommandsDone(results, &batch);
  bool ended = false;
  SlurmJobWatch::Observation seen = slurm_watch_.Observe(sightings);
  for (const auto& [job, hold] : seen.hold) {
    // Slurm suspended or is ending the job: its ranks' silence is Slurm's doing (a scancel was recorded as
    // heartbeat_lost before the second read ended the job). Judged again from when it runs again.
    auto h = health_.find(job);
    if (h == health_.end() || h->second->suspended() == hold) continue;
    if (hold)
      h->second->Suspend();
    else
      h->second->Resume(now);
  }
  for (const SlurmJobWatch::Ended& end : seen.ended) {
    const JobEntry* e = jobs_.Find(end.job);
    if (!e || IsTerminal(e->job.state)) continue;  // cancelled while Slurm was being read
    spdlog::info("job {} {}: {}", end.job, ToString(end.state), end.reason);
    ended = EndJob(end.job, end.state, end.reason, now, &batch).ok() || ended;
  }
  if (ended) Schedule(now, &batch);  // their slots go to the queue
  if (!batch.empty()) Commit(std::move(batch), [](Status) {});
}

void Controller::ExternalRequeueDone(const RequeueOutcome& o) {
  if (o.requeued || !CheckWritable().ok()) return;
  WriteBatch batch;
  if (Finding* f = findings_.Mutable(o.job, o.finding)) {
    f->actions.push_back("not requeued: " + o.detail);
    batch.Put(FindingRecord(*f));
  }
  // Only a requeue that happened counts against max_restarts.
  if (JobEntry* e = jobs_.Mutable(o.job); e && e->job.restarts > 0) {
    --e->job.restarts;
    jobs_.Persist(o.job, &batch);
  }
  if (!batch.empty()) Commit(std::move(batch), [](Status) {});
}

}  // namespace shepherd
