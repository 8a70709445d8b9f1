// The Controller with an in-memory store, a fault-injecting store and a fake clock. Store completions are
// posted to a queue that the test drains, as the daemon's io thread would.
#include "daemon/controller.h"

#include <gtest/gtest.h>

#include <deque>

#include "tests/fakes/fake_clock.h"
#include "tests/fakes/faulty_store.h"

namespace shepherd {
namespace {

class ControllerTest : public ::testing::Test {
 protected:
  ControllerTest() : store_(std::make_unique<FaultyStore>(NewMemoryStore())) { Reset(); }

  void Reset() {
    controller_ = std::make_unique<Controller>(
        store_.get(), &clock_, [this](std::function<void()> f) { posted_.push_back(std::move(f)); },
        ControllerOptions{});
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

  Result<Controller::NodeUpsert> AddNode(const std::string& id, const std::string& leaf, bool spare = false) {
    Node n;
    n.id = id;
    n.hostname = id;
    n.gpus = 8;
    n.topology = {{"spine", "s0"}, {"leaf", leaf}};
    n.nvlink_domain = id;
    n.spare = spare;
    std::optional<Result<Controller::NodeUpsert>> out;
    controller_->UpsertNode(n, false, [&](Result<Controller::NodeUpsert> r) { out = std::move(r); });
    Drain();
    return *out;
  }

  JobSpec Spec(int gpus, int tp) {
    JobSpec s;
    s.name = "t";
    s.model = {1e9, 8, 1024, 8, 1024, 32000};
    s.training.global_batch_size = 64;
    s.resources.gpus = gpus;
    s.parallelism = {false, tp, 1, gpus / tp, 0};
    return s;
  }

  Result<Json> Submit(int gpus, int tp = 8) {
    JobSpec s = Spec(gpus, tp);
    auto est = controller_->PlanFor(s);
    EXPECT_TRUE(est.ok()) << est.status().message();
    std::optional<Result<Json>> out;
    controller_->SubmitJob(s, *est, [&](Result<Json> r) { out = std::move(r); });
    Drain();
    return *out;
  }

  Result<Json> Cancel(const std::string& id) {
    std::optional<Result<Json>> out;
    controller_->CancelJob(id, [&](Result<Json> r) { out = std::move(r); });
    Drain();
    return *out;
  }

  FakeClock clock_;
  std::deque<std::function<void()>> posted_;
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<Controller> controller_;
};

}  // namespace

TEST_F(ControllerTest, RegisterThenUpdateKeepsCordon) {
  auto r = AddNode("n1", "l0");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->node["state"], "available");
  std::optional<Result<Json>> patched;
  controller_->PatchNode("n1", NodePatch{false, std::nullopt, std::nullopt, "bad fan"},
                         [&](Result<Json> j) { patched = std::move(j); });
  Drain();
  ASSERT_TRUE(patched->ok());
  EXPECT_EQ((**patched)["state"], "cordoned");
  auto again = AddNode("n1", "l0");  // re-registration without "schedulable" keeps the cordon
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->node["state"], "cordoned");
}

TEST_F(ControllerTest, FifoQueueStartsWhenCapacityFrees) {
  AddNode("n1", "l0");
  AddNode("n2", "l0");
  auto a = Submit(16);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ((*a)["state"], "running");
  auto b = Submit(8);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["state"], "queued");
  auto pl = controller_->GetPlacement((*b)["id"]);
  EXPECT_EQ(pl.status().code(), Code::kConflict);
  ASSERT_TRUE(Cancel((*a)["id"]).ok());
  auto b_now = controller_->GetJob((*b)["id"]);
  EXPECT_EQ((*b_now)["state"], "running");
  EXPECT_EQ(controller_->cluster().FreeUsableGpus(), 8);
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
  auto text = controller_->GetPlacement((*ok)["id"]);
  ASSERT_TRUE(text.ok());
  auto pl = ParseJsonText(*text);
  ASSERT_TRUE(pl.ok());
  for (const auto& r : (*pl)["ranks"]) EXPECT_EQ(r["node"], "n1");
  EXPECT_EQ((*pl)["quality"]["tp_groups_split"], 0);
}

TEST_F(ControllerTest, DeleteNodeRefusedWhileRanksRun) {
  AddNode("n1", "l0");
  auto job = Submit(8);
  std::optional<Result<Json>> del;
  controller_->DeleteNode("n1", [&](Result<Json> r) { del = std::move(r); });
  Drain();
  EXPECT_EQ(del->status().code(), Code::kConflict);
  ASSERT_TRUE(Cancel((*job)["id"]).ok());
  controller_->DeleteNode("n1", [&](Result<Json> r) { del = std::move(r); });
  Drain();
  EXPECT_TRUE(del->ok());
  EXPECT_EQ(controller_->GetNode("n1").status().code(), Code::kNotFound);
}

TEST_F(ControllerTest, RecoveryRestoresNodesJobsAllocationsAndQueue) {
  AddNode("n1", "l0");
  auto running = Submit(8);
  auto queued = Submit(8);
  ASSERT_EQ((*queued)["state"], "queued");
  Reset();  // a new controller over the same durable store
  auto r = controller_->GetJob((*running)["id"]);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["state"], "running");
  EXPECT_EQ(controller_->cluster().AllocatedGpus("n1"), 8);
  auto text = controller_->GetPlacement((*running)["id"]);
  ASSERT_TRUE(text.ok());
  auto pl = ParseJsonText(*text);
  ASSERT_TRUE(pl.ok());
  EXPECT_EQ((*pl)["ranks"][3]["tp"], 3);
  EXPECT_EQ((*controller_->GetJob((*queued)["id"]))["state"], "queued");
  AddNode("n2", "l0");  // capacity arrives: the recovered queue moves
  EXPECT_EQ((*controller_->GetJob((*queued)["id"]))["state"], "running");
  auto third = Submit(8);
  EXPECT_EQ((*third)["id"], "job-000003");  // ids continue after recovery
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
  EXPECT_EQ(store_->writes_seen(), 2);
  Reset();  // what a restart recovers: only the acknowledged node
  EXPECT_TRUE(controller_->GetNode("n1").ok());
  EXPECT_EQ(controller_->GetNode("n2").status().code(), Code::kNotFound);
}

}  // namespace shepherd
