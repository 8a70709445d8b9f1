// The Controller with an in-memory store, a fault-injecting store and a fake clock. Store completions are
// posted to a queue that the test drains, as the daemon's io thread would.
#include "control/controller.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/control/controller_fixture.h"

namespace shepherd {

TEST_F(ControllerTest, RegisterThenUpdateKeepsCordon) {
  auto r = AddNode("n1", "l0");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->node.state, NodeState::kAvailable);
  std::optional<Result<NodeView>> patched;
  controller_->PatchNode("n1", NodePatch{.schedulable = false, .reason = "bad fan"},
                         [&](Result<NodeView> v) { patched = std::move(v); });
  Drain();
  ASSERT_TRUE(patched->ok());
  EXPECT_EQ((*patched)->state, NodeState::kCordoned);
  EXPECT_EQ((*patched)->node.reason, "bad fan");
  auto again = AddNode("n1", "l0");  // re-registration without "schedulable" keeps the cordon
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->node.state, NodeState::kCordoned);
  // Nor does one that says "schedulable": true, as the --inventory file re-applied at each start does
  // (a tester's two cordons for bad hardware were lifted by a daemon restart): PATCH lifts a cordon.
  std::optional<Result<NodeUpsert>> declared;
  controller_->UpsertNode(testing::MakeNode("n1", "l0"), /*schedulable_given=*/true,
                          [&](Result<NodeUpsert> r) { declared = std::move(r); });
  Drain();
  ASSERT_TRUE(declared->ok());
  EXPECT_EQ((*declared)->node.state, NodeState::kCordoned);
  EXPECT_EQ((*declared)->node.node.reason, "bad fan");
}

// A registration that says "schedulable": false cordons the node, as the operator's (Shepherd never
// returns it by itself).
TEST_F(ControllerTest, RegistrationWithSchedulableFalseIsAnOperatorsCordon) {
  ASSERT_TRUE(AddNode("n1", "l0").ok());
  Node n = testing::MakeNode("n1", "l0");
  n.schedulable = false;
  std::optional<Result<NodeUpsert>> out;
  controller_->UpsertNode(n, /*schedulable_given=*/true, [&](Result<NodeUpsert> r) { out = std::move(r); });
  Drain();
  ASSERT_TRUE(out->ok());
  EXPECT_EQ((*out)->node.state, NodeState::kCordoned);
  EXPECT_EQ((*out)->node.node.cordon_source, "operator");
}

TEST_F(ControllerTest, FifoQueueStartsWhenCapacityFrees) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  auto a = Submit(16);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->job.state, JobState::kLaunching);
  auto b = Submit(8);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->job.state, JobState::kQueued);
  auto pl = controller_->view().GetPlacement(b->job.id);
  EXPECT_EQ(pl.status().code(), Code::kConflict);
  ASSERT_TRUE(Cancel(a->job.id).ok());
  auto b_now = controller_->view().GetJob(b->job.id);
  EXPECT_EQ(b_now->job.state, JobState::kLaunching);
  EXPECT_EQ(controller_->view().free_usable_gpus(), 8);
}

TEST_F(ControllerTest, SparesAreNeverUsedForFirstPlacement) {
  AddNode("n1", "l0");
  AddNode("spare1", "l0", /*spare=*/true);
  auto too_big = Submit(16);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), Code::kInvalidContent);
  ASSERT_EQ(too_big.status().fields().size(), 1u);
  EXPECT_EQ(too_big.status().fields()[0].field, "resources.gpus");
  auto ok = Submit(8);
  ASSERT_TRUE(ok.ok());
  auto pl = controller_->view().GetPlacement(ok->job.id);
  ASSERT_TRUE(pl.ok());
  ASSERT_EQ(pl->placement->ranks.size(), 8u);
  for (const RankSlot& r : pl->placement->ranks) EXPECT_EQ(r.node, "n1");
  ASSERT_TRUE(pl->quality.has_value());
  EXPECT_EQ(pl->quality->tp_groups_split, 0);
}

