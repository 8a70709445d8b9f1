// The daemon's Slurm launch worker (launcher "slurm", docs/slurm.md): one thread that, every poll interval,
// asks the controller for its orders (Controller::GetSlurmOrders, on the control thread), carries them out
// with slurm::JobRunner (sbatch the allocation or adopt one, srun one step per attempt, stop a
// replaced attempt's step with its grace, cancel released allocations), watches what it started (the
// allocation's nodes, the step's end and what srun said about it) and posts what happened back
// (Controller::OnSlurmReport), both through daemon/control_channel.h (orders not given within
// kControlAnswerTimeout are asked for again). Nothing Slurm-related runs on the control thread.
// Owns: the srun processes of the steps it started (children of the daemon, each in a session of its own so
// that it outlives the daemon) and what it knows of each job's allocation and step. Worker thread only
// (Start and Stop from the control thread).
// Daemon restarts: a step an earlier daemon started keeps running; the next worker finds it by name in
// Slurm's step list and watches it instead of starting the attempt again (docs/operations.md, "Slurm steps
// and the daemon's life").
// Limits: one thread for every job, so a step being stopped (its grace) or started delays the others'
// steps by as much.
#pragma once

#include <memory>

#include "control/callbacks.h"
#include "control/controller.h"
#include "daemon/config.h"

namespace shepherd {

class SlurmLaunchWorker {
 public:
  SlurmLaunchWorker(const SlurmConfig& config, Controller* controller, Post post);
  ~SlurmLaunchWorker();  // Stop()
  void Start();
  // Stops the worker and joins it. Steps it runs keep running (the allocation is the user's job).
  void Stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace shepherd
