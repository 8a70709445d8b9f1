// The daemon's Slurm worker (`--slurm`): one thread that reads the cluster (scontrol show nodes / topology)
// every reconcile interval, hands the view to the controller on the control thread (Controller::SyncSlurm),
// runs the drains and resumes it returns, reads the record of every job it watches (scontrol show job),
// and posts both back (Controller::OnSlurmReport). Between cycles it runs the requeues recovery asks for
// (external_remediation "requeue") and posts their outcomes (Controller::OnSlurmReport). Slurm's
// commands block (up to the command timeout each); none ever runs on the control thread.
// Threading: Start, Stop and Requeue from the control thread; everything else runs on the worker thread or is posted
// to the control thread (daemon/control_channel.h: a cycle whose view the control thread does not take within
// kControlAnswerTimeout is dropped, and the next reads again). One cycle at a time: the next read starts only after
// the previous cycle's commands ran, so a drain is never issued twice for one decision.
#pragma once

#include <memory>
#include <string>

#include "control/callbacks.h"
#include "control/controller.h"
#include "daemon/config.h"

namespace shepherd {

class SlurmSyncWorker {
 public:
  SlurmSyncWorker(const SlurmConfig& config, TopologyLevels levels, Controller* controller, Post post);
  ~SlurmSyncWorker();  // Stop()
  // Starts the worker; the first sync (the inventory import) begins at once.
  void Start();
  // Stops the worker and joins it (a Slurm command under way finishes first, bounded by its timeout).
  // Callbacks already posted do nothing afterwards; requeues not yet run are dropped (logged).
  void Stop();
  // The ExternalRequeue of ControllerOptions: queues `scontrol requeue <external_id>` for finding `f`, run
  // only if Slurm still shows the job RUNNING (ranks that finished go silent too, and Slurm would requeue
  // a finished batch job as readily as a hung one). Never blocks.
  // Not run when Slurm shows the job as another user's than `owner` (unless `owner` is "" or "anonymous").
  void Requeue(const std::string& external_id, const std::string& owner, const Finding& f);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace shepherd
