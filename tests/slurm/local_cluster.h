// The real local Slurm cluster of scripts/slurm-cluster.sh, for the tests that run against it. One cluster
// per test binary (a gtest Environment starts it before the first test and stops it after the last).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

// In a test against the cluster: skips where it cannot run (not root), fails where it should have started
// but did not.
#define REQUIRE_CLUSTER()                                                                          \
  if (!::shepherd::slurm::testing::LocalCluster::unavailable_reason().empty())                     \
    GTEST_SKIP() << "skipped: " << ::shepherd::slurm::testing::LocalCluster::unavailable_reason(); \
  ASSERT_TRUE(::shepherd::slurm::testing::LocalCluster::start_error().empty())                     \
      << ::shepherd::slurm::testing::LocalCluster::start_error()

namespace shepherd::slurm::testing {

class LocalCluster {
 public:
  // Why the cluster cannot run here (not root, packages missing): the tests skip. Empty otherwise.
  static const std::string& unavailable_reason();
  // Why starting it failed although it could run (the tests fail). Empty when it is up.
  static const std::string& start_error();
  static const std::string& dir();  // the cluster directory; DIR/work is free for tests
  static std::string slurm_conf() { return dir() + "/slurm.conf"; }

  // Output of a Slurm command run directly (not through the code under test), trimmed.
  static std::string Sh(const std::vector<std::string>& argv);

  // Kills node's slurmd, its slurmstepd processes and everything they started, with SIGKILL, as a node
  // crash would. Returns the pids killed.
  static std::vector<pid_t> CrashNode(const std::string& node);
  // Starts the node's slurmd again.
  static bool RestartSlurmd(const std::string& node);
};

// Polls `done` every 200 ms until it returns true or `limit` passes. True when it did.
bool WaitFor(std::chrono::seconds limit, const std::function<bool()>& done);

}  // namespace shepherd::slurm::testing
