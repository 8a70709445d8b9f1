// The Controller's side of "launcher": "slurm" (control/slurm_jobs.h, controller_slurm_launch.cpp): the
// orders it gives the launch worker and what it makes of the worker's events. In-memory store, fake clock;
// the worker and Slurm are played by the test (their real counterparts: tests/slurm/launch_cluster_test).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <set>

#include "control/controller.h"
#include "slurm/rank_env.h"
#include "tests/control/control_test_util.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/faulty_store.h"

namespace shepherd {
namespace {

using Kind = SlurmLaunchEvent::Kind;
using State = SlurmAllocationRecord::State;

class SlurmLaunchTest : public ::testing::Test {
 protected:
  SlurmLaunchTest() : store_(std::make_unique<FaultyStore>(NewMemoryStore())) {
    Reset();
    // Leaf l0: n0, n1, n2; leaf l1: n3. 8 GPUs each.
    for (const char* n : {"n0", "n1", "n2"}) AddNode(n, "l0");
    AddNode("n3", "l1");
  }
  void Reset() {
    ControllerOptions o;
    o.slurm = true;
    controller_ = std::make_unique<Controller>(
        store_.get(), &clock_, [this](std::function<void()> f) { posted_.push_back(std::move(f)); }, o);
    ASSERT_TRUE(controller_->Recover().ok());
    Drain();
  }
  void Drain() {
    while (!posted_.empty()) {
      auto f = std::move(posted_.front());
      posted_.pop_front();
      f();
    }
  }
  void AddNode(const std::string& id, const std::string& leaf) {
    controller_->UpsertNode(testing::MakeNode(id, leaf), false,
                            [](Result<NodeUpsert> r) { ASSERT_TRUE(r.ok()); });
    Drain();
  }
  // 16 GPUs at TP 8: two nodes, launched through Slurm with `spares` spare nodes.
  std::string Submit(const std::string& adopt = "", int spares = 1, int cp = 1) {
    JobSpec s = testing::MakeSpec(16, 8 / cp);
    s.parallelism.cp = cp;
    s.parallelism.dp /= cp;
    s.launcher = Launcher::kSlurm;
    s.resources.spare_nodes = spares;
    s.slurm.allocation = adopt;
    auto est = controller_->PlanFor(s);
    EXPECT_TRUE(est.ok());
    std::string id;
    controller_->SubmitJob(s, *est, [&](Result<JobView> r) {
      ASSERT_TRUE(r.ok()) << r.status().message();
      id = r->job.id;
    });
    Drain();
    return id;
  }
  void Send(SlurmLaunchEvent ev) {
    controller_->OnSlurmLaunch(ev);
    Drain();
  }
  std::optional<SlurmJobOrder> OrderOf(const SlurmOrders& o, const std::string& job) {
    for (const SlurmJobOrder& j : o.jobs)
      if (j.job == job) return j;
    return std::nullopt;
  }
  JobView Job(const std::string& id) { return *controller_->GetJob(id); }
  // `seconds` of ticks, one a second.
  void Wait(int seconds) {
    for (int s = 0; s < seconds; ++s) {
      clock_.AdvanceSeconds(1);
      controller_->Tick();
      Drain();
    }
  }
  // Attempt 1's step ended with srun exit 143 and `srun_output` in its log.
  static SlurmLaunchEvent StepEnded(const std::string& job, const std::string& srun_output) {
    SlurmLaunchEvent ended{.kind = Kind::kStepEnded, .job = job, .attempt = 1};
    ended.exit.exit_code = 143;
    ended.log = slurm::ParseStepLog(srun_output);
    return ended;
  }
  std::set<std::string> Nodes(const std::string& id) {
    std::set<std::string> out;
    JobView j = Job(id);
    for (const RankSlot& r : j.attempt->placement.ranks) out.insert(r.node);
    return out;
  }
  // Submitted, allocated with `nodes` and its first step running.
  std::string Running(std::vector<std::string>* nodes, int spares = 1) {
    std::string id = Submit("", spares);
    *nodes = OrderOf(controller_->GetSlurmOrders(), id)->allocation.nodes;
    Send({.kind = Kind::kSubmitted, .job = id, .allocation = "41"});
    Send({.kind = Kind::kAllocated, .job = id, .allocation = "41", .nodes = *nodes});
    Send({.kind = Kind::kStepStarted, .job = id, .attempt = 1, .step_id = "41.0"});
    return id;
  }

