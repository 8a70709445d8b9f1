// ParseStepLog on srun output captured from the local cluster (srun -N4 -n4 --label --kill-on-bad-exit=0,
// tasks exiting 3, killed by SIGKILL and SIGTERM; and -N2 -n4 with every task exiting 5).
#include "slurm/step_log.h"

#include <gtest/gtest.h>

namespace shepherd::slurm {
namespace {

TEST(StepLog, TasksThatExitedOrWereKilled) {
  StepLog log = ParseStepLog(
      "0: starting\n"
      "srun: error: n1: task 1: Exited with exit code 3\n"
      "srun: error: n2: task 2: Killed\n"
      "srun: error: n3: task 3: Terminated\n"
      "srun: Force Terminated StepId=1.0\n");
  ASSERT_EQ(log.failed.size(), 3u);
  EXPECT_EQ(log.failed[0].rank, 1);
  EXPECT_EQ(log.failed[0].node, "n1");
  EXPECT_EQ(log.failed[0].exit_code, 3);
  EXPECT_FALSE(log.failed[0].signal);
  EXPECT_EQ(log.failed[1].node, "n2");
  EXPECT_EQ(log.failed[1].signal, 9);
  EXPECT_FALSE(log.failed[1].exit_code);
  EXPECT_EQ(log.failed[2].signal, 15);
  EXPECT_EQ(log.failed[2].how, "Terminated");
  EXPECT_TRUE(log.node_failures.empty());
}

TEST(StepLog, TaskRangesAndNodeFailures) {
  StepLog log = ParseStepLog(
      "srun: error: n4: tasks 2-3: Exited with exit code 5\n"
      "srun: error: n3: tasks 0-1: Exited with exit code 5\n"
      "srun: error: Node failure on n4\n"
      "srun: error: Node failure on n4\n"
      "srun: error: n0: tasks 5,7-8: Segmentation fault (core dumped)\n");
  ASSERT_EQ(log.failed.size(), 7u);
  EXPECT_EQ(log.failed[0].rank, 2);
  EXPECT_EQ(log.failed[1].rank, 3);
  EXPECT_EQ(log.failed[2].rank, 0);
  EXPECT_EQ(log.failed[2].node, "n3");
  EXPECT_EQ(log.failed[4].rank, 5);
  EXPECT_EQ(log.failed[6].rank, 8);
  EXPECT_EQ(log.failed[6].signal, 11);
  EXPECT_EQ(log.node_failures, std::vector<std::string>{"n4"});
}

TEST(StepLog, OtherLinesAndMalformedOnesAreIgnored) {
  StepLog log = ParseStepLog(
      "1: srun: error: n1: task 1: Exited with exit code 3\n"  // a rank's own output, labelled
      "srun: error: n1: task x: Exited with exit code 3\n"
      "srun: error: Unable to create step for job 12: Invalid node name specified\n"
      "srun: error: n2: task 4: Some new text\n");
  ASSERT_EQ(log.failed.size(), 1u);  // the unknown text still names the task, with neither code nor signal
  EXPECT_EQ(log.failed[0].rank, 4);
  EXPECT_FALSE(log.failed[0].exit_code);
  EXPECT_FALSE(log.failed[0].signal);
  EXPECT_EQ(log.failed[0].how, "Some new text");
}

// slurmstepd's notice (Slurm 22.05's wording; srun prints its own for a step's time limit), as srun relays it
// beside the tasks' ends.
TEST(StepLog, SlurmsCancellationNoticeNamesItsCause) {
  StepLog log = ParseStepLog(
      "0: step 41\n"
      "slurmstepd: error: *** STEP 9.0 ON n1 CANCELLED AT 2026-11-26T15:02:11 DUE TO TIME LIMIT ***\n"
      "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
      "srun: error: n1: task 0: Terminated\n"
      "slurmstepd: error: *** STEP 9.0 ON n2 CANCELLED AT 2026-11-26T15:02:11 DUE TO PREEMPTION ***\n");
  EXPECT_EQ(log.cancel, StepCancel::kTimeLimit);  // the first notice
  ASSERT_EQ(log.failed.size(), 1u);
  EXPECT_EQ(log.failed[0].signal, 15);

  auto cause = [](const char* line) { return ParseStepLog(line).cancel; };
  EXPECT_EQ(cause("srun: error: *** STEP 9.0 CANCELLED AT 2026-11-26T15:02:11 DUE TO TIME LIMIT ***"),
            StepCancel::kTimeLimit);
  EXPECT_EQ(
      cause("slurmstepd: error: *** STEP 9.0 ON n1 CANCELLED AT 2026-11-26T15:02:11 DUE TO PREEMPTION ***"),
      StepCancel::kPreemption);
  EXPECT_EQ(
      cause("slurmstepd: error: *** STEP 9.0 ON n1 CANCELLED AT 2026-11-26T15:02:11 DUE TO JOB REQUEUE ***"),
      StepCancel::kJobRequeue);
  EXPECT_EQ(
      cause("slurmstepd: error: *** STEP 9.0 ON n1 CANCELLED AT 2026-11-26T15:02:11 DUE TO NODE FAILURE, "
            "SEE SLURMCTLD LOG FOR DETAILS ***"),
      StepCancel::kNodeFailure);
  // scancel of the step: no cause
  EXPECT_EQ(cause("slurmstepd: error: *** STEP 9.0 ON n1 CANCELLED AT 2026-11-26T15:02:11 ***"),
            StepCancel::kOther);
  // As srun relayed it on a real cluster with several slurmd per host (Slurm 22.05.8, --label): task 0's
  // label and the node in slurmstepd's name.
  EXPECT_EQ(
      cause("0: slurmstepd-dgx-a2: error: *** STEP 27.0 ON dgx-a2 CANCELLED AT 2026-11-26T15:00:17 DUE TO "
            "TIME LIMIT ***"),
      StepCancel::kTimeLimit);
  EXPECT_EQ(
      cause("0: slurmstepd-dgx-b1: error: *** STEP 29.0 ON dgx-b1 CANCELLED AT 2026-11-26T15:05:59 ***"),
      StepCancel::kOther);
  // Not the notice: another sender, or the words alone.
  EXPECT_EQ(
      cause("0: python: error: *** STEP 9.0 ON n1 CANCELLED AT 2026-11-26T15:02:11 DUE TO TIME LIMIT ***"),
      StepCancel::kNone);
  EXPECT_EQ(cause("DUE TO TIME LIMIT"), StepCancel::kNone);
  EXPECT_EQ(
      cause("slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2026-11-26T15:02:11 DUE TO TIME LIMIT ***"),
      StepCancel::kNone);  // the batch script's, not a step's
}

// What a restarted daemon reads in an earlier daemon's step log whose step Slurm no longer lists: whether
// any task ran (then the step ended: never start it again) or srun failed before any did.
TEST(TasksRan, TaskOutputOrATaskEndButNotSrunsOwnErrors) {
  EXPECT_TRUE(TasksRan("0: attempt 1: running steps 1..150\n"));
  EXPECT_TRUE(TasksRan("srun: error: n1: task 1: Exited with exit code 3\n"));
  EXPECT_TRUE(TasksRan("srun: Job 12 step creation temporarily disabled, retrying\n12: step 5\n"));
  EXPECT_FALSE(TasksRan(""));
  EXPECT_FALSE(
      TasksRan("srun: error: Unable to create step for job 12: Invalid generic resource (gres) "
               "specification\n"));
  EXPECT_FALSE(TasksRan("srun: fatal: Invalid node name specified\n"));
  EXPECT_FALSE(TasksRan(": no task label\nsrun: Job 12 step creation temporarily disabled, retrying\n"));
}

}  // namespace
}  // namespace shepherd::slurm
