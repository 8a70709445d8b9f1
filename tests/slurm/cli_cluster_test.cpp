// SlurmCli and JobRunner against the real local Slurm cluster (tests/slurm/local_cluster.h): five
// virtual nodes n0..n4, Gres=gpu:2, leaves l0 = {n0,n1,n2} and l1 = {n3,n4} under spine s0. The tests run
// in order and share one allocation (4 nodes + 1 spare) from AllocationWithSpare to CancelAllocation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "slurm/slurm_view.h"
#include "slurm/job_runner.h"
#include "slurm/node_reconcile.h"
#include "tests/slurm/local_cluster.h"

namespace shepherd::slurm {
namespace {

using std::chrono::seconds;
using testing::LocalCluster;
using testing::WaitFor;

JobRunner MakeLauncher() {
  JobRunner::Options o;
  o.cli.slurm_conf = LocalCluster::slurm_conf();
  o.rank_exec = SHEPHERD_SLURM_RANK_EXEC;
  return JobRunner(o);
}

std::string g_allocation;  // shared by the tests below, in order

std::string Work(const std::string& name) {
  return LocalCluster::dir() + "/work/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Placement Layout(const std::vector<std::string>& nodes) {
  Placement p;
  for (int r = 0; r < static_cast<int>(nodes.size()); ++r) p.ranks.push_back({r, nodes[r], 0, 0, 0, r});
  return p;
}

// A task body that records what the rank saw, then runs `then`.
std::vector<std::string> RecordingCommand(const std::string& out_dir, const std::string& then) {
  return {"sh", "-c",
          "echo \"node=$SLURMD_NODENAME rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
          "coords=$SHEPHERD_RANK_COORDS gpu=$CUDA_VISIBLE_DEVICES job=$SHEPHERD_JOB\" > " +
              out_dir + "/rank-$RANK.txt; " + then,
          "rank"};
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(SlurmCluster, InventoryImport) {
  REQUIRE_CLUSTER();
  JobRunner launcher = MakeLauncher();
  auto nodes = launcher.cli().ShowNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  auto switches = launcher.cli().ShowTopology();
  ASSERT_TRUE(switches.ok()) << switches.status().message();
  auto topology = MapTopology(*switches);
  ASSERT_TRUE(topology.ok());
  auto changes = Reconcile({*nodes, *topology, {}, {}, 80, "H100"});
  ASSERT_EQ(changes.size(), 5u);
  const char* leaf[] = {"l0", "l0", "l0", "l1", "l1"};
  for (int i = 0; i < 5; ++i) {
    const NodeChange& c = changes[i];
    EXPECT_EQ(c.kind, NodeChangeKind::kAdd);
    EXPECT_EQ(c.node, "n" + std::to_string(i));
    EXPECT_EQ(c.record.gpus, 2);
    EXPECT_TRUE(c.record.schedulable);
    EXPECT_EQ(c.record.topology, (std::map<std::string, std::string>{{"spine", "s0"}, {"leaf", leaf[i]}}));
    EXPECT_EQ((*nodes)[i].cpus, 2);
    EXPECT_EQ((*nodes)[i].real_memory_mb, 1024);
  }
}

TEST(SlurmCluster, DrainWithReasonThenResume) {
  REQUIRE_CLUSTER();
  JobRunner launcher = MakeLauncher();
  ASSERT_TRUE(launcher.cli().DrainNode("n2", "shepherd f-000123 sdc_suspected").ok());
  EXPECT_EQ(LocalCluster::Sh({"sinfo", "-n", "n2", "-h", "-o", "%E"}), "shepherd f-000123 sdc_suspected");
  auto nodes = launcher.cli().ShowNodes();
  ASSERT_TRUE(nodes.ok());
  EXPECT_TRUE((*nodes)[2].state.drain);
  EXPECT_EQ(ShepherdStateOf((*nodes)[2].state), NodeState::kCordoned);

  ASSERT_TRUE(launcher.cli().ResumeNode("n2").ok());
  EXPECT_TRUE(WaitFor(seconds(30), [] {
    return LocalCluster::Sh({"sinfo", "-n", "n2", "-h", "-o", "%T"}) == "idle";
  }));
  EXPECT_EQ(LocalCluster::Sh({"sinfo", "-n", "n2", "-h", "-o", "%E"}), "none");
  EXPECT_EQ(launcher.cli().DrainNode("n2", "").code(), Code::kInvalidArgument);
  EXPECT_FALSE(launcher.cli().DrainNode("no-such-node", "shepherd x").ok());
}

// The reconcile rules against live Slurm: an operator's drain is followed and never undone, Shepherd's own
// cordon is drained in Slurm with its reason, and resumed only after an operator returned it in Shepherd.
TEST(SlurmCluster, ReconcileFollowsOperatorDrainsAndAppliesShepherdsOwn) {
  REQUIRE_CLUSTER();
  JobRunner launcher = MakeLauncher();
  auto view = ReadSlurmView(launcher.cli());
  ASSERT_TRUE(view.ok()) << view.status().message();
  std::vector<Node> mine;
  for (const NodeChange& c : Reconcile({view->nodes, view->topology, {}, {}, 80, "H100"}))
    mine.push_back(c.record);
  ASSERT_EQ(mine.size(), 5u);
  std::set<std::string> drained_by_shepherd;
  auto reconcile = [&] {
    auto v = ReadSlurmView(launcher.cli());
    EXPECT_TRUE(v.ok());
    return Reconcile({v->nodes, v->topology, mine, drained_by_shepherd, 80, "H100"});
  };

  LocalCluster::Sh({"scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=operator: bad psu"});
  mine[2].schedulable = false;
  mine[2].reason = "f-000123 sdc_suspected";
  auto changes = reconcile();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, NodeChangeKind::kCordon);
  EXPECT_EQ(changes[0].node, "n1");
  EXPECT_EQ(changes[0].reason, "slurm: IDLE+DRAIN: operator: bad psu");
  EXPECT_EQ(changes[1].kind, NodeChangeKind::kDrainInSlurm);
  EXPECT_EQ(changes[1].node, "n2");
  // Apply them as the controller would.
  mine[1].schedulable = false;
  mine[1].reason = changes[0].reason;
  ASSERT_TRUE(launcher.cli().DrainNode("n2", changes[1].reason).ok());
  drained_by_shepherd.insert("n2");
  EXPECT_EQ(LocalCluster::Sh({"sinfo", "-n", "n2", "-h", "-o", "%E"}), "shepherd f-000123 sdc_suspected");
  EXPECT_TRUE(reconcile().empty());  // stable once applied

  // An operator returns both nodes to service in Shepherd. Only Shepherd's own drain is undone in Slurm.
  for (int i : {1, 2}) mine[i].schedulable = true, mine[i].reason.clear();
  changes = reconcile();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, NodeChangeKind::kCordon);
  EXPECT_EQ(changes[0].node, "n1");
  EXPECT_EQ(changes[1].kind, NodeChangeKind::kResumeInSlurm);
  EXPECT_EQ(changes[1].node, "n2");
  ASSERT_TRUE(launcher.cli().ResumeNode("n2").ok());
  EXPECT_TRUE(WaitFor(seconds(30), [] {
    return LocalCluster::Sh({"sinfo", "-n", "n2", "-h", "-o", "%T"}) == "idle";
  }));
  EXPECT_EQ(LocalCluster::Sh({"sinfo", "-n", "n1", "-h", "-o", "%E"}), "operator: bad psu");

