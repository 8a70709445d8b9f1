#include "control/job_book.h"

#include <gtest/gtest.h>

#include "tests/control/control_test_util.h"

namespace shepherd {
namespace {

using testing::MakeNode;
using testing::MakeSpec;

const Time kNow = FromUnixSeconds(1000);

class JobBookTest : public ::testing::Test {
 protected:
  JobBookTest() {
    bool created = false;
    for (const char* id : {"n1", "n2"}) (void)inv_.Upsert(MakeNode(id, "l0"), true, kNow, &batch_, &created);
  }
  std::string Submit(int gpus) {
    JobSpec spec = MakeSpec(gpus, 8);
    auto est = jobs_.PlanFor(spec);
    EXPECT_TRUE(est.ok()) << est.status().message();
    auto id = jobs_.Submit(spec, *est, kNow, &batch_);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return *id;
  }
  std::vector<std::string> Schedule(std::optional<Checkpoint> resume = std::nullopt) {
    return jobs_.Schedule([&](const std::string&) { return resume; }, kNow, &batch_);
  }

  Inventory inv_{DefaultTopologyLevels(), {}};
  JobBook jobs_{&inv_, 80};
  WriteBatch batch_;
};

// "auto" may choose full recompute where the spec names none (planner/auto_plan.cpp): the job is recorded
// with the recompute its plan assumed, so that it runs, and is re-planned, with it.
TEST_F(JobBookTest, AJobIsRecordedWithTheRecomputeItsPlanAssumed) {
  JobSpec spec = MakeSpec(16, 8);
  auto est = jobs_.PlanFor(spec);
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->activation_recompute, Recompute::kNone);  // the fastest that fits, chosen
  est->activation_recompute = Recompute::kFull;                 // as auto answers when it chose it
  auto id = jobs_.Submit(spec, *est, kNow, &batch_);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(jobs_.Find(*id)->job.spec.training.activation_recompute, Recompute::kFull);
}

TEST_F(JobBookTest, ScheduleStartsInOrderAndQueuesAttemptEvents) {
  std::string a = Submit(16), b = Submit(8);
  EXPECT_EQ(jobs_.Find(a)->job.state, JobState::kQueued);
  EXPECT_EQ(Schedule(), std::vector<std::string>{a});  // b waits: FIFO, no free GPUs left
  EXPECT_EQ(jobs_.Find(b)->job.state, JobState::kQueued);
  auto events = jobs_.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, AttemptEvent::Kind::kStarted);
  EXPECT_EQ(events[0].attempt, 1);
  EXPECT_EQ(events[0].nodes, (std::set<std::string>{"n1", "n2"}));
  EXPECT_TRUE(jobs_.TakeEvents().empty());  // drained
}

// A head that needs more GPUs than are free holds back the whole queue, a smaller job behind it included
// (Schedule stops at it instead of passing over the queue); once GPUs free, the head starts first.
TEST_F(JobBookTest, AHeadLargerThanTheFreeGpusHoldsBackTheQueueBehindIt) {
  std::string running = Submit(8);
  ASSERT_EQ(Schedule(), std::vector<std::string>{running});  // 8 of 16 GPUs free
  std::string head = Submit(16), small = Submit(8);
  EXPECT_TRUE(Schedule().empty());  // small would fit, but would take what the head waits for
  EXPECT_EQ(jobs_.Find(small)->job.state, JobState::kQueued);
  ASSERT_TRUE(jobs_.Cancel(running, kNow, &batch_).ok());
  EXPECT_EQ(Schedule(), std::vector<std::string>{head});
}

