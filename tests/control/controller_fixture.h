// ControllerTest: the Controller with an in-memory store behind a fault-injecting one, and a fake clock.
// Store completions are posted to a queue that the test drains, as the daemon's io thread would.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "control/controller.h"
#include "tests/control/control_test_util.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/faulty_store.h"

namespace shepherd {

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

  Result<NodeUpsert> AddNode(const std::string& id, const std::string& leaf, bool spare = false) {
    Node n = testing::MakeNode(id, leaf, spare);
    std::optional<Result<NodeUpsert>> out;
    controller_->UpsertNode(n, false, [&](Result<NodeUpsert> r) { out = std::move(r); });
    Drain();
    return *out;
  }

  // A job another launcher starts (no command): these tests are about admission and the queue.
  JobSpec Spec(int gpus, int tp) {
    JobSpec s = testing::MakeSpec(gpus, tp);
    s.command.clear();
    s.launch_mode = LaunchMode::kExternal;
    return s;
  }

  Result<JobView> Submit(int gpus, int tp = 8) {
    JobSpec s = Spec(gpus, tp);
    auto est = controller_->view().PlanFor(s);
    EXPECT_TRUE(est.ok()) << est.status().message();
    std::optional<Result<JobView>> out;
    controller_->SubmitJob(s, *est, [&](Result<JobView> r) { out = std::move(r); });
    Drain();
    return *out;
  }

  Result<JobView> Cancel(const std::string& id) {
    std::optional<Result<JobView>> out;
    controller_->CancelJob(id, "alice (submitter)", [&](Result<JobView> r) { out = std::move(r); });
    Drain();
    return *out;
  }

  FakeClock clock_;
  std::deque<std::function<void()>> posted_;
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<Controller> controller_;
};

}  // namespace shepherd
