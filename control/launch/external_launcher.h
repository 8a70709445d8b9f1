// ExternalLauncher: jobs whose ranks someone else starts (LaunchMode::kExternal: no `command`; srun in the
// user's own batch script, another scheduler). Shepherd watches their reports, follows the attempts they
// name and remediates as policy.external_remediation says (control/recovery_executor.h); it starts and
// stops none of their ranks.
// Stateless and immutable (control/launch/launcher.h): shared by every thread.
#pragma once

#include "control/launch/launcher.h"

namespace shepherd {

class ExternalLauncher final : public Launcher {
 public:
  LaunchMode mode() const override { return LaunchMode::kExternal; }
  // Its slots are bookkeeping on the agents' nodes: they are gated and bumped as the agents' ranks are
  // (its own desired ranks are none), so the nodes' assignments change in the same order.
  LaunchGates GatesFor(int attempt) const override;
  // One credential for the job: its launcher restarts it, and every attempt's ranks report with it.
  RankCredential Credential() const override { return RankCredential::kPerJob; }
  // Armed at the first report.
  JobHealth::Launch Arming() const override { return JobHealth::Launch::kExternal; }
  bool StartsAttempts() const override { return false; }
  bool BlamesReportedNodes() const override { return true; }
  // Every rank finished ends it, unless the daemon watches its Slurm job (docs/slurm.md): the batch
  // script may run another step, and Slurm says when the job ends.
  bool EndsWhenEveryRankFinished(const JobSpec& spec, bool daemon_slurm) const override;
};

}  // namespace shepherd