  FakeClock clock_;
  std::deque<std::function<void()>> posted_;
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(SlurmLaunchTest, AJobWantsAnAllocationOfItsPlacementPlusTheClosestSpare) {
  std::string id = Submit();
  JobView j = Job(id);
  EXPECT_EQ(j.job.state, JobState::kLaunching);
  EXPECT_EQ(j.job.reason, "waiting for the Slurm allocation");
  SlurmOrders o = controller_->GetSlurmOrders();
  std::optional<SlurmJobOrder> order = OrderOf(o, id);
  ASSERT_TRUE(order);
  EXPECT_EQ(order->allocation.state, State::kWanted);
  EXPECT_FALSE(order->step);  // nothing runs before the allocation does
  std::set<std::string> placed = Nodes(id);
  ASSERT_EQ(order->allocation.nodes.size(), 3u);
  EXPECT_TRUE(placed.count(order->allocation.nodes[0]) && placed.count(order->allocation.nodes[1]));
  // The spare is the free node under the placement's leaf (l0), not n3 under l1.
  std::string free_in_l0;
  for (const char* n : {"n0", "n1", "n2"})
    if (!placed.count(n)) free_in_l0 = n;
  EXPECT_EQ(order->allocation.nodes[2], free_in_l0);
  // Agents are never given the ranks of a job Slurm launches.
  EXPECT_FALSE(controller_->GetJob(id)->launch);
}

TEST_F(SlurmLaunchTest, TheStepRunsInTheAllocationWithTheAgentsEnvironment) {
  std::string id = Submit();
  std::vector<std::string> nodes = OrderOf(controller_->GetSlurmOrders(), id)->allocation.nodes;
  Send({.kind = Kind::kSubmitted, .job = id, .allocation = "41"});
  EXPECT_EQ(Job(id).job.reason, "waiting for Slurm allocation 41");
  EXPECT_FALSE(OrderOf(controller_->GetSlurmOrders(), id)->step);
  Send({.kind = Kind::kAllocated, .job = id, .allocation = "41", .nodes = nodes});
  SlurmOrders o = controller_->GetSlurmOrders();
  std::optional<SlurmJobOrder> order = OrderOf(o, id);
  ASSERT_TRUE(order->step);
  const slurm::StepSpec& s = *order->step;
  EXPECT_EQ(s.job_id, "41");
  EXPECT_EQ(s.name, "shepherd-a1");
  EXPECT_EQ(s.command, (std::vector<std::string>{"python3", "train.py"}));
  // Shared by every rank: srun's environment.
  EXPECT_EQ(s.env.at("SHEPHERD_JOB"), id);
  EXPECT_EQ(s.env.at("SHEPHERD_ATTEMPT"), "1");
  EXPECT_EQ(s.env.at("WORLD_SIZE"), "16");
  EXPECT_EQ(s.env.at("MASTER_ADDR"), s.placement.ranks[0].node);  // hostname = id in these nodes
  EXPECT_FALSE(s.env.at("SHEPHERD_TOKEN").empty());
  EXPECT_EQ(s.env.count("RANK"), 0u);
  // Per rank: the tables shepherd-slurm-rank applies, as ComposeRankEnv gives them to agents.
  ASSERT_EQ(s.rank_env.size(), 16u);
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(s.rank_env[r].at("RANK"), std::to_string(r));
    EXPECT_EQ(s.rank_env[r].at("LOCAL_RANK"), std::to_string(r % 8));
    // The same for every rank (per_node binding), yet a table: Slurm's gres/gpu plugin rewrites or unsets
    // srun's value in each task on a GPU node; shepherd-slurm-rank applies the tables after it.
    EXPECT_EQ(s.rank_env[r].at("CUDA_VISIBLE_DEVICES"), "0,1,2,3,4,5,6,7");
  }
  EXPECT_EQ(s.env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(Job(id).job.state, JobState::kLaunching);
  Send({.kind = Kind::kStepStarted, .job = id, .attempt = 1, .step_id = "41.0"});
  EXPECT_EQ(Job(id).job.state, JobState::kRunning);
  // A worker that started attempt 1 is told to keep it running, without composing its environment again.
  std::optional<SlurmJobOrder> again = OrderOf(controller_->GetSlurmOrders({{id, 1}}), id);
  EXPECT_TRUE(again->step_wanted);
  EXPECT_FALSE(again->step);
}

// Slurm's reason a pending allocation waits shows in the job's reason: "Resources" clears by itself,
// "PartitionTimeLimit" never does, and an operator must be able to tell them apart.
TEST_F(SlurmLaunchTest, APendingAllocationShowsSlurmsReasonInTheJobs) {
  std::string id = Submit();
  Send({.kind = Kind::kSubmitted, .job = id, .allocation = "41"});
  Send({.kind = Kind::kPending, .job = id, .allocation = "41", .message = "PartitionTimeLimit"});
  EXPECT_EQ(Job(id).job.state, JobState::kLaunching);
  EXPECT_EQ(Job(id).job.reason, "waiting for Slurm allocation 41 (Slurm: PartitionTimeLimit)");
  std::vector<std::string> nodes = OrderOf(controller_->GetSlurmOrders(), id)->allocation.nodes;
  Send({.kind = Kind::kAllocated, .job = id, .allocation = "41", .nodes = nodes});
  Send({.kind = Kind::kStepStarted, .job = id, .attempt = 1, .step_id = "41.0"});
  EXPECT_EQ(Job(id).job.state, JobState::kRunning);
  // A late notice changes nothing once the job runs.
  Send({.kind = Kind::kPending, .job = id, .allocation = "41", .message = "Priority"});
  EXPECT_EQ(Job(id).job.state, JobState::kRunning);
}

// A probe: an allocation Slurm had not started named a node an admin drained meanwhile; it stayed pending
// (ReqNodeNotAvail) with other nodes free. It is given back and the job placed off the node.
TEST_F(SlurmLaunchTest, AnAllocationNotStartedIsReplacedOffANodeDrainedMeanwhile) {
  AddNode("n4", "l1");  // room elsewhere: l1 has n3 and n4
  std::string id = Submit();
  std::vector<std::string> wanted = OrderOf(controller_->GetSlurmOrders(), id)->allocation.nodes;
  Send({.kind = Kind::kSubmitted, .job = id, .allocation = "41"});
  const std::string drained = wanted[0];
  controller_->PatchNode(drained, {.schedulable = false, .reason = "admin: bad DIMM"},
                         [](Result<NodeView> r) { ASSERT_TRUE(r.ok()); });
  Drain();
  Wait(1);
  JobView j = Job(id);
  EXPECT_EQ(j.job.state, JobState::kLaunching);
  EXPECT_EQ(j.job.attempt, 2);
  ASSERT_TRUE(j.attempt);
  EXPECT_THAT(j.attempt->reason, ::testing::HasSubstr(drained + " no longer usable")) << j.attempt->reason;
  EXPECT_EQ(Nodes(id).count(drained), 0u);
  SlurmOrders o = controller_->GetSlurmOrders();
  EXPECT_EQ(o.cancel, std::vector<std::string>{"41"});  // the pending allocation is given back
  std::optional<SlurmJobOrder> order = OrderOf(o, id);
  ASSERT_TRUE(order);
  EXPECT_EQ(order->allocation.state, State::kWanted);
  EXPECT_EQ(std::count(order->allocation.nodes.begin(), order->allocation.nodes.end(), drained), 0);
  EXPECT_EQ(controller_->GetFailures({.job = id})->size(), 0u);  // nothing blamed
}

// The step of an attempt the database does not hold yet is not started: a daemon that then stopped would
// find a step it never heard of (as agents' ranks were, AgentBoard::HoldUntilSaved).
TEST_F(SlurmLaunchTest, NoAllocationIsRequestedNorStepStartedBeforeItIsDurable) {
  store_->HoldWrites();
  JobSpec spec = testing::MakeSpec(16, 8);
  spec.launcher = Launcher::kSlurm;
  std::optional<Result<JobView>> submitted;
  controller_->SubmitJob(spec, *controller_->PlanFor(spec),
                         [&](Result<JobView> r) { submitted = std::move(r); });
  Drain();
  EXPECT_FALSE(submitted) << "acknowledged before its COMMIT";
  const std::string id = "job-000001";
  ASSERT_TRUE(controller_->GetJob(id).ok());  // in memory already
  // Nor is its allocation requested before the want is durable (a successor would not know the request),
  // and the request has a name of its own for sbatch's comment.
  const SlurmJobOrder wanted = *OrderOf(controller_->GetSlurmOrders(), id);
  EXPECT_EQ(wanted.allocation.state, State::kWanted);
  EXPECT_FALSE(wanted.allocation_durable);
  EXPECT_EQ(wanted.allocation.request.size(), 16u);
  std::vector<std::string> nodes = wanted.allocation.nodes;
  Send({.kind = Kind::kSubmitted, .job = id, .allocation = "41"});
  Send({.kind = Kind::kAllocated, .job = id, .allocation = "41", .nodes = nodes});
  std::optional<SlurmJobOrder> held = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(held);
  EXPECT_FALSE(held->step_wanted);
  EXPECT_FALSE(held->step);
  store_->ReleaseHeld();
  Drain();
  ASSERT_TRUE(submitted && submitted->ok());
  std::optional<SlurmJobOrder> saved = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(saved);
  EXPECT_TRUE(saved->allocation_durable);
  EXPECT_TRUE(saved->step_wanted);
  EXPECT_TRUE(saved->step);
}

// The request's name survives a daemon restart (it is how the next daemon finds an allocation whose id was
// never recorded), and a record written before requests were named still loads, with none.
TEST_F(SlurmLaunchTest, TheRequestsNameIsDurableAndOldRecordsLoadWithout) {
  const std::string id = Submit();
  const std::string request = OrderOf(controller_->GetSlurmOrders(), id)->allocation.request;
  ASSERT_EQ(request.size(), 16u);
  EXPECT_NE(OrderOf(controller_->GetSlurmOrders(), Submit())->allocation.request, request);  // random
  Reset();
  std::optional<SlurmJobOrder> again = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->allocation.request, request);
  EXPECT_TRUE(again->allocation_durable);

