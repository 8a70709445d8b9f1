// The site's remediation hook for jobs Shepherd does not launch (policy.external_remediation = "hook"): a
// command from the daemon's configuration, run with the finding's JSON on stdin, e.g. to drain a Slurm node
// or delete a pod. Each run happens on a detached thread: the control thread never waits for it. A run that
// lasts longer than `timeout_s` is killed; its exit status is logged.
#pragma once

#include <string>
#include <vector>

#include "control/recovery_executor.h"

namespace shepherd {

// REQUIRES: argv is not empty; argv[0] is a path or a name found on PATH.
RemediationHook MakeProcessHook(std::vector<std::string> argv, double timeout_s = 60);

}  // namespace shepherd