  LocalCluster::Sh({"scontrol", "update", "NodeName=n1", "State=RESUME"});
  EXPECT_TRUE(WaitFor(seconds(30), [] {
    return LocalCluster::Sh({"sinfo", "-n", "n1", "-h", "-o", "%T"}) == "idle";
  }));
}

TEST(SlurmCluster, AllocationWithSpare) {
  REQUIRE_CLUSTER();
  JobRunner launcher = MakeLauncher();
  AllocationRequest req;
  req.name = "shepherd-job-test";
  req.nodes = 4;
  req.spares = 1;
  req.work_dir = Work("");
  auto t0 = std::chrono::steady_clock::now();
  auto id = launcher.SubmitAllocation(req);
  ASSERT_TRUE(id.ok()) << id.status().message();
  g_allocation = *id;
  Result<Allocation> alloc = NotFound("not shown yet");
  ASSERT_TRUE(WaitFor(seconds(120), [&] {
    alloc = launcher.ShowAllocation(g_allocation);
    return alloc.ok() && alloc->state == SlurmJobState::kRunning;
  })) << (alloc.ok() ? alloc->reason : alloc.status().message());
  std::cout << "[measure] allocation of 5 nodes running after " << Since(t0) << " s\n";
  EXPECT_EQ(alloc->job_id, g_allocation);
  EXPECT_EQ(alloc->nodes, (std::vector<std::string>{"n0", "n1", "n2", "n3", "n4"}));
  EXPECT_EQ(LocalCluster::Sh({"squeue", "-h", "-j", g_allocation, "-o", "%T %D"}), "RUNNING 5");
  EXPECT_EQ(launcher.ShowAllocation("999999").status().code(), Code::kNotFound);
}

// Four real PyTorch DDP ranks (gloo on 127.0.0.1) as one srun step, laid out against Slurm's default
// order: rank 0 on n3, 1 on n1, 2 on n0, 3 on n2; n4 is the spare.
TEST(SlurmCluster, DdpStepRunsEachRankWherePlaced) {
  REQUIRE_CLUSTER();
  ASSERT_FALSE(g_allocation.empty());
  JobRunner launcher = MakeLauncher();
  std::vector<std::string> where{"n3", "n1", "n0", "n2"};
  std::string out = Work("ddp");
  ::mkdir(out.c_str(), 0755);
  StepSpec spec;
  spec.job_id = g_allocation;
  spec.name = "shepherd-a1";
  spec.placement = Layout(where);
  spec.command = RecordingCommand(out, "exec /usr/bin/python3 " SHEPHERD_SOURCE_DIR
                                       "/tests/e2e/train_ddp.py --steps 5 --ckpt-every 0 --sdc-every 0");
  spec.env = {{"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(29500 + ::getpid() % 1000)},
              {"SHEPHERD_JOB", "job-test"}};
  spec.log_path = out + "/step.log";
  spec.cwd = out;
  auto t0 = std::chrono::steady_clock::now();
  auto step = launcher.StartStep(spec);
  ASSERT_TRUE(step.ok()) << step.status().message();
  std::cout << "[measure] srun step " << step->step_id << " running after " << Since(t0) << " s\n";
  std::optional<ExitStatus> exit;
  ASSERT_TRUE(WaitFor(seconds(300), [&] { return (exit = launcher.PollStep(*step)).has_value(); }))
      << ReadFile(spec.log_path);
  std::cout << "[measure] 4-rank DDP step (5 steps) done after " << Since(t0) << " s\n";
  EXPECT_EQ(exit->exit_code, 0) << ReadFile(spec.log_path);
  std::string log = ReadFile(spec.log_path);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ReadFile(out + "/rank-" + std::to_string(r) + ".txt"),
              "node=" + where[r] + " rank=" + std::to_string(r) + " world=4 local=0/1 coords=0,0," +
                  std::to_string(r) + " gpu=0 job=job-test\n");
    EXPECT_NE(log.find("rank " + std::to_string(r) + ": done at step 5"), std::string::npos) << log;
  }
}

