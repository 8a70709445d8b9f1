#include "control/launch/agents_launcher.h"

namespace shepherd {

LaunchGates AgentsLauncher::GatesFor(int attempt) const {
  return {.wait_for_older_attempt = attempt > 1, .wait_until_saved = true, .bump_nodes = true};
}

}  // namespace shepherd
