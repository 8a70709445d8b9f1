#include "slurm/jobs.h"

#include <gtest/gtest.h>

#include "tests/slurm/testdata.h"

namespace shepherd::slurm {
namespace {

TEST(ParseJob, RunningHoldingJobFromScontrol) {
  auto job = ParseJob(testing::ReadTestData("job_running.txt"));
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->id, "4");
  EXPECT_EQ(job->name, "shepherd-hold");
  EXPECT_EQ(job->state, SlurmJobState::kRunning);
  EXPECT_EQ(job->reason, "None");  // not the rest of the line: a job's Reason is one word
  EXPECT_EQ(job->nodes, (std::vector<std::string>{"n0", "n1", "n2", "n3", "n4"}));
  EXPECT_EQ(job->restarts, 0);
  EXPECT_EQ(job->exit_code, "0:0");
  EXPECT_EQ(job->user, "root");  // UserId=root(0): whose job it is (a requeue is for the owner's own)
}

// A tester bound a watched job to another user's Slurm job id with "requeue": Shepherd, a Slurm operator,
// would have requeued it. The requeue is for the Shepherd job owner's own Slurm job.
TEST(ParseJob, ARequeueIsForTheOwnersOwnSlurmJob) {
  auto job = ParseJob(testing::ReadTestData("job_running.txt"));
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE(NotOwnedBy(*job, "root"));
  EXPECT_FALSE(NotOwnedBy(*job, ""));           // no auth: nobody to check
  EXPECT_FALSE(NotOwnedBy(*job, "anonymous"));  // the same
  EXPECT_EQ(NotOwnedBy(*job, "alice"), "Slurm job 4 is root's, not alice's (the Shepherd job's owner)");
}

TEST(ParseSteps, BatchAndArbitraryStepFromScontrol) {
  auto steps = ParseSteps(testing::ReadTestData("steps_running.txt"));
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  ASSERT_EQ(steps->size(), 2u);
  EXPECT_EQ((*steps)[0].id, "4.batch");
  EXPECT_EQ((*steps)[0].nodes, (std::vector<std::string>{"n0"}));
  EXPECT_EQ((*steps)[1].id, "4.0");
  EXPECT_EQ((*steps)[1].name, "shepherd-step-a1");
  EXPECT_EQ((*steps)[1].state, "RUNNING");
  EXPECT_EQ((*steps)[1].nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(TasksRunning(*steps));
  // The srun step ended (training finished) while the batch script runs on: no task runs.
  EXPECT_FALSE(TasksRunning({(*steps)[0]}));
  EXPECT_FALSE(
      TasksRunning({{"4.extern", "extern", "RUNNING", {"n0"}}, {"4.0", "python3", "COMPLETING", {}}}));
  EXPECT_TRUE(TasksRunning({{"7.1", "stage2", "RUNNING", {"n3"}}}));
  EXPECT_FALSE(TasksRunning({}));
}

TEST(ParseJobState, Words) {
  EXPECT_EQ(ParseJobState("PENDING"), SlurmJobState::kPending);
  EXPECT_EQ(ParseJobState("NODE_FAIL"), SlurmJobState::kNodeFail);
  EXPECT_EQ(ParseJobState("CANCELLED"), SlurmJobState::kCancelled);
  EXPECT_EQ(ParseJobState("WHATEVER"), SlurmJobState::kOther);
  EXPECT_TRUE(IsActive(SlurmJobState::kRunning));
  EXPECT_FALSE(IsActive(SlurmJobState::kCancelled));
}

TEST(ParseJob, NoRecordIsAnError) {
  EXPECT_EQ(ParseJob("").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace shepherd::slurm