// Two ranks sharing n1 see LOCAL_RANK 0 and 1; a rank placed on a node outside the step's layout is
// impossible by construction, so the wrapper's refusal is covered by step_env_test.
TEST(SlurmCluster, TwoRanksOnOneNodeGetLocalRanks) {
  REQUIRE_CLUSTER();
  ASSERT_FALSE(g_allocation.empty());
  JobRunner launcher = MakeLauncher();
  std::string out = Work("local");
  ::mkdir(out.c_str(), 0755);
  StepSpec spec;
  spec.job_id = g_allocation;
  spec.name = "shepherd-a2";
  spec.placement = Layout({"n1", "n4", "n1"});
  spec.placement.ranks[2].gpu = 1;
  spec.command = RecordingCommand(out, "true");
  spec.log_path = out + "/step.log";
  auto step = launcher.StartStep(spec);
  ASSERT_TRUE(step.ok()) << step.status().message();
  std::optional<ExitStatus> exit;
  ASSERT_TRUE(WaitFor(seconds(60), [&] { return (exit = launcher.PollStep(*step)).has_value(); }));
  EXPECT_EQ(exit->exit_code, 0) << ReadFile(spec.log_path);
  EXPECT_EQ(ReadFile(out + "/rank-0.txt"), "node=n1 rank=0 world=3 local=0/2 coords=0,0,0 gpu=0 job=\n");
  EXPECT_EQ(ReadFile(out + "/rank-1.txt"), "node=n4 rank=1 world=3 local=0/1 coords=0,0,1 gpu=0 job=\n");
  EXPECT_EQ(ReadFile(out + "/rank-2.txt"), "node=n1 rank=2 world=3 local=1/2 coords=0,0,2 gpu=1 job=\n");

  // A node outside the allocation: Slurm refuses the step, and StartStep says so.
  StepSpec outside = spec;
  outside.name = "shepherd-a2b";
  outside.placement = Layout({"n1", "n9"});
  outside.log_path = out + "/outside.log";
  auto refused = launcher.StartStep(outside);
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << ReadFile(outside.log_path);
}

