// The daemon's Slurm worker (`--slurm`): one thread that reads the cluster (scontrol show nodes / topology)
// every reconcile interval, hands the view to the controller on the control thread (Controller::SyncSlurm),
// and runs the drains and resumes it returns, posting their outcomes back (SlurmCommandsDone). Slurm's
// commands block (up to the command timeout each); none ever runs on the control thread.
// Threading: Start and Stop from the control thread; everything else runs on the worker thread or is
// posted to the control thread. One cycle at a time: the next read starts only after the previous cycle's
// commands ran, so a drain is never issued twice for one decision.
#pragma once

#include <memory>

#include "control/callbacks.h"
#include "control/controller.h"
#include "daemon/config.h"

namespace shepherd {

// external_remediation "requeue": on a detached thread (each command bounded by the command timeout), runs
// `scontrol requeue <SLURM_JOB_ID>` if Slurm still shows the job RUNNING, and logs the outcome with the
// finding's id. The control thread never waits for it.
ExternalRequeue MakeSlurmRequeue(const SlurmConfig& config);

class SlurmSyncLoop {
 public:
  SlurmSyncLoop(const SlurmConfig& config, TopologyLevels levels, Controller* controller, Post post);
  ~SlurmSyncLoop();  // Stop()
  // Starts the worker; the first sync (the inventory import) begins at once.
  void Start();
  // Stops the worker and joins it (a Slurm command under way finishes first, bounded by its timeout).
  // Callbacks already posted do nothing afterwards.
  void Stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace shepherd
