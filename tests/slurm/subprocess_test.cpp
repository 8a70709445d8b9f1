#include "slurm/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/child_process.h"
#include "slurm/cli.h"

namespace shepherd::slurm {
namespace {

using std::chrono::milliseconds;

TEST(RunCommand, CollectsOutputAndExitCode) {
  auto r =
      RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, CleanEnvironment(), milliseconds(10000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(RunCommand, ArgumentsAreNotInterpretedByAShell) {
  auto r = RunCommand({"printf", "%s|", "a b", "$(id)", ";rm"}, CleanEnvironment(), milliseconds(10000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "a b|$(id)|;rm|");
}

TEST(RunCommand, KillsTheGroupAtTheTimeout) {
  auto start = std::chrono::steady_clock::now();
  // The grandchild keeps the pipes open: only killing the whole group ends the wait.
  auto r = RunCommand({"sh", "-c", "sleep 30 & sleep 30"}, CleanEnvironment(), milliseconds(300));
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(SlurmCliRun, AnExplicitTimeoutReplacesTheCommandTimeout) {
  // sbcast of a large rank table gets the step's start timeout instead of one command's (job_runner.cpp).
  SlurmCli cli(SlurmCli::Options{.timeout = milliseconds(200)});
  const std::vector<std::string> slow = {"sleep", "1"};
  EXPECT_EQ(cli.Run(slow).status().code(), Code::kUnavailable);  // killed at the 200 ms of every command
  auto r = cli.Run(slow, milliseconds(30000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0);
}

TEST(RunCommand, MissingProgramIsAnError) {
  auto r = RunCommand({"/nonexistent/tool"}, CleanEnvironment(), milliseconds(10000));
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

// A step's srun must outlive the daemon and its signals: SpawnLogged gives it a session of its own (so a
// group of its own, and no controlling terminal) before it returns.
TEST(SpawnLogged, StartsTheChildInASessionOfItsOwn) {
  char dir[] = "/tmp/spawn-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/out.log";
  auto pid = SpawnLogged({"sleep", "30"}, CleanEnvironment(), log, "");
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  const pid_t sid = ::getsid(*pid), pgid = ::getpgid(*pid);
  const pid_t own_sid = ::getsid(0), own_pgid = ::getpgrp();
  EXPECT_TRUE(SignalGroup(*pid, SIGKILL));
  std::optional<ExitStatus> exit;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !exit && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(milliseconds(10)))  // polling interval
    exit = PollExit(*pid);
  ::unlink(log.c_str());
  ::rmdir(dir);
  EXPECT_EQ(sid, *pid);
  EXPECT_EQ(pgid, *pid);
  EXPECT_NE(sid, own_sid);
  EXPECT_NE(pgid, own_pgid);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
}

TEST(CleanEnvironment, DropsInheritedSlurmVariablesButKeepsSlurmConf) {
  ::setenv("SLURM_JOB_ID", "77", 1);
  ::setenv("SLURM_CONF", "/x/slurm.conf", 1);
  ::setenv("SBATCH_NO_KILL", "1", 1);
  Envp env = CleanEnvironment({{"SHEPHERD_JOB", "job-1"}});
  auto has = [&](const std::string& e) { return std::find(env.begin(), env.end(), e) != env.end(); };
  EXPECT_FALSE(has("SLURM_JOB_ID=77"));
  EXPECT_FALSE(has("SBATCH_NO_KILL=1"));
  EXPECT_TRUE(has("SLURM_CONF=/x/slurm.conf"));
  EXPECT_TRUE(has("SHEPHERD_JOB=job-1"));
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_CONF");
  ::unsetenv("SBATCH_NO_KILL");
}

// A job's env reaches srun's environment: what srun reads as its input (the configuration it loads, a
// program each task runs, the job to act in) is dropped from it (JobRunner::StartStep).
TEST(IsSlurmInputVariable, NamesWhatSrunAndSbatchRead) {
  for (const char* name : {"SLURM_CONF", "SLURM_TASK_PROLOG", "SLURM_JOB_ID", "SRUN_EXPORT_ENV",
                           "SBATCH_EXPORT", "SALLOC_PARTITION"})
    EXPECT_TRUE(IsSlurmInputVariable(name)) << name;
  for (const char* name : {"SHEPHERD_JOB", "NCCL_DEBUG", "SLURMX", "MY_SLURM_CONF"})
    EXPECT_FALSE(IsSlurmInputVariable(name)) << name;
}

}  // namespace
}  // namespace shepherd::slurm