TEST_F(ControllerTest, DeleteNodeRefusedWhileRanksRun) {
  AddNode("n1", "l0");
  auto job = Submit(8);
  std::optional<Result<NodeView>> del;
  controller_->DeleteNode("n1", [&](Result<NodeView> r) { del = std::move(r); });
  Drain();
  EXPECT_EQ(del->status().code(), Code::kConflict);
  ASSERT_TRUE(Cancel(job->job.id).ok());
  controller_->DeleteNode("n1", [&](Result<NodeView> r) { del = std::move(r); });
  Drain();
  EXPECT_TRUE(del->ok());
  EXPECT_EQ(controller_->view().GetNode("n1").status().code(), Code::kNotFound);
}

// A fleet operator cordoned n4 ("bad NVLink, decommission") and deleted it while its agent ran: the agent
// registered it again within 6 s, schedulable and without its cordon.
TEST_F(ControllerTest, DeleteNodeRefusedWhileItsAgentHeartbeats) {
  AddNode("n1", "l0");
  std::optional<Result<HeartbeatAck>> ack;
  controller_->NodeHeartbeat("n1", {}, [&](Result<HeartbeatAck> r) { ack = std::move(r); });
  Drain();
  ASSERT_TRUE(ack && ack->ok());
  std::optional<Result<NodeView>> del;
  controller_->DeleteNode("n1", [&](Result<NodeView> r) { del = std::move(r); });
  Drain();
  EXPECT_EQ(del->status().code(), Code::kConflict);
  EXPECT_NE(del->status().message().find("stop the agent first"), std::string::npos);
  for (int i = 0; i < 4; ++i) {  // the agent stops: lost after the node timeout, then deletable
    clock_.Advance(Seconds(5));
    controller_->Tick();
    Drain();
  }
  controller_->DeleteNode("n1", [&](Result<NodeView> r) { del = std::move(r); });
  Drain();
  EXPECT_TRUE(del->ok()) << del->status().message();
}

// A DELETE that commits while a PATCH or a re-registration of the same node is still being written: each
// answers with the node as it wrote it (the daemon read a node that was gone and crashed).
TEST_F(ControllerTest, NodeWriteAnswersAfterAConcurrentDeleteRemovedTheNode) {
  AddNode("n1", "l0");
  std::optional<Result<NodeView>> patched, deleted;
  std::optional<Result<NodeUpsert>> upserted;
  controller_->PatchNode("n1", NodePatch{.schedulable = false, .reason = "fan"},
                         [&](Result<NodeView> r) { patched = std::move(r); });
  controller_->UpsertNode(testing::MakeNode("n1", "l0"), false,
                          [&](Result<NodeUpsert> r) { upserted = std::move(r); });
  controller_->DeleteNode("n1", [&](Result<NodeView> r) { deleted = std::move(r); });
  EXPECT_FALSE(patched.has_value());  // not answered before the writes are durable
  Drain();
  ASSERT_TRUE(patched.has_value() && patched->ok());
  EXPECT_EQ((*patched)->node.id, "n1");
  EXPECT_EQ((*patched)->node.reason, "fan");
  EXPECT_FALSE((*patched)->node.schedulable);
  ASSERT_TRUE(upserted.has_value() && upserted->ok());
  EXPECT_EQ((*upserted)->node.node.id, "n1");
  ASSERT_TRUE(deleted.has_value() && deleted->ok());
  EXPECT_EQ(controller_->view().GetNode("n1").status().code(), Code::kNotFound);
}

TEST_F(ControllerTest, RecoveryRestoresNodesJobsAllocationsAndQueue) {
  AddNode("n1", "l0");
  auto running = Submit(8);
  auto queued = Submit(8);
  ASSERT_EQ(queued->job.state, JobState::kQueued);
  Reset();  // a new controller over the same durable store
  auto r = controller_->view().GetJob(running->job.id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->job.state, JobState::kLaunching);
  EXPECT_EQ(controller_->view().GetNode("n1")->allocated_gpus, 8);
  auto pl = controller_->view().GetPlacement(running->job.id);
  ASSERT_TRUE(pl.ok());
  EXPECT_EQ(pl->placement->ranks[3].tp, 3);
  EXPECT_EQ(controller_->view().GetJob(queued->job.id)->job.state, JobState::kQueued);
  AddNode("n2", "l0");  // capacity arrives: the recovered queue moves
  EXPECT_EQ(controller_->view().GetJob(queued->job.id)->job.state, JobState::kLaunching);
  auto third = Submit(8);
  EXPECT_EQ(third->job.id, "job-000003");  // ids continue after recovery
}

