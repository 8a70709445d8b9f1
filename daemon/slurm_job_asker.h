// SlurmJobAsker: answers "what does Slurm show of job ID?" for the API (binding a Slurm job id needs the job to
// exist and be the caller's; api/slurm_binding.h) without ever running a Slurm command on the control thread. One
// worker thread runs `scontrol show job ID --oneliner` with a short timeout; the answer is posted to the control
// thread (daemon/control_channel.h). Questions about an id already being asked share its answer (64 ranks reporting
// at once ask Slurm once). At most kMaxPending distinct ids wait; beyond that, and once stopped, the answer is
// kUnavailable at once (the caller answers 503 with Retry-After).
// Threading: Ask and Stop from the control thread; `done` always runs on the control thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "control/callbacks.h"
#include "daemon/config.h"
#include "slurm/jobs.h"

namespace shepherd {

class SlurmJobAsker {
 public:
  static constexpr std::size_t kMaxPending = 32;
  static constexpr double kMaxTimeoutS = 5;  // per question; the config's command timeout if shorter

  SlurmJobAsker(const SlurmConfig& config, Post post);
  ~SlurmJobAsker();  // Stop()
  // REQUIRES: slurm::ValidJobId(id) (anything else is answered kInvalidArgument without running Slurm).
  void Ask(const std::string& id, std::function<void(Result<slurm::SlurmJob>)> done);
  // Joins the worker (a command under way finishes first, bounded by the timeout); questions still
  // waiting are answered kUnavailable (posted).
  void Stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace shepherd
