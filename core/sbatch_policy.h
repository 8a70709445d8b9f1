// Which sbatch options a job's `slurm.sbatch_args` may carry (docs/slurm.md, "sbatch options"). Pure.
//
// The allocation Shepherd requests runs as the daemon's Unix user, so an option that changes who runs
// what, with which environment, or where files are written would act with the daemon's rights
// (`--export=LD_PRELOAD=...`, `--output=<the daemon's database> --open-mode=truncate`). Only options that
// steer scheduling and accounting pass; everything else, unknown options included, is refused.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace shepherd {

// One allowed option, as a site writes it: "--name=" for an option with a value ("--partition="),
// "--name" for a flag without one ("--contiguous").
using SbatchOptionSpec = std::string;

// The built-in list: scheduling and accounting only (docs/slurm.md says why each is safe).
const std::vector<SbatchOptionSpec>& DefaultSbatchOptions();

// Whether `spec` is a well-formed entry ("--" then a name of letters, digits and '-', then "=" or
// nothing).
bool ValidSbatchOptionSpec(const std::string& spec);

// Checks `args` against `allowed`. Accepted forms: "--name=value" and "--name" "value" (two elements) for
// options with a value, "--name" for flags; short options ("-p") and abbreviations ("--part") are refused
// (write the long name). Values may not hold control characters. Each violation is a FieldError named
// `<field>[i]` (i the element's index); an empty vector means every element passed.
std::vector<FieldError> CheckSbatchArgs(const std::vector<std::string>& args,
                                        const std::vector<SbatchOptionSpec>& allowed,
                                        const std::string& field);

}  // namespace shepherd