// A stored job's estimate is the one answered at submission, whatever the inventory has become: a tester's
// job read back with another step time after a node grew to a 16-GPU NVLink domain and the daemon restarted.
TEST_F(ControllerTest, AJobsEstimateReadsBackUnchangedAfterARestart) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  auto job = Submit(16);
  ASSERT_TRUE(job.ok());
  const PlanEstimate before = job->estimate;
  std::optional<Result<JobView>> cancelled;
  controller_->CancelJob(job->job.id, "t", [&](Result<JobView> v) { cancelled = std::move(v); });
  Drain();
  ASSERT_TRUE(cancelled->ok());
  std::optional<Result<NodeUpsert>> grown;
  controller_->UpsertNode(testing::MakeNode("n1", "l0", false, 16), false,
                          [&](Result<NodeUpsert> r) { grown = std::move(r); });
  Drain();
  ASSERT_TRUE(grown->ok());
  ASSERT_NE(controller_->view().PlanFor(Spec(16, 8))->step_time_s, before.step_time_s);  // today's answer differs
  Reset();
  const PlanEstimate after = controller_->view().GetJob(job->job.id)->estimate;
  EXPECT_EQ(after.step_time_s, before.step_time_s);
  EXPECT_EQ(after.comm_time_s, before.comm_time_s);
  EXPECT_EQ(after.memory.total, before.memory.total);
  EXPECT_EQ(after.nvlink_domain_gpus, 8);
}