// A head that waits for nodes (cordoned since it queued) rather than for jobs to end holds back nothing:
// the fleet would otherwise idle behind it until an operator uncordons. Once the nodes return it is the
// head again and starts before anything behind it.
TEST_F(JobBookTest, AJobLargerThanTheUsableInventoryWaitsForNodesWithoutHoldingBackTheQueue) {
  std::string running = Submit(8);
  ASSERT_EQ(Schedule(), std::vector<std::string>{running});
  std::string big = Submit(16);
  EXPECT_TRUE(Schedule().empty());
  NodePatch cordon;
  cordon.schedulable = false;
  const std::string busy = jobs_.Find(running)->attempt->placement.ranks[0].node;
  const std::string idle = busy == "n1" ? "n2" : "n1";
  ASSERT_TRUE(inv_.Patch(busy, cordon, kNow, &batch_).ok());  // 8 usable GPUs, all free once `running` ends
  ASSERT_TRUE(jobs_.Cancel(running, kNow, &batch_).ok());
  std::string small = Submit(8);
  EXPECT_EQ(Schedule(), std::vector<std::string>{small});
  EXPECT_EQ(jobs_.Find(big)->job.state, JobState::kQueued);
  EXPECT_EQ(
      jobs_.Find(big)->job.reason,
      "waiting for nodes: needs 16 GPUs, the usable (schedulable, not failed, non-spare) inventory has 8");
  EXPECT_EQ(jobs_.Find(small)->attempt->placement.ranks[0].node, idle);

  NodePatch uncordon;
  uncordon.schedulable = true;
  ASSERT_TRUE(inv_.Patch(busy, uncordon, kNow, &batch_).ok());
  std::string later = Submit(8);  // fits on the returned node, but would take what `big` now waits for
  EXPECT_TRUE(Schedule().empty());
  EXPECT_EQ(jobs_.Find(big)->job.reason, "waiting for capacity");
  ASSERT_TRUE(jobs_.Cancel(small, kNow, &batch_).ok());
  EXPECT_EQ(Schedule(), std::vector<std::string>{big});
  EXPECT_EQ(jobs_.Find(later)->job.state, JobState::kQueued);
}

TEST_F(JobBookTest, ExternalIdsAreUniqueAmongJobsThatHaveNotEndedAndIndexedAcrossRestore) {
  JobSpec spec = MakeSpec(8, 8);
  spec.command.clear();
  spec.launch_mode = LaunchMode::kExternal;
  spec.external_id = "4242";
  auto est = jobs_.PlanFor(spec);
  ASSERT_TRUE(est.ok());
  auto first = jobs_.Submit(spec, *est, kNow, &batch_);
  ASSERT_TRUE(first.ok());
  auto dup = jobs_.Submit(spec, *est, kNow, &batch_);
  ASSERT_EQ(dup.status().code(), Code::kConflict);
  ASSERT_EQ(dup.status().fields().size(), 1u);
  EXPECT_EQ(dup.status().fields()[0].field, "external_id");
  EXPECT_EQ(jobs_.FindExternal("4242")->job.id, *first);
  EXPECT_EQ(jobs_.FindExternal("4243"), nullptr);

  ASSERT_TRUE(jobs_.Cancel(*first, kNow, &batch_).ok());
  EXPECT_EQ(jobs_.FindExternal("4242"), nullptr);  // ended: the id is free again
  auto second = jobs_.Submit(spec, *est, kNow, &batch_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(jobs_.WithExternalId("4242"), (std::set<std::string>{*first, *second}));

  // A restarted daemon rebuilds the index from the records it restores.
  JobBook restored{&inv_, 80};
  for (const auto& [id, e] : jobs_.all()) restored.Restore(e);
  EXPECT_EQ(restored.FindExternal("4242")->job.id, *second);
  EXPECT_EQ(restored.WithExternalId("4242").size(), 2u);
}

TEST_F(JobBookTest, EndAttemptReleasesGpusOnceAndQueuesOneEvent) {
  std::string a = Submit(8);
  Schedule();
  (void)jobs_.TakeEvents();
  jobs_.EndAttempt(a, kNow, &batch_);
  jobs_.EndAttempt(a, kNow, &batch_);  // idempotent
  EXPECT_EQ(inv_.cluster().FreeUsableGpus(), 16);
  auto events = jobs_.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, AttemptEvent::Kind::kEnded);
  ASSERT_TRUE(jobs_.Find(a)->attempt->ended_at.has_value());
}

