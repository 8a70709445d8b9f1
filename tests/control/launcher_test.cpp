// Each launcher on its own: what it decides for a job of its mode, with no Controller around it.
#include "control/launch/launcher.h"

#include <gtest/gtest.h>

#include "control/launch/slurm_launcher.h"
#include "tests/control/control_test_util.h"

namespace shepherd {
namespace {

TEST(LauncherFor, EachModeHasItsOwnLauncher) {
  for (LaunchMode m : {LaunchMode::kAgents, LaunchMode::kSlurm, LaunchMode::kExternal})
    EXPECT_EQ(LauncherFor(m).mode(), m) << ToString(m);
  Job job;
  job.spec.launch_mode = LaunchMode::kSlurm;
  EXPECT_EQ(&LauncherFor(job), &LauncherFor(LaunchMode::kSlurm));
}

// The agents' gates: a first attempt's ranks wait only until the attempt is durable; a restarted one's also
// until the older attempt's ranks have stopped. Either way its nodes' long polls are answered.
TEST(AgentsLauncher, AFirstAttemptWaitsToBeSavedARestartAlsoForTheOlderRanks) {
  const Launcher& agents = LauncherFor(LaunchMode::kAgents);
  EXPECT_EQ(agents.GatesFor(1), (LaunchGates{false, true, true}));
  EXPECT_EQ(agents.GatesFor(2), (LaunchGates{true, true, true}));
  EXPECT_EQ(agents.GatesFor(7), (LaunchGates{true, true, true}));
  EXPECT_TRUE(agents.AgentsStartRanks());
  EXPECT_FALSE(agents.HoldsAllocation());
  EXPECT_EQ(agents.Credential(), RankCredential::kPerRank);
  EXPECT_EQ(agents.Arming(), JobHealth::Launch::kByAgents);
  EXPECT_TRUE(agents.Admit(false).ok());
}

// Slurm's step is not behind any agent gate (it starts once the attempt is durable, from the Slurm orders),
// and only a daemon started with --slurm takes such a job.
TEST(SlurmLauncher, NoAgentGateAndOnlyADaemonWithSlurmAdmitsIt) {
  const Launcher& slurm = LauncherFor(LaunchMode::kSlurm);
  EXPECT_EQ(slurm.GatesFor(1), LaunchGates{});
  EXPECT_EQ(slurm.GatesFor(3), LaunchGates{});
  EXPECT_FALSE(slurm.AgentsStartRanks());
  EXPECT_TRUE(slurm.HoldsAllocation());
  EXPECT_EQ(slurm.Credential(), RankCredential::kPerStep);
  EXPECT_TRUE(slurm.Admit(true).ok());
  Status refused = slurm.Admit(false);
  EXPECT_EQ(refused.code(), Code::kInvalidContent);
  ASSERT_EQ(refused.fields().size(), 1u);
  EXPECT_EQ(refused.fields()[0].field, "launcher");
}

// Another launcher's job: Shepherd follows its attempts, blames the nodes its ranks reported from, and it
// ends when every rank finished, unless its Slurm record (watched with --slurm) says when.
TEST(ExternalLauncher, FollowsItsLauncherAndEndsWhenEveryRankFinishedUnlessSlurmSays) {
  const Launcher& ext = LauncherFor(LaunchMode::kExternal);
  EXPECT_FALSE(ext.StartsAttempts());
  EXPECT_TRUE(ext.BlamesReportedNodes());
  EXPECT_FALSE(ext.AgentsStartRanks());
  EXPECT_EQ(ext.Credential(), RankCredential::kPerJob);
  EXPECT_EQ(ext.Arming(), JobHealth::Launch::kExternal);
  JobSpec spec;
  EXPECT_TRUE(ext.EndsWhenEveryRankFinished(spec, false));
  EXPECT_TRUE(ext.EndsWhenEveryRankFinished(spec, true));  // no Slurm job to watch
  spec.external_id = "4242";
  EXPECT_TRUE(ext.EndsWhenEveryRankFinished(spec, false));
  EXPECT_FALSE(ext.EndsWhenEveryRankFinished(spec, true));
  for (LaunchMode m : {LaunchMode::kAgents, LaunchMode::kSlurm}) {
    EXPECT_TRUE(LauncherFor(m).StartsAttempts()) << ToString(m);
    EXPECT_FALSE(LauncherFor(m).BlamesReportedNodes()) << ToString(m);
    EXPECT_FALSE(LauncherFor(m).EndsWhenEveryRankFinished(spec, false)) << ToString(m);
  }
}

// The allocation a Slurm job's started attempt runs in: a new one holds the placement's nodes in rank order,
// then the closest free spares (not those another job's allocation holds); one that hosts the placement is
// kept; one that does not is given back for a new one, unless it was adopted.
TEST(SlurmLauncher, AnAttemptRunsInTheHeldAllocationOrWantsOneWithItsSpares) {
  Cluster cluster;
  for (const char* n : {"a0", "a1", "a2", "a3"})
    ASSERT_TRUE(cluster.UpsertNode(testing::MakeNode(n, "l0")).ok());
  ASSERT_TRUE(cluster.UpsertNode(testing::MakeNode("b0", "l1")).ok());
  Job job;
  job.spec.launch_mode = LaunchMode::kSlurm;
  job.spec.resources.spare_nodes = 1;
  Placement p;
  p.ranks = {{0, "a1", 0, 0, 0, 0}, {1, "a0", 0, 0, 1, 0}, {2, "a1", 1, 0, 2, 0}};
  const SlurmLauncher slurm;

  SlurmLauncher::AllocationChange c = slurm.AllocationFor(job, p, nullptr, cluster, {"a2"});
  EXPECT_FALSE(c.release);
  ASSERT_TRUE(c.want);
  // a2 is another job's; a3 shares the placement's leaf, b0 does not.
  EXPECT_EQ(c.nodes, (std::vector<std::string>{"a1", "a0", "a3"}));
  EXPECT_TRUE(c.named);
  EXPECT_EQ(c.spares_missing, 0);

  SlurmAllocationRecord held;
  held.nodes = {"a0", "a1", "a3"};
  c = slurm.AllocationFor(job, p, &held, cluster, {});
  EXPECT_FALSE(c.release);
  EXPECT_FALSE(c.want);

  held.nodes = {"a0", "a3"};  // a1 is outside it
  c = slurm.AllocationFor(job, p, &held, cluster, {"a2", "a3", "b0"});
  EXPECT_TRUE(c.release);
  ASSERT_TRUE(c.want);
  EXPECT_EQ(c.nodes, (std::vector<std::string>{"a1", "a0"}));
  EXPECT_EQ(c.spares_missing, 1);

  held.adopted = true;  // the user's own allocation: kept, the job is re-placed inside it later
  c = slurm.AllocationFor(job, p, &held, cluster, {});
  EXPECT_FALSE(c.release);
  EXPECT_FALSE(c.want);

  job.spec.slurm.sbatch_args = {"--comment=project-7"};  // the site's comment: the request goes unnamed
  job.spec.slurm.allocation = "99";                      // adopting: no spares are chosen
  c = slurm.AllocationFor(job, p, nullptr, cluster, {});
  ASSERT_TRUE(c.want);
  EXPECT_EQ(c.nodes, (std::vector<std::string>{"a1", "a0"}));
  EXPECT_FALSE(c.named);
}

}  // namespace
}  // namespace shepherd