TEST_F(ControllerTest, FailedCommitIsNotAcknowledgedAndStopsWrites) {
  std::optional<Status> failure;
  controller_->set_on_storage_failure([&](const Status& s) { failure = s; });
  AddNode("n1", "l0");
  store_->FailNextWrites(1);
  auto r = AddNode("n2", "l0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  ASSERT_TRUE(failure.has_value());
  EXPECT_FALSE(controller_->ready());
  auto later = AddNode("n3", "l0");  // the store healed, but the controller stays fail-stopped
  EXPECT_EQ(later.status().code(), Code::kUnavailable);
  EXPECT_EQ(store_->writes_seen(), 3);  // the epoch at recovery, n1, the failed n2
  Reset();                              // what a restart recovers: only the acknowledged node
  EXPECT_TRUE(controller_->view().GetNode("n1").ok());
  EXPECT_EQ(controller_->view().GetNode("n2").status().code(), Code::kNotFound);
}

// ---- Credentials and node identity

namespace {

class ControllerCredentialsTest : public ControllerTest {
 protected:
  // A job our agents launch: 16 GPUs over n1 and n2.
  std::string SubmitOurs() {
    JobSpec s = testing::MakeSpec(16, 8);
    auto est = controller_->view().PlanFor(s);
    std::optional<Result<JobView>> out;
    controller_->SubmitJob(s, *est, [&](Result<JobView> r) { out = std::move(r); });
    Drain();
    EXPECT_TRUE(out->ok());
    EXPECT_FALSE((*out)->rank_token) << "our own jobs' tokens go to their ranks only";
    return (*out)->job.id;
  }
  // The answer comes once the node has heartbeated since the controller started: an empty heartbeat then.
  Assignments AssignmentsOf(const std::string& node) {
    std::optional<Result<Assignments>> out;
    controller_->WatchAssignments(node, -1, clock_.Now(), true,
                                  [&](Result<Assignments> a) { out = std::move(a); });
    Drain();
    if (!out) Heartbeat(node, {});
    return out->value();
  }
  HeartbeatAck Heartbeat(const std::string& node, AgentHeartbeat hb) {
    std::optional<Result<HeartbeatAck>> out;
    controller_->NodeHeartbeat(node, hb, [&](Result<HeartbeatAck> r) { out = std::move(r); });
    Drain();
    return out->value();
  }
  static ProcessStatus Proc(const std::string& job, int attempt, int rank, bool running) {
    ProcessStatus p;
    p.rank = {job, attempt, rank};
    p.running = running;
    if (!running) p.exit_code = 1;
    return p;
  }
  // Rank 0 exits on its node; recovery restarts the job once its backoff has passed.
  void CrashAndRecover(const std::string& job) {
    const std::string node = controller_->view().GetPlacement(job)->placement->ranks[0].node;
    Heartbeat(node, {{Proc(job, 1, 0, false)}, {}, {}});
    for (int i = 0; i < 120 && controller_->view().GetJob(job)->job.attempt == 1; ++i) {
      clock_.Advance(Seconds(5));
      for (const char* n : {"n1", "n2"}) Heartbeat(n, {});
      controller_->Tick();
      Drain();
    }
    ASSERT_EQ(controller_->view().GetJob(job)->job.attempt, 2);
  }
};

}  // namespace

TEST_F(ControllerCredentialsTest, EachAttemptGetsItsOwnRankTokenRevokedWhenItEnds) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  std::string job = SubmitOurs();
  auto t1 = controller_->view().rank_tokens().RankTokenFor(job, 1, 0);
  ASSERT_TRUE(t1);
  std::set<std::string> tokens;
  for (const char* node : {"n1", "n2"}) {
    Assignments a = AssignmentsOf(node);
    ASSERT_EQ(a.ranks.size(), 8u);
    for (const RankAssignment& r : a.ranks) {
      // Each rank its own credential, for itself only.
      EXPECT_EQ(r.env.at("SHEPHERD_TOKEN"), *controller_->view().rank_tokens().RankTokenFor(job, 1, r.rank.rank));
      EXPECT_EQ(controller_->view().rank_tokens().Lookup(r.env.at("SHEPHERD_TOKEN")),
                (RankGrant{job, 1, r.rank.rank}));
      tokens.insert(r.env.at("SHEPHERD_TOKEN"));
      // The rendezvous port stays below Linux's ephemeral range (32768+), where any connection may hold it.
      const int port = std::stoi(r.env.at("MASTER_PORT"));
      EXPECT_GE(port, 20000);
      EXPECT_LT(port, 32000);
    }
  }
  EXPECT_EQ(tokens.size(), 16u);
  EXPECT_EQ(controller_->view().rank_tokens().Lookup(*t1), (RankGrant{job, 1, 0}));
  CrashAndRecover(job);
  EXPECT_FALSE(controller_->view().rank_tokens().Lookup(*t1)) << "attempt 1's ranks can no longer report";
  auto t2 = controller_->view().rank_tokens().RankTokenFor(job, 2, 0);
  ASSERT_TRUE(t2);
  EXPECT_NE(*t1, *t2);
  ASSERT_TRUE(Cancel(job).ok());
  EXPECT_FALSE(controller_->view().rank_tokens().Lookup(*t2));
}

// A tester's queued job started on nodes a finished job freed: the freed node's agent, waiting for its
// assignments, was answered while the old job's end was settled, before the new attempt's token was minted,
// and its ranks started with SHEPHERD_TOKEN empty (401 on every report; "never reported" restarted it).
TEST_F(ControllerCredentialsTest, AQueuedJobPlacedOnFreedNodesHasItsTokenInTheFirstAnswer) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  const std::string first = SubmitOurs();
  const std::string second = SubmitOurs();  // queued behind the first
  ASSERT_EQ(controller_->view().GetJob(second)->job.state, JobState::kQueued);
  Heartbeat("n1", {});
  const int64_t known = AssignmentsOf("n1").version;
  std::optional<Result<Assignments>> answer;
  controller_->WatchAssignments("n1", known, clock_.Now() + Seconds(30), true,
                                [&](Result<Assignments> a) { answer = std::move(a); });
  Drain();
  ASSERT_FALSE(answer) << "nothing changed yet";
  ASSERT_TRUE(Cancel(first).ok());  // frees n1 and n2; the second is placed in the same pass
  ASSERT_TRUE(answer && answer->ok());
  // The first answer stops the first job's ranks; the second's come once the batch that started its attempt
  // is durable (AgentBoard::HoldUntilSaved): the next answer, at once here (the memory store).
  if ((*answer)->ranks.empty()) {
    const int64_t seen = (*answer)->version;
    answer.reset();
    controller_->WatchAssignments("n1", seen, clock_.Now() + Seconds(30), true,
                                  [&](Result<Assignments> a) { answer = std::move(a); });
    Drain();
    ASSERT_TRUE(answer && answer->ok());
  }
  ASSERT_TRUE(controller_->view().rank_tokens().TokenFor({second, 1}));
  for (const RankAssignment& r : (*answer)->ranks) {
    if (r.rank.job != second) continue;
    EXPECT_EQ(r.env.at("SHEPHERD_TOKEN"), *controller_->view().rank_tokens().RankTokenFor(second, 1, r.rank.rank))
        << "rank " << r.rank.rank;
  }
  EXPECT_FALSE((*answer)->ranks.empty());
}