// 64 ranks, more than the cluster's 10 CPUs, in a layout Slurm would not choose (rank r on n((3r + 1) mod 5)),
// TP 2 × DP 8 × PP 4, asking for both GPUs of each node: every task reads its own record of the step's
// rank table (written here, copied to the nodes with sbcast) and writes what it got.
TEST(SlurmCluster, SixtyFourRanksEachReadTheirOwnRankTableEntry) {
  REQUIRE_CLUSTER();
  ASSERT_FALSE(g_allocation.empty());
  JobRunner launcher = MakeLauncher();
  std::string out = Work("r64");
  ::mkdir(out.c_str(), 0755);
  constexpr int kRanks = 64;
  StepSpec spec;
  spec.job_id = g_allocation;
  spec.name = "shepherd-a64";
  std::map<std::string, int> count;  // ranks per node so far: each rank's LOCAL_RANK, GPU = LOCAL_RANK % 2
  std::vector<int> local(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const std::string node = "n" + std::to_string((3 * r + 1) % 5);
    local[r] = count[node]++;
    spec.placement.ranks.push_back(
        {.rank = r, .node = node, .gpu = local[r] % 2, .tp = r % 2, .pp = r / 16, .dp = (r / 2) % 8});
  }
  spec.command = {"sh", "-c",
                  "echo \"node=$SLURMD_NODENAME rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
                  "coords=$SHEPHERD_RANK_COORDS gpu=$CUDA_VISIBLE_DEVICES gres=$SLURM_GPUS_ON_NODE\" > " +
                      out + "/rank-$SLURM_PROCID.txt",
                  "rank"};
  spec.gpus_per_node = 2;
  spec.log_path = out + "/step.log";
  auto t0 = std::chrono::steady_clock::now();
  auto step = launcher.StartStep(spec);
  ASSERT_TRUE(step.ok()) << step.status().message();
  std::optional<ExitStatus> exit;
  ASSERT_TRUE(WaitFor(seconds(120), [&] { return (exit = launcher.PollStep(*step)).has_value(); }))
      << ReadFile(spec.log_path);
  std::cout << "[measure] 64-rank step (rank table by sbcast) done after " << Since(t0) << " s\n";
  EXPECT_EQ(exit->exit_code, 0) << ReadFile(spec.log_path);
  // The copy every node read (one host here, so one file), the same bytes as the table written.
  const std::string copy = "/tmp/shepherd-" + g_allocation + "-shepherd-a64.ranks";
  EXPECT_EQ(ReadFile(copy), ReadFile(spec.log_path + ".ranks"));
  EXPECT_NE(ReadFile(copy).find("ranks=64 "), std::string::npos);
  for (int r = 0; r < kRanks; ++r) {
    const std::string node = "n" + std::to_string((3 * r + 1) % 5);
    EXPECT_EQ(ReadFile(out + "/rank-" + std::to_string(r) + ".txt"),
              "node=" + node + " rank=" + std::to_string(r) + " world=64 local=" + std::to_string(local[r]) + "/" +
                  std::to_string(count[node]) + " coords=" + std::to_string(r % 2) + "," + std::to_string(r / 16) +
                  "," + std::to_string((r / 2) % 8) + " gpu=" + std::to_string(local[r] % 2) + " gres=2\n")
        << "rank " << r;
  }
  ::unlink(copy.c_str());
}