// An ending attempt's final goodput marks come from its health owner, with its kEnded event: recorded on the
// attempt (also once the next attempt has moved it among the earlier ones) and in a record that keeps its
// placement.
TEST_F(JobBookTest, FinalMarksFollowTheEndedEventIntoTheRecordAndTheEarlierAttempt) {
  std::string a = Submit(8);
  Schedule();
  const Placement placed = jobs_.Find(a)->attempt->placement;
  ASSERT_FALSE(placed.ranks.empty());
  (void)jobs_.TakeEvents();
  jobs_.EndAttempt(a, kNow, &batch_);
  ASSERT_TRUE(jobs_.StartAttempt(a, placed, "again", std::nullopt, kNow, &batch_).ok());
  std::vector<AttemptEvent> events = jobs_.TakeEvents();
  ASSERT_EQ(events.size(), 2u);
  ASSERT_EQ(events[0].kind, AttemptEvent::Kind::kEnded);
  ASSERT_TRUE(events[0].ended.has_value());
  MarksSnapshot marks;
  marks.last_step_at = kNow - Seconds(7);
  marks.last_step = 321;
  marks.load_s = 4.5;
  marks.save_s = 2.25;
  batch_ = WriteBatch{};
  jobs_.RecordFinalMarks(events[0], marks, &batch_);
  ASSERT_EQ(batch_.ops.size(), 1u);
  const Record& r = batch_.ops[0].record;
  EXPECT_EQ(r.collection, Collection::kAttempts);
  EXPECT_EQ(r.key, a + "/1");
  Result<Attempt> recorded = AttemptFromJson(Json::parse(r.body));
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->last_step_at, kNow - Seconds(7));
  EXPECT_EQ(recorded->last_step, 321);
  EXPECT_EQ(recorded->load_s, 4.5);
  EXPECT_EQ(recorded->save_s, 2.25);
  EXPECT_EQ(recorded->placement.ranks.size(), placed.ranks.size());  // not the emptied earlier copy
  EXPECT_TRUE(recorded->ended_at.has_value());
  const JobEntry& e = *jobs_.Find(a);
  ASSERT_EQ(e.earlier.size(), 1u);
  EXPECT_EQ(e.earlier[0].attempt.last_step, 321);
  EXPECT_EQ(e.earlier[0].attempt.save_s, 2.25);
  EXPECT_EQ(e.attempt->number, 2);
  EXPECT_EQ(e.attempt->last_step, 0);  // the running attempt keeps its own
}

TEST_F(JobBookTest, QueuedJobsResumeFromTheChosenCheckpoint) {
  std::string a = Submit(8);
  Checkpoint c;
  c.id = a + "/1/40";
  c.step = 40;
  Schedule(c);
  const Attempt& at = *jobs_.Find(a)->attempt;
  EXPECT_EQ(at.resume_checkpoint, c.id);
  EXPECT_EQ(at.resume_step, 40);
}

TEST_F(JobBookTest, EveryRankExitingZeroSucceedsTheJob) {
  std::string a = Submit(8);
  Schedule();
  for (int r = 0; r < 7; ++r) EXPECT_FALSE(jobs_.OnRankExitedOk({a, 1, r}, kNow, &batch_));
  EXPECT_FALSE(jobs_.OnRankExitedOk({a, 2, 7}, kNow, &batch_));  // another attempt's rank
  EXPECT_FALSE(jobs_.OnRankExitedOk({a, 1, 6}, kNow, &batch_));  // the same rank twice counts once
  EXPECT_TRUE(jobs_.OnRankExitedOk({a, 1, 7}, kNow, &batch_));
  EXPECT_EQ(jobs_.Find(a)->job.state, JobState::kSucceeded);
  EXPECT_EQ(inv_.cluster().FreeUsableGpus(), 16);
}

TEST_F(JobBookTest, CancelEndsAndRefusesTerminalJobs) {
  std::string a = Submit(8);
  Schedule();
  ASSERT_TRUE(jobs_.Cancel(a, kNow, &batch_).ok());
  EXPECT_EQ(jobs_.Find(a)->job.state, JobState::kCancelled);
  EXPECT_EQ(jobs_.Cancel(a, kNow, &batch_).code(), Code::kConflict);
  EXPECT_EQ(jobs_.Cancel("job-x", kNow, &batch_).code(), Code::kNotFound);
}

TEST_F(JobBookTest, ASmallNodeDoesNotCapTensorParallelismAndGetsNoRankOfAWiderGroup) {
  // n1 and n2 have 8 GPUs; a 2-GPU demo node joins. Before, every plan was bound to TP 2 ("8 exceeds the
  // NVLink domain (2 GPUs)").
  bool created = false;
  ASSERT_TRUE(inv_.Upsert(MakeNode("small", "l0", false, 2), true, kNow, &batch_, &created).ok());
  EXPECT_EQ(jobs_.HardwareFor(MakeSpec(8, 8)).nvlink_domain_gpus, 8);
  const std::string id = Submit(16);  // TP 8, DP 2
  ASSERT_EQ(Schedule(), std::vector<std::string>{id});
  for (const RankSlot& s : jobs_.Find(id)->attempt->placement.ranks) EXPECT_NE(s.node, "small") << s.rank;
}

TEST_F(JobBookTest, LargerThanTheUsableInventoryIsRefusedNamingTheField) {
  JobSpec spec = MakeSpec(32, 8);
  auto est = jobs_.PlanFor(spec);
  ASSERT_TRUE(est.ok());
  auto id = jobs_.Submit(spec, *est, kNow, &batch_);
  ASSERT_FALSE(id.ok());
  ASSERT_EQ(id.status().fields().size(), 1u);
  EXPECT_EQ(id.status().fields()[0].field, "resources.gpus");
}

}  // namespace
}  // namespace shepherd
