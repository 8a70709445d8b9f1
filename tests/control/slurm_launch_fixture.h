// The fixture of the Controller's "launcher": "slurm" tests (controller_slurm_launch_test.cpp: orders and
// launches; controller_slurm_recover_test.cpp: failures, endings, restarts). In-memory store, fake clock;
// the worker and Slurm are played by the test (their real counterparts: tests/slurm/launch_cluster_test).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <set>

#include "control/controller.h"
#include "slurm/step_env.h"
#include "slurm/rank_table.h"
#include "tests/control/control_test_util.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/faulty_store.h"

namespace shepherd {

class SlurmLaunchTest : public ::testing::Test {
 protected:
  using Kind = SlurmLaunchEvent::Kind;
  using State = SlurmAllocationRecord::State;

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
    s.launch_mode = LaunchMode::kSlurm;
    s.resources.spare_nodes = spares;
    s.slurm.allocation = adopt;
    auto est = controller_->view().PlanFor(s);
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
    controller_->OnSlurmReport(ev);
    Drain();
  }
  std::optional<SlurmJobOrder> OrderOf(const SlurmOrders& o, const std::string& job) {
    for (const SlurmJobOrder& j : o.jobs)
      if (j.job == job) return j;
    return std::nullopt;
  }
  JobView Job(const std::string& id) { return *controller_->view().GetJob(id); }
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

}  // namespace shepherd
