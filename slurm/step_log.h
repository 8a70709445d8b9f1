// What srun says about a step's end, from its output (the log StartStep writes). srun prints one line per
// group of tasks that ended badly and one per failed node (formats captured from Slurm 22.05's srun):
//   srun: error: n1: task 1: Exited with exit code 3
//   srun: error: n4: tasks 2-3: Exited with exit code 5
//   srun: error: n2: task 2: Killed                      (strsignal's text of the signal)
//   srun: error: Node failure on n4
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

struct StepLog {
  std::vector<TaskEnd> failed;             // in the order srun printed them (about the order they ended)
  std::vector<std::string> node_failures;  // "Node failure on N", in order, each once
};

StepLog ParseStepLog(std::string_view srun_output);

}  // namespace shepherd::slurm
