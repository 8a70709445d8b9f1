// AgentApiTest: the daemon's API in process with simulated time, three 4-GPU nodes (n0, n1, spare sp0)
// whose agents have heartbeated, and an 8-rank job our agents launch (job_), placed on n0 and n1.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/api/api_harness.h"

namespace shepherd::testing {

class AgentApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"n0", "n1", "sp0"}) {
      Json node = {{"id", n},
                   {"hostname", std::string("host-") + n},
                   {"gpus", 4},
                   {"topology", {{"spine", "s0"}, {"leaf", "l0"}}},
                   {"spare", std::string(n) == "sp0"}};
      ASSERT_EQ(api_.Post("/v1/nodes", node).status, 201);
      ASSERT_EQ(Heartbeat(n, Json::array()).status, 200);
    }
    Json job = Json::parse(R"({"name": "a", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
        "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 1, "pp": 1, "dp": 8}, "resources": {"gpus": 8, "gpus_per_node": 4},
        "command": ["python3", "train.py"], "env": {"FOO": "bar"},
        "policy": {"startup_grace_s": 600, "restart_backoff_s": 0}})");
    ApiReply r = api_.Post("/v1/jobs", job);
    ASSERT_EQ(r.status, 201) << r.body.dump();
    job_ = r.body["id"];
  }

  ApiReply Heartbeat(const std::string& node, const Json& processes, const Json& faults = Json::array()) {
    return api_.Post("/v1/nodes/" + node + "/heartbeat", {{"processes", processes}, {"gpu_faults", faults}});
  }
  Json Running(const std::string& node, int attempt) {
    Json procs = Json::array(), assigned = Assignments(node);
    for (const Json& r : assigned["ranks"])
      if (r["attempt"] == attempt)
        procs.push_back({{"job", r["job"]},
                         {"attempt", attempt},
                         {"rank", r["rank"]},
                         {"pid", 1000 + r["rank"].get<int>()},
                         {"state", "running"}});
    return procs;
  }
  // A node's assignments are answered once its agent has heartbeated since the daemon started.
  Json Assignments(const std::string& node) {
    if (heard_.insert(node).second) Heartbeat(node, Json::array());
    return api_.Get("/v1/nodes/" + node + "/assignments?version=-1&wait=0&keep=1").body;
  }
  Json Job() { return api_.Get("/v1/jobs/" + job_).body; }

  ApiHarness api_;
  std::string job_;
  std::set<std::string> heard_;
};

}  // namespace shepherd::testing