// A storage probe: with the database's write lock held by another connection, a restarted attempt reached
// the agent before the batch that records it was durable; the daemon then stopped, and the restarted one,
// which never heard of that attempt, kept its ranks as unknown processes, then blamed and cordoned the node.
// What /metrics shows of the store: a batch the store holds counts as in flight, and its wait grows with
// the clock until the store answers it.
TEST_F(ControllerCredentialsTest, AStoreThatHoldsAWriteShowsItsAgeUntilItCommits) {
  EXPECT_EQ(controller_->view().storage().writes_in_flight, 0u);
  store_->HoldWrites();
  std::optional<Result<NodeUpsert>> added;
  controller_->UpsertNode(testing::MakeNode("n9", "l0"), false, [&](Result<NodeUpsert> r) { added = r; });
  Drain();
  EXPECT_FALSE(added);
  ASSERT_EQ(controller_->view().storage().writes_in_flight, 1u);
  EXPECT_EQ(controller_->view().storage().oldest_write_s, 0);
  clock_.Advance(Seconds(7));
  EXPECT_EQ(controller_->view().storage().oldest_write_s, 7);
  EXPECT_FALSE(controller_->view().storage().failed);
  store_->ReleaseHeld();
  Drain();
  ASSERT_TRUE(added && added->ok());
  EXPECT_EQ(controller_->view().storage().writes_in_flight, 0u);
  EXPECT_EQ(controller_->view().storage().oldest_write_s, 0);
}

TEST_F(ControllerCredentialsTest, AnAttemptsRanksReachAgentsOnlyOnceTheAttemptIsDurable) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  Heartbeat("n1", {});
  const int64_t known = AssignmentsOf("n1").version;
  store_->HoldWrites();
  JobSpec spec = testing::MakeSpec(16, 8);
  auto est = controller_->view().PlanFor(spec);
  std::optional<Result<JobView>> submitted;
  controller_->SubmitJob(spec, *est, [&](Result<JobView> r) { submitted = std::move(r); });
  Drain();
  EXPECT_FALSE(submitted) << "acknowledged before its COMMIT";
  EXPECT_TRUE(AssignmentsOf("n1").ranks.empty()) << "the attempt is not durable yet";
  std::optional<Result<Assignments>> answer;
  controller_->WatchAssignments("n1", known, clock_.Now() + Seconds(30), true,
                                [&](Result<Assignments> a) { answer = std::move(a); });
  Drain();
  if (answer) {  // answered for another change: nothing of the job in it
    ASSERT_TRUE(answer->ok());
    EXPECT_TRUE((*answer)->ranks.empty());
    const int64_t seen = (*answer)->version;
    answer.reset();
    controller_->WatchAssignments("n1", seen, clock_.Now() + Seconds(30), true,
                                  [&](Result<Assignments> a) { answer = std::move(a); });
    Drain();
    EXPECT_FALSE(answer);
  }
  store_->ReleaseHeld();
  Drain();
  ASSERT_TRUE(submitted && submitted->ok());
  ASSERT_TRUE(answer && answer->ok());
  EXPECT_EQ((*answer)->ranks.size(), 8u);  // its ranks on n1, once durable
}

