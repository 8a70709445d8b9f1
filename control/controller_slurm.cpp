// Controller: the Slurm inventory sync (control/slurm_sync.h). Called on the control thread with what the
// daemon's Slurm worker read; the worker runs the commands returned and reports their outcomes.
#include "control/controller.h"

namespace shepherd {

void Controller::SyncSlurm(const slurm::SlurmView& view, Done<std::vector<SlurmNodeCommand>> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  Time now = clock_->Now();
  WriteBatch batch;
  std::set<std::string> failed_before;
  for (const Node* n : inventory_.cluster().nodes())
    if (n->failed) failed_before.insert(n->id);
  std::vector<SlurmNodeCommand> commands = slurm_sync_.Apply(view, now, &batch);
  // Slurm's verdict on a node (down, not responding) is evidence for the jobs Shepherd runs there via Slurm.
  std::vector<std::string> failed_now;
  for (const Node* n : inventory_.cluster().nodes())
    if (n->failed && !failed_before.count(n->id)) failed_now.push_back(n->id);
  OnSlurmNodesFailed(failed_now, now, &batch);
  Schedule(now, &batch);
  CommitThen<std::vector<SlurmNodeCommand>>(std::move(batch), std::move(done),
                                            [commands = std::move(commands)] { return commands; });
}

void Controller::SlurmCommandsDone(const std::vector<SlurmCommandResult>& results) {
  if (!CheckWritable().ok()) return;
  WriteBatch batch;
  slurm_sync_.OnCommandsDone(results, &batch);
  if (!batch.empty()) Commit(std::move(batch), [](Status) {});
}

}  // namespace shepherd
