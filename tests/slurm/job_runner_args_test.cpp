// The sbatch command line of an allocation, seen by a stand-in sbatch that records its arguments: the
// site's options come first, so Shepherd's own (the name it finds the allocation by, its nodes, where the
// holding job runs and writes) win over any repeat, whatever an option list lets through.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/child_process.h"
#include "slurm/job_runner.h"
#include "slurm/subprocess.h"

namespace shepherd::slurm {
namespace {

class FakeSbatch {
 public:
  FakeSbatch() {
    char tmpl[] = "/tmp/shepherd-sbatch-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const std::string script = dir_ + "/sbatch";
    std::ofstream(script) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << dir_ << "/argv\necho 42\n";
    ::chmod(script.c_str(), 0755);
    const char* path = std::getenv("PATH");
    old_path_ = path ? path : "";
    ::setenv("PATH", (dir_ + ":" + old_path_).c_str(), 1);
  }
  ~FakeSbatch() {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> Argv() const {
    std::ifstream in(dir_ + "/argv");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  std::string dir_, old_path_;
};

std::ptrdiff_t IndexOf(const std::vector<std::string>& v, const std::string& s) {
  auto it = std::find(v.begin(), v.end(), s);
  return it == v.end() ? -1 : it - v.begin();
}

TEST(SlurmLauncherArgs, TheSitesOptionsComeBeforeShepherdsOwn) {
  FakeSbatch sbatch;
  AllocationRequest r;
  r.name = "shepherd-job-000001";
  r.nodes = 1;
  r.spares = 0;
  r.extra_args = {"--partition", "gpu", "--job-name=site", "--output=/var/lib/shepherd/shepherd.db"};
  r.comment = "shepherd-request=0123456789abcdef";
  auto id = JobRunner(JobRunner::Options{}).SubmitAllocation(r);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, "42");
  const std::vector<std::string> argv = sbatch.Argv();
  ASSERT_FALSE(argv.empty());
  EXPECT_EQ(argv.front(), "--parsable");
  EXPECT_EQ(IndexOf(argv, "--partition"), 1) << "the site's, first";
  EXPECT_EQ(IndexOf(argv, "gpu"), 2) << "a value given as the next element stays with its option";
  EXPECT_LT(IndexOf(argv, "--job-name=site"), IndexOf(argv, "--job-name=shepherd-job-000001"));
  EXPECT_LT(IndexOf(argv, "--output=/var/lib/shepherd/shepherd.db"), IndexOf(argv, "--output=/dev/null"));
  EXPECT_EQ(argv.back(), "--wrap=exec sleep infinity");
}

// A restarted daemon finds an earlier daemon's srun by its arguments: a process named srun (here a link to
// python3 that sleeps, with srun's --jobid= and --job-name= among its arguments). The step's name may carry
// a launch order (shepherd-a7-o3) or not (an older daemon's shepherd-a7): either is attempt 7's.
TEST(FindSrun, FindsALiveSrunByAllocationAndStepName) {
  char dir[] = "/tmp/find-srun-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string srun = std::string(dir) + "/srun";
  ASSERT_EQ(::symlink("/usr/bin/python3", srun.c_str()), 0);
  auto pid =
      SpawnLogged({srun, "-c", "import time; time.sleep(60)", "--jobid=987654", "--job-name=shepherd-a7"},
                  CleanEnvironment(), std::string(dir) + "/log", "");
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  // /proc shows the arguments once the child exec'd, which SpawnLogged does not wait for.
  pid_t found = -1;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       found < 0 && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(20)))  // polling interval
    found = FindSrun("987654", 7);
  const pid_t other_step = FindSrun("987654", 8), other_job = FindSrun("98765", 7);
  SignalGroup(*pid, SIGKILL);
  std::optional<ExitStatus> exit;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       !exit && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(10)))  // polling interval
    exit = PollExit(*pid);
  const pid_t after = FindSrun("987654", 7);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(found, *pid);
  EXPECT_EQ(other_step, -1);
  EXPECT_EQ(other_job, -1);
  EXPECT_TRUE(exit.has_value());
  EXPECT_EQ(after, -1);  // reaped: gone from /proc
}

}  // namespace
}  // namespace shepherd::slurm
