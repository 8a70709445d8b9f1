// "launcher": "slurm" end to end: the real shepherdd --slurm launches a real PyTorch DDP job (gloo, CPU)
// on the real local Slurm cluster (tests/slurm/local_cluster.h: n0..n4, two GPUs each, leaves
// l0 = {n0,n1,n2} and l1 = {n3,n4}). Four ranks on two nodes plus one spare node, one srun step per
// attempt (the daemon and the job: launch_cluster.h). Covers: a short job runs in one step and succeeds,
// its allocation given back; a node crash (slurmd, slurmstepd and the ranks killed) is named, drained in
// Slurm and the job resumes from its last-known-good checkpoint on the spare in a new step; a stopped rank
// (SIGSTOP) is named and a new step starts; cancelling the job cancels its allocation. Runs in
// slurm_cluster_test, after the other files; the daemon restart and launch-order cases follow in
// launch_restart_cluster_test.cpp.
#include "tests/slurm/launch_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <set>
#include <string>

#include "core/json.h"
#include "tests/integration/harness.h"
#include "tests/slurm/local_cluster.h"

namespace shepherd::slurm {
namespace {

using ::shepherd::testing::Http;
using std::chrono::seconds;
using testing::AllocationGone;
using testing::AllocationOf;
using testing::LaunchDaemon;
using testing::LocalCluster;
using testing::ProcEnv;
using testing::RankPid;
using testing::WaitFor;

TEST(SlurmLaunch, ShortJobRunsAsOneStepSucceedsAndGivesItsAllocationBack) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(8, /*until_good=*/false, &why);
  ASSERT_FALSE(job.empty()) << why;
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "succeeded"; }))
      << d.Diagnose(job);
  Json placement = d.Get("/v1/jobs/" + job + "/placement");
  EXPECT_EQ(placement["attempt"], 1) << placement.dump();
  std::set<std::string> placed;
  for (const Json& r : placement["ranks"]) placed.insert(r["node"].get<std::string>());
  EXPECT_EQ(placed.size(), 2u) << placement.dump();  // two ranks per two-GPU node
  const std::string log = d.StepLog(job, 1);
  for (int r = 0; r < 4; ++r)
    EXPECT_NE(log.find(std::to_string(r) + ": done at step 8"), std::string::npos) << log;
  // Each rank ran where Shepherd placed it (shepherd-slurm-rank refuses another node) with the agents'
  // variables; the allocation (two nodes and the spare) is cancelled once the job ended.
  const std::string alloc =
      LocalCluster::Sh({"squeue", "-h", "-n", "shepherd-" + job, "-t", "all", "-o", "%i"});
  EXPECT_TRUE(WaitFor(seconds(60), [&] {
    return LocalCluster::Sh({"squeue", "-h", "-n", "shepherd-" + job, "-o", "%i"}).empty();
  })) << LocalCluster::Sh({"squeue"});
  EXPECT_TRUE(d.Get("/v1/jobs/" + job).value("slurm_allocation", Json()).is_null()) << alloc;
}

