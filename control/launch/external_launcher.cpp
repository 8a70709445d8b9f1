#include "control/launch/external_launcher.h"

namespace shepherd {

LaunchGates ExternalLauncher::GatesFor(int attempt) const {
  return {.wait_for_older_attempt = attempt > 1, .wait_until_saved = true, .bump_nodes = true};
}

bool ExternalLauncher::EndsWhenEveryRankFinished(const JobSpec& spec, bool daemon_slurm) const {
  return !(daemon_slurm && !spec.external_id.empty());
}

}  // namespace shepherd
