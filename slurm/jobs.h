// Slurm job and step records as `scontrol show job ID --oneliner` and `scontrol show step ID --oneliner`
// print them. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace shepherd::slurm {

enum class SlurmJobState {
  kPending,
  kRunning,
  kSuspended,
  kCompleting,
  kCompleted,
  kCancelled,
  kFailed,
  kTimeout,
  kNodeFail,
  kPreempted,
  kBootFail,
  kDeadline,
  kOutOfMemory,
  kRequeued,
  kOther,
};
const char* ToString(SlurmJobState s);
SlurmJobState ParseJobState(std::string_view text);  // unknown words → kOther
// Pending, running, suspended, completing or requeued: the allocation may still (or again) hold nodes.
bool IsActive(SlurmJobState s);

struct SlurmJob {
  std::string id;
  std::string name;
  SlurmJobState state = SlurmJobState::kOther;
  std::string state_text;
  std::string reason;              // "None" when Slurm has none
  std::vector<std::string> nodes;  // expanded NodeList (empty while pending)
  int restarts = 0;
  std::string exit_code;  // ExitCode, "exit:signal" of the batch script ("0:0"); "" when not shown
  std::string user;       // UserId's name ("alice" of "alice(1000)"); "" when not shown
};

struct SlurmStep {
  std::string id;  // "4.0", "4.batch"
  std::string name;
  std::string state;  // "RUNNING", ...
  std::vector<std::string> nodes;
};

// Whether a step that runs the job's tasks (one srun started: "4.0", "4.1", ...; not the batch script's
// "4.batch", nor "4.extern" or "4.interactive") is RUNNING. A batch job whose srun ended has no task left
// running, whatever its batch script still does.
bool TasksRunning(const std::vector<SlurmStep>& steps);

// Why `job` is not `owner`'s (a Shepherd job's owner: the tokens file's name, which must be the Slurm user's
// for Shepherd to act on the Slurm job), or nullopt when it is. No owner ("" or "anonymous": no auth) is
// not checked.
std::optional<std::string> NotOwnedBy(const SlurmJob& job, const std::string& owner);

// Whether `id` is a Slurm job id as Shepherd passes one to Slurm's commands: 1 to 20 digits, optionally an
// array task "_N" (1 to 10 digits). Anything else (an option such as "--help", a step, a list) is never run.
bool ValidJobId(std::string_view id);

// kInvalidArgument: no JobId record, or a NodeList that is not a hostlist.
Result<SlurmJob> ParseJob(std::string_view scontrol_output);
// Every step record (none for empty output). kInvalidArgument: a NodeList that is not a hostlist.
Result<std::vector<SlurmStep>> ParseSteps(std::string_view scontrol_output);

}  // namespace shepherd::slurm
