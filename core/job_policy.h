// What a job may run: the site's policy on a submitted job's command and environment (issue 10, item 4).
// Pure: checked by the submit handler before the job reaches the controller; a violation is a 422 naming
// the field ("command", "env.LD_PRELOAD"). The Unix user ranks run as is the agent's business
// (`shepherdd agent --run-as`), not the job's: a job cannot choose it.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace shepherd {

struct JobPolicy {
  // Allowed command prefixes, each a list of leading argv elements: {{"python3"}, {"/usr/bin/torchrun"}}
  // lets ["python3", "train.py"] and ["/usr/bin/torchrun", "--nproc...", ...] through. Empty: any command
  // (the default, for laptops and tests; a fleet sets it).
  std::vector<std::vector<std::string>> command_prefixes;
  // Environment names a job may not set. Defaults: what changes how every program links or finds its
  // binaries, and everything the agent sets for ranks (their identity and credentials).
  std::vector<std::string> refused_env = {"PATH",       "RANK",        "WORLD_SIZE",          "LOCAL_RANK",
                                          "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                          "CUDA_VISIBLE_DEVICES", "HOME", "USER", "LOGNAME", "SHELL"};
  // Name prefixes a job may not set: the dynamic linker's (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...),
  // the agent's own (SHEPHERD_*) and torchrun's (TORCHELASTIC_*).
  std::vector<std::string> refused_env_prefixes = {"LD_", "SHEPHERD_", "TORCHELASTIC_"};
  // Names allowed despite the two lists above (a site that wants jobs to set PATH lists it here).
  std::vector<std::string> allowed_env;
};

// kInvalidContent listing every violation by field, or Ok.
Status CheckJobPolicy(const JobSpec& spec, const JobPolicy& policy);

}  // namespace shepherd