TEST(SlurmCluster, StopStepWithGrace) {
  REQUIRE_CLUSTER();
  ASSERT_FALSE(g_allocation.empty());
  JobRunner launcher = MakeLauncher();
  std::string out = Work("stop");
  ::mkdir(out.c_str(), 0755);
  // Ranks that exit cleanly on SIGTERM.
  StepSpec polite;
  polite.job_id = g_allocation;
  polite.name = "shepherd-a3";
  polite.placement = Layout({"n0", "n1"});
  polite.command = {"sh", "-c",
                    "trap 'echo term > " + out + "/term-$RANK; exit 0' TERM; touch " + out +
                        "/up-$RANK; while :; do sleep 0.1; done"};
  polite.log_path = out + "/polite.log";
  auto step = launcher.StartStep(polite);
  ASSERT_TRUE(step.ok()) << step.status().message();
  ASSERT_TRUE(WaitFor(seconds(30), [&] {
    return ::access((out + "/up-0").c_str(), F_OK) == 0 && ::access((out + "/up-1").c_str(), F_OK) == 0;
  }));
  auto t0 = std::chrono::steady_clock::now();
  auto exit = launcher.StopStep(*step, seconds(20));
  ASSERT_TRUE(exit.ok()) << exit.status().message();
  double polite_s = Since(t0);
  std::cout << "[measure] step stopped by SIGTERM after " << polite_s << " s\n";
  EXPECT_LT(polite_s, 20.0);
  EXPECT_EQ(ReadFile(out + "/term-0"), "term\n");
  EXPECT_EQ(ReadFile(out + "/term-1"), "term\n");

  // Ranks that ignore SIGTERM are killed after the grace period.
  StepSpec stubborn = polite;
  stubborn.name = "shepherd-a4";
  stubborn.command = {"sh", "-c",
                      "trap '' TERM; touch " + out + "/stubborn-$RANK; while :; do sleep 0.1; done"};
  stubborn.log_path = out + "/stubborn.log";
  auto step2 = launcher.StartStep(stubborn);
  ASSERT_TRUE(step2.ok()) << step2.status().message();
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return ::access((out + "/stubborn-1").c_str(), F_OK) == 0; }));
  t0 = std::chrono::steady_clock::now();
  auto exit2 = launcher.StopStep(*step2, seconds(3));
  ASSERT_TRUE(exit2.ok()) << exit2.status().message();
  double stubborn_s = Since(t0);
  std::cout << "[measure] step ignoring SIGTERM gone after " << stubborn_s << " s (grace 3 s)\n";
  EXPECT_GE(stubborn_s, 3.0);
  EXPECT_LT(stubborn_s, 60.0);
  auto steps = launcher.cli().ShowSteps(g_allocation);
  ASSERT_TRUE(steps.ok());
  for (const SlurmStep& s : *steps) EXPECT_NE(s.name, "shepherd-a4") << s.id << " " << s.state;
}

