#include "control/launch/launcher.h"

#include "control/launch/agents_launcher.h"
#include "control/launch/external_launcher.h"
#include "control/launch/slurm_launcher.h"

namespace shepherd {

Status Launcher::Admit(bool) const {
  return Status::Ok();
}

bool Launcher::EndsWhenEveryRankFinished(const JobSpec&, bool) const {
  return false;  // Shepherd's agents or Slurm's step report the ranks' exits
}

const Launcher& LauncherFor(LaunchMode mode) {
  static const AgentsLauncher agents;
  static const SlurmLauncher slurm;
  static const ExternalLauncher external;
  switch (mode) {
    case LaunchMode::kSlurm:
      return slurm;
    case LaunchMode::kExternal:
      return external;
    case LaunchMode::kAgents:
      break;
  }
  return agents;
}

}  // namespace shepherd