  WriteBatch old;
  old.Put({Collection::kMeta, SlurmJobs::kKeyPrefix + id, id,
           R"({"state": "pending", "id": "41", "nodes": ["n0", "n1", "n2"], "adopted": false})"});
  store_->Write(std::move(old), [](Status s) { ASSERT_TRUE(s.ok()); });
  Reset();
  again = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->allocation.id, "41");
  EXPECT_EQ(again->allocation.request, "");
}

// Context parallelism under Slurm: the ranks get the fourth value the agents give (scheduler/rank_env.h), so
// the Python client names the cp groups as it does for agent-launched ranks.
TEST_F(SlurmLaunchTest, AContextParallelStepGivesEveryRankItsCpCoordinate) {
  std::string id = Submit("", 1, /*cp=*/2);  // TP 4, CP 2, DP 2 on 16 GPUs
  std::vector<std::string> nodes = OrderOf(controller_->GetSlurmOrders(), id)->allocation.nodes;
  Send({.kind = Kind::kSubmitted, .job = id, .allocation = "41"});
  Send({.kind = Kind::kAllocated, .job = id, .allocation = "41", .nodes = nodes});
  std::optional<SlurmJobOrder> order = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(order && order->step);
  const slurm::StepSpec& s = *order->step;
  EXPECT_EQ(s.env.at("SHEPHERD_PARALLELISM"), "4,1,2,2");
  ASSERT_EQ(s.rank_env.size(), 16u);
  // rank = tp + TP·(cp + CP·(dp + DP·pp)): rank 6 is tp 2, cp 1, dp 0; rank 13 is tp 1, cp 1, dp 1.
  EXPECT_EQ(s.rank_env[6].at("SHEPHERD_RANK_COORDS"), "2,0,0,1");
  EXPECT_EQ(s.rank_env[13].at("SHEPHERD_RANK_COORDS"), "1,0,1,1");
  // And shepherd-slurm-rank hands exactly those to the task (the tables, nothing derived).
  slurm::EnvMap task = slurm::EncodeLayout(s.placement);
  auto tables = slurm::EncodeRankTables(s.rank_env);
  ASSERT_TRUE(tables.ok());
  task.insert(tables->begin(), tables->end());
  task["SLURM_PROCID"] = "13";
  task["SLURMD_NODENAME"] = s.placement.ranks[13].node;
  auto env = slurm::RankEnvironment(task);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->at("SHEPHERD_RANK_COORDS"), "1,0,1,1");
}