// A node of the allocation crashes (slurmd and the step's processes on it killed) while real DDP training
// runs on n0..n3 and checkpoints every 5 steps. Measured fact this test pins down: with --no-kill the
// allocation survives without the node, the step on it is killed, and a new step on the remaining nodes
// plus the spare n4 resumes the training from the newest checkpoint.
TEST(SlurmCluster, NodeLossKeepsTheAllocationAndTheSpareResumesTraining) {
  REQUIRE_CLUSTER();
  ASSERT_FALSE(g_allocation.empty());
  JobRunner launcher = MakeLauncher();
  std::string out = Work("loss");
  std::string ckpt = out + "/ckpt";
  ::mkdir(out.c_str(), 0755);
  const std::string train = "exec /usr/bin/python3 " SHEPHERD_SOURCE_DIR
                            "/tests/e2e/train_ddp.py --sdc-every 0 "
                            "--ckpt-every 5 --ckpt-dir " +
                            ckpt;
  StepSpec spec;
  spec.job_id = g_allocation;
  spec.name = "shepherd-a5";
  spec.placement = Layout({"n0", "n1", "n2", "n3"});
  spec.command = RecordingCommand(out, train + " --steps 100000 --step-sleep 0.05 --pg-timeout 60");
  spec.env = {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(30500 + ::getpid() % 1000)}};
  spec.log_path = out + "/a5.log";
  spec.cwd = out;
  auto step = launcher.StartStep(spec);
  ASSERT_TRUE(step.ok()) << step.status().message();
  ASSERT_TRUE(WaitFor(seconds(180), [&] { return ::access((ckpt + "/step-5.pt").c_str(), F_OK) == 0; }))
      << ReadFile(spec.log_path);

  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(LocalCluster::CrashNode("n3").empty());
  bool down = WaitFor(seconds(120), [&] {
    auto nodes = launcher.cli().ShowNodes();
    return nodes.ok() && ShepherdStateOf((*nodes)[3].state) == NodeState::kFailed;
  });
  EXPECT_TRUE(down);
  std::cout << "[measure] n3 failed in Slurm " << Since(t0) << " s after the crash\n";
  std::optional<ExitStatus> exit;
  EXPECT_TRUE(WaitFor(seconds(120), [&] { return (exit = launcher.PollStep(*step)).has_value(); }));
  std::cout << "[measure] the step on n3 ended " << Since(t0) << " s after the crash\n";
  std::vector<std::string> survivors{"n0", "n1", "n2", "n4"};
  EXPECT_TRUE(WaitFor(seconds(120), [&] {
    auto a = launcher.ShowAllocation(g_allocation);
    return a.ok() && a->nodes == survivors;
  }));
  auto alloc = launcher.ShowAllocation(g_allocation);
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(alloc->state, SlurmJobState::kRunning);
  EXPECT_EQ(alloc->nodes, survivors);

  // The newest checkpoint rank 0 completed (train_ddp.py writes step-N.pt by rename, so it is whole).
  int newest = 0;
  for (int n = 5; ::access((ckpt + "/step-" + std::to_string(n) + ".pt").c_str(), F_OK) == 0; n += 5)
    newest = n;
  ASSERT_GE(newest, 5);

  // Replacing the node: drain it in Slurm, then the next step on the spare, resuming from that checkpoint.
  ASSERT_TRUE(launcher.cli().DrainNode("n3", "shepherd f-000124 node_lost").ok());
  EXPECT_EQ(LocalCluster::Sh({"sinfo", "-n", "n3", "-h", "-o", "%E"}), "shepherd f-000124 node_lost");
  StepSpec next = spec;
  next.name = "shepherd-a6";
  next.placement = Layout(survivors);
  next.command = RecordingCommand(out, train + " --steps " + std::to_string(newest + 3));
  next.env["MASTER_PORT"] = std::to_string(31500 + ::getpid() % 1000);
  next.env["SHEPHERD_RESUME_CHECKPOINT"] = ckpt + "/step-" + std::to_string(newest) + ".pt";
  next.log_path = out + "/a6.log";
  auto step2 = launcher.StartStep(next);
  ASSERT_TRUE(step2.ok()) << step2.status().message();
  ASSERT_TRUE(WaitFor(seconds(300), [&] { return (exit = launcher.PollStep(*step2)).has_value(); }));
  std::string log = ReadFile(next.log_path);
  EXPECT_EQ(exit->exit_code, 0) << log;
  EXPECT_EQ(ReadFile(out + "/rank-3.txt"), "node=n4 rank=3 world=4 local=0/1 coords=0,0,3 gpu=0 job=\n");
  for (int r = 0; r < 4; ++r) {
    std::string rank = "rank " + std::to_string(r);
    EXPECT_NE(log.find(rank + ": resumed from step " + std::to_string(newest)), std::string::npos) << log;
    EXPECT_NE(log.find(rank + ": done at step " + std::to_string(newest + 3)), std::string::npos) << log;
  }

  // Hand the node back: slurmd again, then resume (ReturnToService=2 does not clear a drain).
  ASSERT_TRUE(LocalCluster::RestartSlurmd("n3"));
  ASSERT_TRUE(launcher.cli().ResumeNode("n3").ok());
  EXPECT_TRUE(WaitFor(seconds(60), [] {
    return LocalCluster::Sh({"sinfo", "-n", "n3", "-h", "-o", "%T"}) == "idle";
  }));
}

