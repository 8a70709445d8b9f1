// The Controller's side of "launcher": "slurm" (control/launch/slurm_allocations.h, controller_slurm_launch.cpp): the
// orders it gives the launch worker (allocations, steps, their durability) and what it makes of the
// worker's first events. Fixture: slurm_launch_fixture.h.
#include "tests/control/slurm_launch_fixture.h"

namespace shepherd {
namespace {

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
  EXPECT_FALSE(controller_->view().GetJob(id)->launch);
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
  EXPECT_EQ(s.name, "shepherd-a1-o1");  // its launch order, durable with the attempt (docs/slurm.md)
  EXPECT_EQ(s.env.at("SHEPHERD_SLURM_ORDER"), "1");
  EXPECT_TRUE(order->order_mine);
  EXPECT_EQ(s.command, (std::vector<std::string>{"python3", "train.py"}));
  // Shared by every rank: srun's environment.
  EXPECT_EQ(s.env.at("SHEPHERD_JOB"), id);
  EXPECT_EQ(s.env.at("SHEPHERD_ATTEMPT"), "1");
  EXPECT_EQ(s.env.at("WORLD_SIZE"), "16");
  EXPECT_EQ(s.env.at("MASTER_ADDR"), s.placement.ranks[0].node);  // hostname = id in these nodes
  // One credential for the attempt's ranks, any rank: every task of a step sees the step's tables, so a
  // per-rank one would be no narrower (docs/security.md, "Scopes").
  EXPECT_EQ(controller_->view().rank_tokens().Lookup(s.env.at("SHEPHERD_TOKEN")), (RankGrant{id, 1, std::nullopt}));
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
  // Every GPU of each node (8 in this inventory), so a site with ConstrainDevices=yes shows the step all
  // of them and the placement's GPU indices stay the node's own.
  EXPECT_EQ(s.gpus_per_node, 8);
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
  EXPECT_EQ(controller_->view().GetFailures({.job = id})->size(), 0u);  // nothing blamed
}

// The step of an attempt the database does not hold yet is not started: a daemon that then stopped would
// find a step it never heard of (as agents' ranks were, AgentBoard::HoldUntilSaved).
TEST_F(SlurmLaunchTest, NoAllocationIsRequestedNorStepStartedBeforeItIsDurable) {
  store_->HoldWrites();
  JobSpec spec = testing::MakeSpec(16, 8);
  spec.launch_mode = LaunchMode::kSlurm;
  std::optional<Result<JobView>> submitted;
  controller_->SubmitJob(spec, *controller_->view().PlanFor(spec),
                         [&](Result<JobView> r) { submitted = std::move(r); });
  Drain();
  EXPECT_FALSE(submitted) << "acknowledged before its COMMIT";
  const std::string id = "job-000001";
  ASSERT_TRUE(controller_->view().GetJob(id).ok());  // in memory already
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
  // A second job, on nodes of its own (the first holds these), is submitted before the orders are read: as
  // one expression the order of the two calls was unspecified, and the second job, queued for want of
  // nodes, had no order, so the comparison read an empty optional.
  for (const char* n : {"n4", "n5", "n6"}) AddNode(n, "l2");
  const std::string second = Submit();
  const std::optional<SlurmJobOrder> other = OrderOf(controller_->GetSlurmOrders(), second);
  ASSERT_TRUE(other);
  EXPECT_NE(other->allocation.request, request);  // random
  Reset();
  std::optional<SlurmJobOrder> again = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->allocation.request, request);
  EXPECT_TRUE(again->allocation_durable);

  WriteBatch old;
  old.Put({Collection::kMeta, SlurmAllocations::kKeyPrefix + id, id,
           R"({"state": "pending", "id": "41", "nodes": ["n0", "n1", "n2"], "adopted": false})"});
  store_->Write(std::move(old), [](Status s) { ASSERT_TRUE(s.ok()); });
  Reset();
  again = OrderOf(controller_->GetSlurmOrders(), id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->allocation.id, "41");
  EXPECT_EQ(again->allocation.request, "");
}

// A site's own --comment in sbatch_args (accounting, tags) is left alone: that request goes unnamed, and
// the worker passes the site's comment as it is.
TEST_F(SlurmLaunchTest, ASitesOwnCommentIsKeptAndTheRequestGoesUnnamed) {
  JobSpec tagged = testing::MakeSpec(16, 8);
  tagged.launch_mode = LaunchMode::kSlurm;
  tagged.slurm.sbatch_args = {"--account=ml", "--comment=project-42"};
  std::string tagged_id;
  controller_->SubmitJob(tagged, *controller_->view().PlanFor(tagged),
                         [&](Result<JobView> r) { tagged_id = r.ok() ? r->job.id : ""; });
  Drain();
  std::optional<SlurmJobOrder> site = OrderOf(controller_->GetSlurmOrders(), tagged_id);
  ASSERT_TRUE(site);
  EXPECT_EQ(site->allocation.request, "");
  EXPECT_EQ(site->sbatch_args, tagged.slurm.sbatch_args);
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
  // And shepherd-slurm-rank hands exactly those to the task (its record of the step's rank table).
  auto table = slurm::EncodeRankTable(s.placement, s.rank_env);
  ASSERT_TRUE(table.ok()) << table.status().message();
  const size_t eol = table->find('\n');
  auto header = slurm::ParseRankTableHeader(std::string_view(*table).substr(0, eol));
  ASSERT_TRUE(header.ok()) << header.status().message();
  auto env = slurm::ParseRankRecord(*header, std::string_view(*table).substr(eol + 1 + 13 * header->record_len,
                                                                             header->record_len),
                                    13, s.placement.ranks[13].node);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(*env, s.rank_env[13]);
  EXPECT_EQ(env->at("SHEPHERD_RANK_COORDS"), "1,0,1,1");
}

}  // namespace
}  // namespace shepherd
