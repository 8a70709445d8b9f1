// POST /v1/simulate and `shepherdd simulate` on the real daemon binary: an answer whose time adds up,
// refusals naming their field, and the control thread answering while a simulation runs.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <thread>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

Json J(const HttpResult& r) {
  return Json::parse(r.body);
}

// POST /v1/simulate on a connection that waits up to two minutes for the answer (a run of seconds may take
// several times longer on a machine shared with builds).
HttpResult SimulateSlowly(int port, const Json& body) {
  Connection c(port, std::chrono::seconds(120));
  if (!c.ok()) return {};
  const std::string text = body.dump();
  if (!c.Send("POST /v1/simulate HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: "
              "application/json\r\nContent-Length: " +
              std::to_string(text.size()) + "\r\n\r\n" + text))
    return {};
  return c.Read();
}

TEST(Simulate, AnswersWithTimeThatAddsUpToTheRun) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const Json body = {{"nodes", 16},
                     {"days", 10},
                     {"seeds", 3},
                     {"interval_s", 1800},
                     {"repair_hours", 2},
                     {"spares_per_leaf", 2},
                     {"faults", {{"gpu", 0.002}}}};
  HttpResult r = Http(d.port(), "POST", "/v1/simulate", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = J(r);
  const double mean = j["ettr"]["mean"].get<double>();
  EXPECT_GT(mean, 0.5);
  EXPECT_LT(mean, 1.0);
  EXPECT_LE(j["ettr"]["ci95"][0].get<double>(), mean);
  EXPECT_GE(j["ettr"]["ci95"][1].get<double>(), mean);
  EXPECT_EQ(j["seeds"].size(), 3u);
  EXPECT_EQ(j["job"]["gpus"].get<double>(), 128);  // 16 nodes of 8
  EXPECT_EQ(j["checkpoint"]["interval_s"].get<double>(), 1800);
  double seconds = 0;
  for (const auto& [name, b] : j["buckets"].items()) seconds += b["seconds"].get<double>();
  EXPECT_NEAR(seconds, 10 * 86400.0, 1.0) << r.body;
  // Productive time is the ETTR's share of the run.
  EXPECT_NEAR(j["buckets"]["productive"]["seconds"].get<double>(), mean * 10 * 86400.0, 1.0);
  EXPECT_EQ(j["spares"]["at_start"], 2);  // one leaf of 16 job nodes and its 2 spares
}

// "fleet": "inventory": the daemon's registered nodes, their spare flags and topology.
TEST(Simulate, SimulatesTheInventory) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  for (int i = 0; i < 6; ++i) {
    const Json node = {{"id", "n" + std::to_string(i)},
                       {"gpus", 4},
                       {"spare", i >= 4},  // n4, n5 are spares
                       {"topology", {{"spine", "s0"}, {"leaf", i % 2 == 0 ? "l0" : "l1"}}}};
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes", node.dump()).status, 201);
  }
  const Json body = {
      {"fleet", "inventory"}, {"days", 5}, {"seeds", 2}, {"interval_s", 1800}, {"faults", {{"gpu", 0.01}}}};
  HttpResult r = Http(d.port(), "POST", "/v1/simulate", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = J(r);
  EXPECT_EQ(j["job"]["gpus"].get<double>(), 16);  // the 4 non-spare nodes of 4 GPUs
  EXPECT_EQ(j["spares"]["at_start"], 2);
  HttpResult too_big =
      Http(d.port(), "POST", "/v1/simulate", Json{{"fleet", "inventory"}, {"nodes", 5}}.dump());
  EXPECT_EQ(too_big.status, 422) << too_big.body;
}

TEST(Simulate, RefusesBadInputNamingTheField) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const std::vector<std::pair<Json, std::string>> cases = {
      {{{"faults", {{"cosmic_rays", 0.1}}}}, "faults.cosmic_rays"},
      {{{"faults", {{"gpu", -1}}}}, "faults.gpu"},
      {{{"faults", {{"host", 0.5}}}}, "faults"},  // 0.5 × 2,176 nodes × 1,296 h: 1.4 million faults
      {{{"seeds", 1000}}, "seeds"},
      {{{"nodes", 10000000}}, "nodes"},  // 80 million GPUs
      {{{"days", 1e9}}, "days"},
      {{{"days", 300}, {"timing", {{"step_s", 0.02}}}}, "timing.step_s"},  // 1.3e9 steps
      {{{"interval_s", 0}}, "interval_s"},
      {{{"warp_drive", true}}, "warp_drive"},
  };
  for (const auto& [body, field] : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    HttpResult r = Http(d.port(), "POST", "/v1/simulate", body.dump());
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 422) << body.dump() << " " << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/problem+json") << r.body;
    const Json answer = J(r);  // kept alive: the loop walks its member
    bool named = false;
    for (const Json& e : answer["errors"]) named = named || e["field"] == field;
    EXPECT_TRUE(named) << body.dump() << " " << r.body;
    EXPECT_LT(secs, 5) << body.dump();  // refused up front, not after a run
  }
}

// A simulation of tens of seconds runs on its own thread: node registrations (the control thread) are
// answered meanwhile.
TEST(Simulate, TheControlThreadAnswersWhileASimulationRuns) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  auto sim = std::async(std::launch::async, [&] {
    return SimulateSlowly(d.port(), Json{{"nodes", 1024}, {"seeds", 1}});  // seconds of work
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let it start: pacing, not correctness
  double worst = 0;
  for (int i = 0; i < 5; ++i) {
    const Json node = {
        {"id", "n" + std::to_string(i)}, {"gpus", 8}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}};
    const auto t0 = std::chrono::steady_clock::now();
    HttpResult r = Http(d.port(), "POST", "/v1/nodes", node.dump());
    worst = std::max(worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    EXPECT_EQ(r.status, 201) << r.body;
  }
  const bool still_running = sim.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  EXPECT_LT(worst, 2.0);
  HttpResult done = sim.get();
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_TRUE(still_running) << "the simulation ended before the registrations: the check proved nothing";
}

// SIGTERM while a simulation of minutes runs: the daemon stops it at its next event and exits promptly.
TEST(Simulate, ShutdownDoesNotWaitForASimulation) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  // 16 seeds of the 54-day 16,384-GPU run: minutes of work.
  auto sim = std::async(std::launch::async, [&] { return SimulateSlowly(d.port(), Json{{"seeds", 16}}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let it start: pacing, not correctness
  const auto t0 = std::chrono::steady_clock::now();
  d.Signal(SIGTERM);
  std::optional<int> code = d.Wait(std::chrono::seconds(15));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(code.has_value()) << "still running 15 s after SIGTERM\n" << d.log();
  EXPECT_EQ(*code, 0) << d.log();
  EXPECT_LT(secs, 5) << "the drain waited for the simulation";
  EXPECT_EQ(sim.get().status, 503);  // the run was stopped, not finished
}

}  // namespace
}  // namespace shepherd::testing