TEST(SlurmCluster, CancelAllocation) {
  REQUIRE_CLUSTER();
  ASSERT_FALSE(g_allocation.empty());
  JobRunner launcher = MakeLauncher();
  ASSERT_TRUE(launcher.CancelAllocation(g_allocation, seconds(60)).ok());
  auto job = launcher.ShowAllocation(g_allocation);
  if (job.ok()) {
    EXPECT_EQ(job->state, SlurmJobState::kCancelled);
  }
  EXPECT_EQ(LocalCluster::Sh({"squeue", "-h", "-j", g_allocation, "-t", "RUNNING,PENDING", "-o", "%i"}), "");
  EXPECT_TRUE(WaitFor(seconds(60), [] {
    return LocalCluster::Sh({"sinfo", "-h", "-N", "-o", "%T"}) == "idle\nidle\nidle\nidle\nidle";
  }));
}

// Only under ctest's slurm_constrain_devices_test (SHEPHERD_SLURM_CONSTRAIN_DEVICES=1): two nodes whose
// slurmd confines each step to the GPUs it holds (task/cgroup, ConstrainDevices=yes; the fake GPUs are the
// character devices 1,5 and 1,7). A task tries to read each GPU device: a step asking for both GPUs of its
// node opens both, one asking for one opens only that one, and one asking for none (what steps asked for
// before slurm.request_gpus) opens neither.
TEST(SlurmConstrainDevices, AStepOpensExactlyTheGpusItAskedFor) {
  REQUIRE_CLUSTER();
  JobRunner launcher = MakeLauncher();
  AllocationRequest req;
  req.name = "shepherd-job-constrain";
  req.nodes = 2;
  req.spares = 0;
  req.work_dir = Work("");
  auto id = launcher.SubmitAllocation(req);
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(WaitFor(seconds(120), [&] {
    auto a = launcher.ShowAllocation(*id);
    return a.ok() && a->state == SlurmJobState::kRunning;
  }));
  const std::string dev = LocalCluster::dir() + "/dev/gpu";
  const std::string out = Work("constrain");
  ::mkdir(out.c_str(), 0755);
  struct Case {
    int gpus;
    const char* seen;
  };
  for (const Case& c : {Case{2, "gpu0=open gpu1=open"}, Case{1, "gpu0=open gpu1=denied"},
                        Case{0, "gpu0=denied gpu1=denied"}}) {
    StepSpec spec;
    spec.job_id = *id;
    spec.name = "shepherd-g" + std::to_string(c.gpus);
    spec.placement = Layout({"n0", "n1"});
    spec.gpus_per_node = c.gpus;
    spec.command = {"sh", "-c",
                    "r=''; for g in 0 1; do if head -c 1 " + dev + "$g >/dev/null 2>&1; then s=open; else s=denied; "
                    "fi; r=\"$r${r:+ }gpu$g=$s\"; done; echo \"$r\" > " + out + "/" + spec.name + "-$RANK.txt",
                    "probe"};
    spec.log_path = out + "/" + spec.name + ".log";
    auto step = launcher.StartStep(spec);
    ASSERT_TRUE(step.ok()) << step.status().message();
    std::optional<ExitStatus> exit;
    ASSERT_TRUE(WaitFor(seconds(60), [&] { return (exit = launcher.PollStep(*step)).has_value(); }));
    EXPECT_EQ(exit->exit_code, 0) << ReadFile(spec.log_path);
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(ReadFile(out + "/" + spec.name + "-" + std::to_string(r) + ".txt"), std::string(c.seen) + "\n")
          << "--gres=gpu:" << c.gpus << " rank " << r << "\n" << ReadFile(spec.log_path);
  }
  EXPECT_TRUE(launcher.CancelAllocation(*id, seconds(60)).ok());
}

}  // namespace
}  // namespace shepherd::slurm