// A node of the job crashes: its slurmd, slurmstepd and ranks are killed at once.
TEST(SlurmLaunch, NodeCrashIsNamedDrainedAndTrainingResumesOnTheSpare) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  Json alloc = d.Get("/v1/jobs/" + job)["slurm_allocation"];
  ASSERT_EQ(alloc["nodes"].size(), 3u) << alloc.dump();
  Json placement = d.Get("/v1/jobs/" + job + "/placement");
  const std::string victim = placement["ranks"][3]["node"];
  std::set<std::string> before;
  for (const Json& r : placement["ranks"]) before.insert(r["node"].get<std::string>());
  std::string spare;
  for (const Json& n : alloc["nodes"])
    if (!before.count(n.get<std::string>())) spare = n;
  ASSERT_FALSE(spare.empty()) << alloc.dump();
  // Each rank sees its node's two GPUs (gpu_binding per_node): Slurm's gres/gpu plugin unsets a
  // CUDA_VISIBLE_DEVICES srun passes on a GPU node when the step asks for no GPUs, so the value comes from
  // the per-rank tables shepherd-slurm-rank applies.
  for (int r : {0, 3}) {
    const pid_t pid = RankPid(d.port(), job, r);
    ASSERT_GT(pid, 0) << "rank " << r << "\n" << d.Diagnose(job);
    EXPECT_EQ(ProcEnv(pid).count("CUDA_VISIBLE_DEVICES=0,1"), 1u) << "rank " << r;
  }

  EXPECT_FALSE(LocalCluster::CrashNode(victim).empty());
  // Whatever happens below, the node is handed back for the next tests.
  struct HandBack {
    std::string node;
    ~HandBack() {
      LocalCluster::RestartSlurmd(node);
      LocalCluster::Sh({"scontrol", "update", "NodeName=" + node, "State=RESUME"});
      WaitFor(seconds(90), [&] {
        return LocalCluster::Sh({"sinfo", "-n", node, "-h", "-o", "%T"}) == "idle";
      });
    }
  } hand_back{victim};
  // Drained in Slurm with the id and kind of the finding that blamed it, e.g. "shepherd f-000002 node_lost".
  std::string reason;
  ASSERT_TRUE(WaitFor(seconds(180),
                      [&] {
                        reason = LocalCluster::Sh({"sinfo", "-n", victim, "-h", "-o", "%E"});
                        return reason.rfind("shepherd f-", 0) == 0;
                      }))
      << reason << "\n"
      << d.Diagnose(job);
  const std::string finding = reason.substr(9, reason.find(' ', 9) - 9);
  Json named;
  const Json failures = d.Get("/v1/jobs/" + job + "/failures")["failures"];
  for (const Json& f : failures)
    if (f["id"] == finding) named = f;
  ASSERT_TRUE(named.is_object()) << finding << "\n" << d.Diagnose(job);
  EXPECT_EQ(reason, "shepherd " + finding + " " + named["kind"].get<std::string>());
  EXPECT_EQ(named["nodes"], Json::array({victim})) << named.dump();
  EXPECT_EQ(d.Get("/v1/nodes/" + victim)["state"], "failed");
  // A new step on the surviving node and the spare resumes from last-known-good.
  int attempt = 0;
  ASSERT_TRUE(WaitFor(seconds(240), [&] {
    Json j = d.Get("/v1/jobs/" + job);
    attempt = j.value("attempt", 0);
    return j["state"] == "running" && attempt >= 2 &&
           d.StepLog(job, attempt).find("resumed from step") != std::string::npos;
  })) << d.Diagnose(job);
  Json now = d.Get("/v1/jobs/" + job + "/placement");
  std::set<std::string> after;
  for (const Json& r : now["ranks"]) after.insert(r["node"].get<std::string>());
  EXPECT_EQ(after.count(victim), 0u) << now.dump();
  EXPECT_EQ(after.count(spare), 1u) << now.dump();
  const std::string alloc_id = alloc["id"];
  EXPECT_EQ(AllocationOf(d, job), alloc_id);  // the same allocation, a new step

  // Cancelling the job cancels its allocation.
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

TEST(SlurmLaunch, StoppedRankIsNamedAndANewStepStarts) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string node = d.Get("/v1/jobs/" + job + "/placement")["ranks"][3]["node"];
  pid_t pid = RankPid(d.port(), job, 3);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  struct HandBack {  // the culprit's node is cordoned, so drained in Slurm: resumed for the next tests
    std::string node;
    ~HandBack() { LocalCluster::Sh({"scontrol", "update", "NodeName=" + node, "State=RESUME"}); }
  } hand_back{node};
  Json named;
  ASSERT_TRUE(WaitFor(seconds(120), [&] {
    const Json failures = d.Get("/v1/jobs/" + job + "/failures")["failures"];
    for (const Json& f : failures)
      if ((f["kind"] == "hang" || f["kind"] == "heartbeat_lost") && f["ranks"] == Json::array({3})) {
        named = f;
        return true;
      }
    return false;
  })) << d.Diagnose(job);
  EXPECT_EQ(named["nodes"], Json::array({node})) << named.dump();
  ASSERT_TRUE(WaitFor(seconds(240), [&] {
    Json j = d.Get("/v1/jobs/" + job);
    return j["state"] == "running" && j.value("attempt", 0) == 2 &&
           d.StepLog(job, 2).find("resumed from step") != std::string::npos;
  })) << d.Diagnose(job);
  EXPECT_NE(LocalCluster::Sh({"squeue", "-h", "-s", "-o", "%j"}).find("shepherd-a2"), std::string::npos);
  EXPECT_NE(::kill(pid, 0), 0);  // the stopped rank was killed with its step
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

}  // namespace
}  // namespace shepherd::slurm
