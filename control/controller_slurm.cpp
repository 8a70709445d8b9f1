// Controller: the Slurm inventory sync (control/slurm_sync.h). Called on the control thread with what the
// daemon's Slurm worker read; the worker runs the commands returned and reports their outcomes.
#include "control/controller.h"
#include "slurm/node_state.h"

namespace shepherd {

void Controller::SyncSlurm(const slurm::SlurmView& view, Done<std::vector<SlurmNodeCommand>> done) {
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
  std::vector<SlurmNodeCommand> commands = slurm_sync_.Apply(view, now, &batch);
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