TEST_F(SlurmLaunchTest, ANodeFailureIsReplacedByTheAllocationsOwnSpare) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  const std::string lost = Job(id).attempt->placement.ranks[8].node;
  SlurmLaunchEvent ended{.kind = Kind::kStepEnded, .job = id, .attempt = 1};
  ended.exit.exit_code = 1;
  ended.log = slurm::ParseStepLog("srun: error: Node failure on " + lost + "\nsrun: error: " + nodes[0] +
                                  ": tasks 0-7: Killed\n");
  Send(ended);
  auto f = controller_->GetFailures({.job = id});
  ASSERT_TRUE(f.ok());
  ASSERT_FALSE(f->empty());
  EXPECT_EQ(f->front().kind, FindingKind::kNodeLost);
  EXPECT_EQ(f->front().nodes, std::vector<std::string>{lost});
  EXPECT_EQ(f->size(), 1u);  // the killed tasks of the replaced attempt are no further findings
  JobView j = Job(id);
  EXPECT_EQ(j.job.attempt, 2);
  std::set<std::string> now = Nodes(id);
  EXPECT_EQ(now.count(lost), 0u);
  EXPECT_EQ(now.count(nodes[2]), 1u);  // the spare the allocation holds, never n3 outside it
  EXPECT_EQ(controller_->GetNode(lost)->state, NodeState::kFailed);
  std::optional<SlurmJobOrder> order = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(order->step);
  EXPECT_EQ(order->step->name, "shepherd-a2");
  EXPECT_EQ(order->allocation.id, "41");  // the same allocation
  // The end of attempt 1's step arriving again changes nothing.
  Send(ended);
  EXPECT_EQ(controller_->GetFailures({.job = id})->size(), 1u);
  EXPECT_EQ(Job(id).job.attempt, 2);
}