// A job recovery re-queued (its node lost, no spare, no free node) showed its old attempt's ranks, on the
// failed node, as its placement (200); api.md says 409 while queued.
TEST_F(ControllerCredentialsTest, AReQueuedJobHasNoPlacement) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  const std::string job = SubmitOurs();
  for (const char* n : {"n1", "n2"}) Heartbeat(n, {});
  ASSERT_TRUE(controller_->view().GetPlacement(job).ok());
  for (int i = 0; i < 60 && controller_->view().GetJob(job)->job.state != JobState::kQueued; ++i) {
    clock_.Advance(Seconds(1));
    Heartbeat("n1", {});  // n2's agent fell silent
    controller_->Tick();
    Drain();
  }
  ASSERT_EQ(controller_->view().GetJob(job)->job.state, JobState::kQueued);
  EXPECT_EQ(controller_->view().GetPlacement(job).status().code(), Code::kConflict);
}

TEST_F(ControllerCredentialsTest, RankTokensSurviveARestartOfTheDaemon) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  std::string job = SubmitOurs();
  std::string t1 = *controller_->view().rank_tokens().RankTokenFor(job, 1, 5);
  auto external = Submit(8);  // another launcher's job: one token for the job, shown once at submit
  ASSERT_TRUE(external.ok());
  ASSERT_TRUE(external->rank_token);
  Reset();  // a new controller over the same durable store
  EXPECT_EQ(controller_->view().rank_tokens().Lookup(t1), (RankGrant{job, 1, 5}));
  EXPECT_EQ(controller_->view().rank_tokens().Lookup(*external->rank_token), (RankGrant{external->job.id, {}}));
  EXPECT_FALSE(controller_->view().GetJob(job)->rank_token) << "never shown again";
  ASSERT_TRUE(Cancel(external->job.id).ok());
  Reset();
  EXPECT_FALSE(controller_->view().rank_tokens().Lookup(*external->rank_token));
  EXPECT_TRUE(controller_->view().rank_tokens().Lookup(t1));
}

TEST_F(ControllerCredentialsTest, AnAgentCannotReportExitsOfRanksItDoesNotRun) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  std::string job = SubmitOurs();
  const auto placement = controller_->view().GetPlacement(job).value();
  const std::string victim = placement.placement->ranks[0].node;
  const std::string forger = victim == "n1" ? "n2" : "n1";
  // The forger claims rank 0 (on the victim's node) exited, and that it launched it.
  HeartbeatAck ack = Heartbeat(forger, {{Proc(job, 1, 0, false)}, {}, {}});
  EXPECT_EQ(ack.ack_exits.size(), 1u);  // acknowledged so the agent forgets it, but nothing else
  EXPECT_TRUE(controller_->view().GetFailures({}).value().empty());
  EXPECT_EQ(controller_->view().GetJob(job)->job.attempt, 1);
  Heartbeat(forger, {{Proc(job, 1, 0, true)}, {}, {}});
  EXPECT_EQ(controller_->view().GetJob(job)->job.state, JobState::kLaunching) << "a forged start launches nothing";
  // The real rank's exit on its own node is a finding.
  Heartbeat(victim, {{Proc(job, 1, 0, false)}, {}, {}});
  auto failures = controller_->view().GetFailures({}).value();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].kind, FindingKind::kProcessExit);
  EXPECT_EQ(failures[0].nodes, std::vector<std::string>{victim});
}

TEST_F(ControllerCredentialsTest, ABusyNodeKeepsItsHostnameAndTopology) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  std::string job = SubmitOurs();
  Node moved = testing::MakeNode("n1", "l9");
  moved.hostname = "attacker.example";
  std::optional<Result<NodeUpsert>> out;
  controller_->UpsertNode(moved, false, [&](Result<NodeUpsert> r) { out = std::move(r); });
  Drain();
  ASSERT_EQ(out->status().code(), Code::kConflict);
  std::vector<std::string> fields;
  for (const FieldError& e : out->status().fields()) fields.push_back(e.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"hostname", "topology.leaf"}));
  EXPECT_EQ(controller_->view().GetNode("n1")->node.hostname, "n1");
  // The same registration again (an agent restarting) is fine, and so is a change once the node is idle.
  EXPECT_TRUE(AddNode("n1", "l0").ok());
  ASSERT_TRUE(Cancel(job).ok());
  controller_->UpsertNode(moved, false, [&](Result<NodeUpsert> r) { out = std::move(r); });
  Drain();
  EXPECT_TRUE(out->ok());
}

}  // namespace shepherd
