// What a job may run: the site's policy on a submitted job's command, environment and sbatch options.
// Pure: checked by the submit handler before the job reaches the controller; a violation is a 422 naming
// the field ("command", "env.LD_PRELOAD", "slurm.sbatch_args[2]"). The Unix user ranks run as is the
// agent's business (`shepherdd agent --run-as`) or, for launcher "slurm", the daemon's: never the job's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/sbatch_policy.h"
#include "core/status.h"

namespace shepherd {

// The built-in refused names (JobPolicy::refused_env).
const std::vector<std::string>& DefaultRefusedEnv();

struct JobPolicy {
  // Allowed command prefixes, each a list of leading argv elements: {{"python3"}, {"/usr/bin/torchrun"}}
  // lets ["python3", "train.py"] and ["/usr/bin/torchrun", "--nproc...", ...] through. Empty: any command
  // (the default, for laptops and tests; a fleet sets it).
  std::vector<std::vector<std::string>> command_prefixes;
  // Environment names a job may not set. Defaults: what changes how every program links or finds its
  // binaries, what makes an interpreter or library load code the command did not name (a command
  // allow-list means nothing if PYTHONPATH can add a sitecustomize.py), and everything the agent sets for
  // ranks (their identity and credentials). docs/security.md gives the reason for each.
  std::vector<std::string> refused_env = DefaultRefusedEnv();
  // Name prefixes a job may not set: the dynamic linker's (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...),
  // bash's exported functions (BASH_FUNC_), the agent's own (SHEPHERD_*), torchrun's (TORCHELASTIC_*) and
  // what srun reads as its options and configuration (SLURM_CONF, SLURM_TASK_PROLOG, SRUN_*, ...).
  std::vector<std::string> refused_env_prefixes = {"LD_",    "BASH_FUNC_", "SHEPHERD_", "TORCHELASTIC_",
                                                   "SLURM_", "SRUN_",      "SBATCH_",   "SALLOC_"};
  // Names allowed despite the two lists above (a site that wants jobs to set PATH lists it here).
  std::vector<std::string> allowed_env;
  // Set: the site's allow-list replaces the lists above; a job may set exactly these names.
  std::optional<std::vector<std::string>> env_allow;
  // sbatch options a job's slurm.sbatch_args may carry (core/sbatch_policy.h): the built-in list, which a
  // site may replace, plus the site's additions.
  std::vector<SbatchOptionSpec> sbatch_options = DefaultSbatchOptions();
  std::vector<SbatchOptionSpec> allowed_sbatch_options;
};

// kInvalidContent listing every violation by field, or Ok.
Status CheckJobPolicy(const JobSpec& spec, const JobPolicy& policy);

}  // namespace shepherd
