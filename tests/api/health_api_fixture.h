// HealthApiTest: one 8-GPU node and a TP 2 x DP 4 job through the API (router + controller + detectors) with
// simulated time; helpers to report, advance a second and list findings. Shared by the health API tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/api/api_harness.h"

namespace shepherd::testing {

// One 8-GPU node; TP 2 × DP 4 (rank = tp + 2·dp); short, explicit policy.
class HealthApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(api_.Post("/v1/nodes", Json::parse(R"({"id": "n0", "gpus": 8,
        "topology": {"spine": "s0", "leaf": "l0"}})"))
                  .status,
              201);
    Json job = Json::parse(R"({"name": "h", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
        "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 2, "pp": 1, "dp": 4}, "resources": {"gpus": 8},
        "command": ["python3", "train.py"],
        "policy": {"heartbeat_interval_s": 1, "heartbeat_timeout_s": 10, "startup_grace_s": 30,
                   "hang_timeout_s": 60, "sdc_check_every_steps": 10, "straggler_window_steps": 8,
                   "straggler_factor": 1.5, "good_after_steps": 5}})");
    ApiReply r = api_.Post("/v1/jobs", job);
    ASSERT_EQ(r.status, 201) << r.body.dump();
    ASSERT_EQ(r.body["state"], "launching");
    job_ = r.body["id"];
  }

  ApiReply Report(const Json& reports) {
    return api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", reports}});
  }
  Json Heartbeat(int rank, int64_t step, const Json& extra = Json::object()) {
    Json r = {{"rank", rank}, {"attempt", 1}, {"kind", "heartbeat"}, {"step", step}};
    r.update(extra);
    return r;
  }
  Json Step(int rank, int64_t step, const Json& loss, double step_time = 1.0, double grad = 1.0) {
    return {{"rank", rank}, {"attempt", 1},      {"kind", "step"},          {"step", step},
            {"loss", loss}, {"grad_norm", grad}, {"step_time_s", step_time}};
  }
  // One simulated second: `batch` is reported, the clock moves one second, the daemon ticks. Returns the
  // reports' HTTP status (409 once recovery has stopped the attempt).
  int Second(const Json& batch) {
    int status = Report(batch).status;
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
    return status;
  }
  // Every rank reports `step`.
  void AllStep(int64_t step, double loss = 2.0, int slow_rank = -1) {
    Json batch = Json::array();
    for (int r = 0; r < 8; ++r) batch.push_back(Step(r, step, loss, r == slow_rank ? 3.0 : 1.0));
    ASSERT_EQ(Second(batch), 202);
  }
  std::vector<Json> OfKind(const std::string& kind) {
    Json all = api_.Get("/v1/failures?kind=" + kind + "&job=" + job_).body["failures"];
    return std::vector<Json>(all.begin(), all.end());
  }

  ApiHarness api_;
  std::string job_;
};

}  // namespace shepherd::testing
