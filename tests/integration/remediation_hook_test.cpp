// The remediation hook of jobs Shepherd does not launch, through the real daemon: the configured command
// runs with the finding as JSON on stdin.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RemediationHook, RunsWithTheFindingOnStdinForAnExternalJob) {
  TempDir dir;
  const std::string out = dir.path + "/hook.json";
  {
    std::ofstream cfg(dir.path + "/config.json");
    cfg << Json{
        {"remediation_hook", {"/bin/sh", "-c", "cat > " + out + ".tmp && mv " + out + ".tmp " + out}},
        {"tick_interval_s",
         0.05}}.dump();
  }
  Daemon d(dir.path, {"--config", dir.path + "/config.json"});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes",
                 R"({"id": "n0", "gpus": 2, "topology": {"spine": "s0", "leaf": "l0"}})")
                .status,
            201);
  HttpResult job = Http(d.port(), "POST", "/v1/jobs", R"({"name": "ext", "model": {"parameters": 1e6,
      "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000}, "training": {"global_batch_size": 8},
      "parallelism": {"tp": 1, "pp": 1, "dp": 2}, "resources": {"gpus": 2, "gpus_per_node": 2},
      "policy": {"heartbeat_interval_s": 0.1, "heartbeat_timeout_s": 0.5, "startup_grace_s": 0.5,
                 "external_remediation": "hook"}})");
  ASSERT_EQ(job.status, 201) << job.body;
  const std::string id = Json::parse(job.body)["id"];
  // Rank 0 reports once (the job is launched), rank 1 never: after the grace rank 1 is lost.
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + id + "/reports",
                 R"({"reports": [{"rank": 0, "attempt": 1, "kind": "heartbeat", "node": "h0"}]})")
                .status,
            202);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string text;
  while ((text = ReadFile(out)).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_FALSE(text.empty()) << d.log();
  Json f = Json::parse(text);
  EXPECT_EQ(f["job"], id);
  EXPECT_EQ(f["kind"], "heartbeat_lost");
  EXPECT_FALSE(f["recommended_actions"].empty());
  // Shepherd itself stopped nothing.
  Json j = Json::parse(Http(d.port(), "GET", "/v1/jobs/" + id).body);
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["state"], "running");
}

}  // namespace
}  // namespace shepherd::testing