TEST_F(SlurmLaunchTest, ASuspendedAllocationIsNotJudgedAndSilenceCountsFromItsResume) {
  // scontrol suspend (or preemption by suspension) stops every rank. Before, their silence was
  // heartbeat_lost: the step was stopped and restarted, spending a restart and the steps since the last
  // checkpoint.
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  auto findings = [&] { return controller_->GetFailures({.job = id})->size(); };
  Send({.kind = Kind::kSuspended, .job = id, .allocation = "41"});
  EXPECT_EQ(Job(id).job.reason, "Slurm allocation 41 is suspended");
  Wait(300);  // past the startup grace and any heartbeat timeout
  EXPECT_EQ(findings(), 0u);
  Result<Json> health = controller_->GetHealth(id);
  ASSERT_TRUE(health.ok());
  EXPECT_EQ((*health)["status"], "suspended");
  EXPECT_EQ((*health)["checks"]["heartbeat"]["lost_ranks"], Json::array()) << health->dump();
  EXPECT_EQ(Job(id).job.attempt, 1);
  Send({.kind = Kind::kResumed, .job = id, .allocation = "41"});
  Wait(5);
  EXPECT_EQ(findings(), 0u);  // silent 5 s since the resume: within the 10 s timeout
  Wait(10);                   // still silent 15 s after it: lost
  auto f = controller_->GetFailures({.job = id});
  ASSERT_EQ(f->size(), 1u);
  EXPECT_EQ(f->front().kind, FindingKind::kHeartbeatLost);
}

TEST_F(SlurmLaunchTest, SlurmDroppingANodeFromTheAllocationIsANodeLoss) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  const std::string lost = Job(id).attempt->placement.ranks[0].node;
  std::vector<std::string> left;
  for (const std::string& n : nodes)
    if (n != lost) left.push_back(n);
  Send({.kind = Kind::kAllocated, .job = id, .allocation = "41", .nodes = left});
  auto f = controller_->GetFailures({.job = id});
  ASSERT_EQ(f->size(), 1u);
  EXPECT_EQ(f->front().kind, FindingKind::kNodeLost);
  EXPECT_EQ(f->front().nodes, std::vector<std::string>{lost});
  EXPECT_EQ(Nodes(id).count(lost), 0u);
  // The allocation's own spare takes the lost node's ranks, inside the same allocation. Before, the view
  // of the allocation had already lost the node, so nothing could be replaced: the job was queued, the
  // allocation given back, and the new one never requested (the job stayed launching).
  EXPECT_EQ(Nodes(id).count(nodes[2]), 1u);
  EXPECT_EQ(Job(id).job.attempt, 2);
  SlurmOrders o = controller_->GetSlurmOrders();
  EXPECT_TRUE(o.cancel.empty());
  EXPECT_EQ(OrderOf(o, id)->allocation.id, "41");
  EXPECT_EQ(OrderOf(o, id)->allocation.state, State::kRunning);
  EXPECT_NE(f->front().actions.front().find("fail " + lost), std::string::npos) << f->front().actions.front();
  for (const std::string& a : f->front().actions) EXPECT_EQ(a.find("queue"), std::string::npos) << a;
}

