// What srun says about a step's end, from its output (the log StartStep writes). srun prints one line per
// group of tasks that ended badly and one per failed node (formats captured from Slurm 22.05's srun):
//   srun: error: n1: task 1: Exited with exit code 3
//   srun: error: n4: tasks 2-3: Exited with exit code 5
//   srun: error: n2: task 2: Killed                      (strsignal's text of the signal)
//   srun: error: Node failure on n4
// and Slurm's notice when it cancelled the step (slurmstepd's, or srun's for a step time limit):
//   slurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2026-11-26T15:02:11 DUE TO TIME LIMIT ***
// Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shepherd::slurm {

struct TaskEnd {
  int rank = 0;  // SLURM_PROCID, which Shepherd's layout makes the rank
  std::string node;
  std::optional<int> exit_code;  // "Exited with exit code N"
  std::optional<int> signal;     // a known signal text ("Killed" = 9, "Terminated" = 15, ...)
  std::string how;               // srun's words, e.g. "Exited with exit code 3", "Segmentation fault"
};

// Why Slurm cancelled the step: "DUE TO TIME LIMIT", "PREEMPTION", "JOB REQUEUE", "NODE FAILURE, ...";
// kOther: a cancellation without one of those (scancel) or with a cause this parser does not know.
enum class StepCancel { kNone, kTimeLimit, kPreemption, kJobRequeue, kNodeFailure, kOther };
const char* ToString(StepCancel c);  // "none", "time limit", "preemption", "job requeue", ...

struct StepLog {
  std::vector<TaskEnd> failed;             // in the order srun printed them (about the order they ended)
  std::vector<std::string> node_failures;  // "Node failure on N", in order, each once
  StepCancel cancel = StepCancel::kNone;   // the first notice's cause
};

StepLog ParseStepLog(std::string_view srun_output);

// Whether any task of the step ran: a line of a task's output (srun --label: "<task>: ...") or srun
// naming a task's end. False for srun's own errors alone ("Unable to create step", ...).
bool TasksRan(std::string_view srun_output);

}  // namespace shepherd::slurm
