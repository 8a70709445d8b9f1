// The Controller's side of "launcher": "slurm" once the step runs: node failures and the allocation's
// spares, requeues, endings (time limits, cancels, operator's cancels), adopted allocations and daemon
// restarts. Fixture: slurm_launch_fixture.h.
#include "tests/control/slurm_launch_fixture.h"

namespace shepherd {
namespace {

TEST_F(SlurmLaunchTest, ANodeFailureIsReplacedByTheAllocationsOwnSpare) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  const std::string lost = Job(id).attempt->placement.ranks[8].node;
  SlurmLaunchEvent ended{.kind = Kind::kStepEnded, .job = id, .attempt = 1};
  ended.exit.exit_code = 1;
  ended.log = slurm::ParseStepLog("srun: error: Node failure on " + lost + "\nsrun: error: " + nodes[0] +
                                  ": tasks 0-7: Killed\n");
  Send(ended);
  auto f = controller_->view().GetFailures({.job = id});
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
  EXPECT_EQ(controller_->view().GetNode(lost)->state, NodeState::kFailed);
  std::optional<SlurmJobOrder> order = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(order->step);
  EXPECT_EQ(order->step->name, "shepherd-a2-o2");  // orders never repeat within the allocation
  EXPECT_EQ(order->allocation.id, "41");  // the same allocation
  // The end of attempt 1's step arriving again changes nothing.
  Send(ended);
  EXPECT_EQ(controller_->view().GetFailures({.job = id})->size(), 1u);
  EXPECT_EQ(Job(id).job.attempt, 2);
}

TEST_F(SlurmLaunchTest, ASuspendedAllocationIsNotJudgedAndSilenceCountsFromItsResume) {
  // scontrol suspend (or preemption by suspension) stops every rank. Before, their silence was
  // heartbeat_lost: the step was stopped and restarted, spending a restart and the steps since the last
  // checkpoint.
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  auto findings = [&] { return controller_->view().GetFailures({.job = id})->size(); };
  Send({.kind = Kind::kSuspended, .job = id, .allocation = "41"});
  EXPECT_EQ(Job(id).job.reason, "Slurm allocation 41 is suspended");
  Wait(300);  // past the startup grace and any heartbeat timeout
  EXPECT_EQ(findings(), 0u);
  Result<Json> health = controller_->view().GetHealth(id);
  ASSERT_TRUE(health.ok());
  EXPECT_EQ((*health)["status"], "suspended");
  EXPECT_EQ((*health)["checks"]["heartbeat"]["lost_ranks"], Json::array()) << health->dump();
  EXPECT_EQ(Job(id).job.attempt, 1);
  Send({.kind = Kind::kResumed, .job = id, .allocation = "41"});
  Wait(5);
  EXPECT_EQ(findings(), 0u);  // silent 5 s since the resume: within the 10 s timeout
  Wait(10);                   // still silent 15 s after it: lost
  auto f = controller_->view().GetFailures({.job = id});
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
  auto f = controller_->view().GetFailures({.job = id});
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
  auto f = controller_->view().GetFailures({.job = id});
  ASSERT_EQ(f->size(), 1u);
  EXPECT_EQ(f->front().kind, FindingKind::kProcessExit);
  EXPECT_EQ(f->front().ranks, std::vector<int>{5});
  EXPECT_EQ(f->front().exit_code, 3);
  EXPECT_EQ(f->front().log_tail, "Traceback ...");
  EXPECT_EQ(controller_->view().GetNode(r5.node)->state, NodeState::kAllocated);  // a clean exit blames nothing
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
  EXPECT_EQ(order->step->name, "shepherd-a1-o1");
  // The restarted daemon wrote no launch order yet: its worker starts no step before it has one.
  EXPECT_EQ(order->order, 1);
  EXPECT_FALSE(order->order_mine);
}

// The fence through the Controller (docs/slurm.md, "One step per attempt"): the wrapper's question is
// answered after a write made after the decision is durable; a restarted daemon's new order makes the
// earlier daemon's one stale.
TEST_F(SlurmLaunchTest, ARestartedDaemonsNewLaunchOrderMakesTheEarlierOneStale) {
  std::vector<std::string> nodes;
  std::string id = Running(&nodes);
  auto ask = [&](const std::string& allocation, int attempt, int64_t order) {
    std::optional<Result<bool>> answer;
    controller_->CheckSlurmOrder(id, allocation, attempt, order, [&](Result<bool> r) { answer = r; });
    Drain();
    EXPECT_TRUE(answer.has_value());
    return answer && answer->ok() && **answer;
  };
  EXPECT_TRUE(ask("41", 1, 1));
  EXPECT_FALSE(ask("41", 1, 2));
  EXPECT_FALSE(ask("40", 1, 1));
  Reset();
  EXPECT_TRUE(ask("41", 1, 1));  // still current: nothing newer was written
  Send({.kind = Kind::kOrderWanted, .job = id, .attempt = 1});
  std::optional<SlurmJobOrder> order = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(order);
  EXPECT_EQ(order->order, 2);
  EXPECT_TRUE(order->order_mine);  // durable (the memory store commits at once)
  EXPECT_EQ(order->step->name, "shepherd-a1-o2");
  EXPECT_FALSE(ask("41", 1, 1));
  EXPECT_TRUE(ask("41", 1, 2));
  // After another restart order 2 is still the current one: it is in the record.
  Reset();
  EXPECT_TRUE(ask("41", 1, 2));
  std::optional<Result<bool>> unknown;
  controller_->CheckSlurmOrder("job-none", "41", 1, 1, [&](Result<bool> r) { unknown = r; });
  Drain();
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status().code(), Code::kNotFound);
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
  EXPECT_EQ(controller_->view().GetFailures({.job = id})->size(), 0u);  // no process exit, no silence judged
  EXPECT_EQ(Job(id).job.attempt, 1);
  for (const std::string& n : nodes) EXPECT_NE(controller_->view().GetNode(n)->state, NodeState::kCordoned) << n;
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
  EXPECT_EQ(controller_->view().GetFailures({.job = id})->size(), 0u);
  Wait(30);
  auto f = controller_->view().GetFailures({.job = id});
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
  EXPECT_EQ(controller_->view().GetFailures({.job = id})->size(), 0u);
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
  auto f = controller_->view().GetFailures({.job = id});
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
  s.launch_mode = LaunchMode::kSlurm;
  std::optional<Result<JobView>> out;
  c.SubmitJob(s, *c.view().PlanFor(s), [&](Result<JobView> r) { out = std::move(r); });
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status().code(), Code::kInvalidContent);
  ASSERT_EQ(out->status().fields().size(), 1u);
  EXPECT_EQ(out->status().fields()[0].field, "launcher");
}

}  // namespace
}  // namespace shepherd