// No spare in the allocation and the plan does not fit what is left of it: the job is requeued, its
// allocation given back, and a new one requested for its new placement (never the failed node).
TEST_F(SlurmLaunchTest, WithNoSpareLeftTheJobIsRequeuedIntoANewAllocation) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes, /*spares=*/0);
  ASSERT_EQ(nodes.size(), 2u);
  const std::string lost = nodes[1];
  SlurmLaunchEvent ended{.kind = Kind::kStepEnded, .job = id, .attempt = 1};
  ended.exit.exit_code = 1;
  ended.log = slurm::ParseStepLog("srun: error: Node failure on " + lost + "\n");
  Send(ended);
  SlurmOrders o = controller_->GetSlurmOrders();
  EXPECT_EQ(o.cancel, std::vector<std::string>{"41"});
  std::optional<SlurmJobOrder> order = OrderOf(o, id);
  ASSERT_TRUE(order);
  EXPECT_EQ(order->allocation.state, State::kWanted);
  EXPECT_TRUE(order->allocation.id.empty());
  EXPECT_EQ(std::count(order->allocation.nodes.begin(), order->allocation.nodes.end(), lost), 0);
  EXPECT_EQ(Job(id).job.attempt, 2);
  EXPECT_EQ(Job(id).job.state, JobState::kLaunching);
}

TEST_F(SlurmLaunchTest, AStepThatExitsZeroSucceedsAndTheAllocationIsCancelled) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  Send({.kind = Kind::kStepEnded, .job = id, .attempt = 1, .exit = {0, 0}});
  EXPECT_EQ(Job(id).job.state, JobState::kSucceeded);
  SlurmOrders o = controller_->GetSlurmOrders();
  EXPECT_FALSE(OrderOf(o, id));
  EXPECT_EQ(o.cancel, std::vector<std::string>{"41"});
  Send({.kind = Kind::kCancelled, .allocation = "41"});
  EXPECT_TRUE(controller_->GetSlurmOrders().cancel.empty());
}

TEST_F(SlurmLaunchTest, AFailedTaskIsAProcessExitOfItsRankWithoutBlame) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  const RankSlot r5 = Job(id).attempt->placement.ranks[5];
  SlurmLaunchEvent ended{.kind = Kind::kStepEnded, .job = id, .attempt = 1, .log_tail = "Traceback ..."};
  ended.exit.exit_code = 3;
  ended.log = slurm::ParseStepLog("srun: error: " + r5.node + ": task 5: Exited with exit code 3\n");
  Send(ended);
  auto f = controller_->GetFailures({.job = id});
  ASSERT_EQ(f->size(), 1u);
  EXPECT_EQ(f->front().kind, FindingKind::kProcessExit);
  EXPECT_EQ(f->front().ranks, std::vector<int>{5});
  EXPECT_EQ(f->front().exit_code, 3);
  EXPECT_EQ(f->front().log_tail, "Traceback ...");
  EXPECT_EQ(controller_->GetNode(r5.node)->state, NodeState::kAllocated);  // a clean exit blames nothing
  EXPECT_EQ(Job(id).job.attempt, 2);
  EXPECT_EQ(Nodes(id).count(r5.node), 1u);  // first time: the same nodes
}

TEST_F(SlurmLaunchTest, CancellingGivesTheAllocationBackButNeverAnAdoptedOne) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  controller_->CancelJob(id, "alice (submitter)", [](Result<JobView> r) { ASSERT_TRUE(r.ok()); });
  Drain();
  EXPECT_EQ(controller_->GetSlurmOrders().cancel, std::vector<std::string>{"41"});
  Send({.kind = Kind::kCancelled, .allocation = "41"});

  std::string adopted = Submit("77");
  std::optional<SlurmJobOrder> order = OrderOf(controller_->GetSlurmOrders(), adopted);
  ASSERT_TRUE(order);
  EXPECT_TRUE(order->allocation.adopted);
  EXPECT_EQ(order->allocation.id, "77");
  controller_->CancelJob(adopted, "alice (submitter)", [](Result<JobView> r) { ASSERT_TRUE(r.ok()); });
  Drain();
  EXPECT_TRUE(controller_->GetSlurmOrders().cancel.empty());
  EXPECT_FALSE(OrderOf(controller_->GetSlurmOrders(), adopted));
}

TEST_F(SlurmLaunchTest, AnAdoptedAllocationGetsTheJobPlacedInsideIt) {
  std::string id = Submit("77");
  // The site's allocation holds n2 and n3, which Shepherd's first placement did not choose.
  Send({.kind = Kind::kAllocated, .job = id, .allocation = "77", .nodes = {"n2", "n3"}});
  EXPECT_EQ(Nodes(id), (std::set<std::string>{"n2", "n3"}));
  SlurmOrders o = controller_->GetSlurmOrders();
  std::optional<SlurmJobOrder> order = OrderOf(o, id);
  ASSERT_TRUE(order->step);
  EXPECT_EQ(order->step->job_id, "77");
}

TEST_F(SlurmLaunchTest, TheAllocationSurvivesADaemonRestart) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  Reset();
  std::optional<SlurmJobOrder> order = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(order);
  EXPECT_EQ(order->allocation.state, State::kRunning);
  EXPECT_EQ(order->allocation.id, "41");
  EXPECT_EQ(order->allocation.nodes, nodes);
  ASSERT_TRUE(order->step);
  EXPECT_EQ(order->step->name, "shepherd-a1");
}

TEST_F(SlurmLaunchTest, AnAllocationThatEndsFailsTheJobWithSlurmsWords) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  Send({.kind = Kind::kAllocationEnded,
        .job = id,
        .allocation = "41",
        .message = "ended TIMEOUT (TimeLimit)"});
  JobView j = Job(id);
  EXPECT_EQ(j.job.state, JobState::kFailed);
  EXPECT_EQ(j.job.reason, "Slurm allocation 41: ended TIMEOUT (TimeLimit)");
  EXPECT_TRUE(controller_->GetSlurmOrders().cancel.empty());  // it is gone already
}

TEST_F(SlurmLaunchTest, AStepSlurmCancelledAtTheTimeLimitRestartsNothingAndTheJobEndsWithItsAllocation) {
  // Slurm's time limit sends the step SIGTERM: its tasks' ends were process exits, and the job was restarted
  // inside an allocation that was ending (the restart failed with it).
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  Send(StepEnded(id, "0: slurmstepd: error: *** STEP 41.0 ON " + nodes[0] +
                         " CANCELLED AT 2026-11-26T15:02:11 DUE TO TIME LIMIT ***\n"
                         "srun: error: " +
                         nodes[0] +
                         ": tasks 0-7: Terminated\n"
                         "srun: error: " +
                         nodes[1] + ": tasks 8-15: Terminated\n"));
  EXPECT_EQ(Job(id).job.reason,
            "Slurm cancelled the step of attempt 1 (time limit): the job ends with allocation 41");
  Wait(120);  // Slurm's KillWait and the worker's next look at the allocation
  EXPECT_EQ(controller_->GetFailures({.job = id})->size(), 0u);  // no process exit, no silence judged
  EXPECT_EQ(Job(id).job.attempt, 1);
  for (const std::string& n : nodes) EXPECT_NE(controller_->GetNode(n)->state, NodeState::kCordoned) << n;
  Send({.kind = Kind::kAllocationEnded,
        .job = id,
        .allocation = "41",
        .message = "ended TIMEOUT (TimeLimit)"});
  EXPECT_EQ(Job(id).job.state, JobState::kFailed);
  EXPECT_EQ(Job(id).job.reason, "Slurm allocation 41: ended TIMEOUT (TimeLimit)");
}

TEST_F(SlurmLaunchTest, ATimeLimitNoticeWhoseAllocationDoesNotEndIsJudgedAfterTheWait) {
  // The notice shares the step's log with the ranks' own output: should the allocation run on, the hold
  // ends after 300 s and the silent ranks are judged as any others.
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  Send(StepEnded(id, "0: slurmstepd: error: *** STEP 41.0 ON " + nodes[0] +
                         " CANCELLED AT 2026-11-26T15:02:11 DUE TO TIME LIMIT ***\n"));
  Wait(299);
  EXPECT_EQ(controller_->GetFailures({.job = id})->size(), 0u);
  Wait(30);
  auto f = controller_->GetFailures({.job = id});
  ASSERT_FALSE(f->empty());
  EXPECT_EQ(f->front().kind, FindingKind::kHeartbeatLost);
}

TEST_F(SlurmLaunchTest, AStepWhoseRanksAllFinishedSucceedsWhateverSrunsExitSays) {
  // After a daemon restart the step's srun was the earlier daemon's child: its exit is unknown. Every rank
  // had reported `finished`, and the job was restarted from its checkpoint all the same.
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  ReportBatch finished;
  for (int r = 0; r < 16; ++r) {
    Report f;
    f.rank = r;
    f.attempt = 1;
    f.time = clock_.Now();
    f.kind = ReportKind::kFinished;
    f.step = 1200;
    finished.reports.push_back({static_cast<size_t>(r), f});
  }
  controller_->IngestReports(id, finished, [](Result<IngestSummary> r) { ASSERT_TRUE(r.ok()); });
  Drain();
  EXPECT_EQ(Job(id).job.state, JobState::kRunning);  // a Slurm-launched job ends with its step
  SlurmLaunchEvent ended{.kind = Kind::kStepEnded, .job = id, .attempt = 1};
  ended.message = "the step ended while an earlier shepherdd was its srun's parent: its exit is unknown";
  Send(ended);
  EXPECT_EQ(controller_->GetFailures({.job = id})->size(), 0u);
  EXPECT_EQ(Job(id).job.state, JobState::kSucceeded) << Job(id).job.reason;
  EXPECT_EQ(Job(id).job.reason, "every rank reported finished (the step's exit is unknown)");
  EXPECT_EQ(Job(id).job.attempt, 1);
}

// A new daemon's worker has started nothing: the order tells it whether the attempt's step already ran, so
// that a step which ended while no daemon watched is reported ended, not started a second time (a tester's
// 250-step job trained twice from step 1 after a daemon restart).
TEST_F(SlurmLaunchTest, AnOrderSaysWhetherTheAttemptsStepAlreadyRan) {
  std::string id = Submit();
  std::vector<std::string> nodes = OrderOf(controller_->GetSlurmOrders(), id)->allocation.nodes;
  Send({.kind = Kind::kSubmitted, .job = id, .allocation = "41"});
  Send({.kind = Kind::kAllocated, .job = id, .allocation = "41", .nodes = nodes});
  std::optional<SlurmJobOrder> before = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(before && before->step);
  EXPECT_FALSE(before->step_ran);  // to start
  Send({.kind = Kind::kStepStarted, .job = id, .attempt = 1, .step_id = "41.0"});
  Reset();  // the daemon restarts: its worker knows of no step
  std::optional<SlurmJobOrder> after = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(after && after->step);
  EXPECT_TRUE(after->step_ran);
  EXPECT_EQ(after->attempt, 1);
}

TEST_F(SlurmLaunchTest, AStepAnOperatorCancelledIsAProcessExitAsBefore) {
  // scancel of the step alone (no cause in Slurm's notice): the allocation runs on; the ranks' ends are
  // judged.
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  Send(StepEnded(id, "0: slurmstepd: error: *** STEP 41.0 ON " + nodes[0] +
                         " CANCELLED AT 2026-11-26T15:02:11 ***\n"
                         "srun: error: " +
                         nodes[0] + ": tasks 0-7: Terminated\n"));
  auto f = controller_->GetFailures({.job = id});
  ASSERT_FALSE(f->empty());
  EXPECT_EQ(f->front().kind, FindingKind::kProcessExit);
  EXPECT_EQ(Job(id).job.attempt, 2);
}

TEST(SlurmLaunchRefused, WithoutSlurmTheLauncherFieldIsRefused) {
  FakeClock clock;
  std::unique_ptr<Store> store = NewMemoryStore();
  std::deque<std::function<void()>> posted;
  Controller c(store.get(), &clock, [&](std::function<void()> f) { posted.push_back(std::move(f)); }, {});
  ASSERT_TRUE(c.Recover().ok());
  JobSpec s = testing::MakeSpec(8, 8);
  s.launcher = Launcher::kSlurm;
  std::optional<Result<JobView>> out;
  c.SubmitJob(s, *c.PlanFor(s), [&](Result<JobView> r) { out = std::move(r); });
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status().code(), Code::kInvalidContent);
  ASSERT_EQ(out->status().fields().size(), 1u);
  EXPECT_EQ(out->status().fields()[0].field, "launcher");
}

}  // namespace
}  // namespace shepherd
