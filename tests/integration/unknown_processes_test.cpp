// Unknown processes on the real binaries: a daemon started on a new, empty database does not order a real
// agent to stop the ranks it runs; they show as unknown_processes on their node until an operator stops them
// or unknown_process_timeout_s passes. Healthy case: a daemon that launched the ranks shows none. Fencing by
// the agent lease for an agent that cannot act (SIGSTOP): its fence keeper stops the ranks by the lease; and
// for an agent restarted while cut off from the daemon: the ranks it adopts keep their lease.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "core/json.h"
#include "core/time.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

using namespace std::chrono_literals;

Json J(const HttpResult& r) {
  return Json::parse(r.body.empty() ? "null" : r.body, nullptr, false);
}

std::string JobBody() {
  return Json{
      {"name", "t"},
      {"model", {{"parameters", 1e8}, {"layers", 8}, {"hidden", 1024}, {"heads", 8}, {"seq_len", 1024}}},
      {"training", {{"global_batch_size", 8}}},
      {"parallelism", {{"tp", 2}, {"pp", 1}, {"dp", 1}}},
      {"resources", {{"gpus", 2}}},
      {"command", {"sleep", "300"}}}
      .dump();
}

std::string Config(const std::string& dir, double unknown_timeout_s) {
  std::string path = dir + "/config.json";
  std::ofstream(path) << Json{{"unknown_process_timeout_s", unknown_timeout_s}}.dump();
  return path;
}

Json UnknownOf(int port) {
  Json node = J(Http(port, "GET", "/v1/nodes/n1"));
  return node.is_object() ? node.value("unknown_processes", Json::array()) : Json::array();
}

// Daemon A launches a 2-rank job on n1 through the real agent, then stops. Returns the ranks' pids.
struct Fleet {
  TempDir a_dir, agent_dir;
  std::optional<Daemon> a;
  std::optional<AgentProcess> agent;
  int port = 0;
  std::set<pid_t> ranks;
  size_t agent_log_at_b = 0;  // the agent's log up to daemon B's start

  void LaunchThenStopDaemonA() {
    a.emplace(a_dir.path);
    ASSERT_TRUE(a->WaitReady()) << a->log();
    port = a->port();
    agent.emplace(port, agent_dir.path);
    ASSERT_TRUE(Eventually([&] {
      return J(Http(port, "GET", "/v1/nodes/n1")).value("agent_attached", false);
    })) << agent->log();
    ASSERT_EQ(Http(port, "POST", "/v1/jobs", JobBody()).status, 201);
    ASSERT_TRUE(Eventually([&] { return agent->RankPids().size() == 2; })) << agent->log();
    ASSERT_TRUE(Eventually([&] { return J(Http(port, "GET", "/v1/jobs/job-000001"))["state"] == "running"; }))
        << a->log();
    ranks = agent->RankPids();
    // Healthy: the daemon that launched them knows them.
    EXPECT_EQ(UnknownOf(port), Json::array());
    a->Signal(SIGTERM);
    ASSERT_EQ(a->Wait(), 0);
  }

  // Daemon B on a fresh, empty database, on A's address so the same agent re-attaches.
  Daemon StartDaemonB(const TempDir& dir, double unknown_timeout_s) {
    agent_log_at_b = agent->log().size();
    return Daemon(dir.path, {"--listen", "127.0.0.1:" + std::to_string(port), "--config",
                             Config(dir.path, unknown_timeout_s)});
  }
};

TEST(UnknownProcesses, AnEmptyDatabaseKeepsTheRanksUntilAnOperatorStopsThem) {
  Fleet f;
  ASSERT_NO_FATAL_FAILURE(f.LaunchThenStopDaemonA());
  TempDir b_dir;
  Daemon b = f.StartDaemonB(b_dir, /*unknown_timeout_s=*/0);
  ASSERT_TRUE(b.WaitReady()) << b.log();
  ASSERT_TRUE(Eventually([&] { return UnknownOf(f.port).size() == 2; })) << b.log() << f.agent->log();
  Json unknown = UnknownOf(f.port);
  std::set<pid_t> shown;
  for (const Json& u : unknown) {
    EXPECT_EQ(u["job"], "job-000001");
    EXPECT_EQ(u["decision"], "keep");
    EXPECT_TRUE(u.contains("first_seen"));
    shown.insert(u.value("pid", 0));
  }
  EXPECT_EQ(shown, f.ranks);
  // The agent has acted on an answer of daemon B (it logs each new answer; the re-registration after B's
  // 404 makes B's first answer new) and kept both ranks.
  ASSERT_TRUE(Eventually([&] {
    return f.agent->log().find("assignments version", f.agent_log_at_b) != std::string::npos;
  })) << f.agent->log();
  HttpResult listed = Http(f.port, "GET", "/v1/nodes");
  EXPECT_EQ(J(listed)["nodes"][0]["unknown_processes"].size(), 2u) << listed.body;
  for (pid_t p : f.ranks) EXPECT_TRUE(Alive(p)) << p;
  EXPECT_EQ(f.agent->log().find("agent: stopping", f.agent_log_at_b), std::string::npos) << f.agent->log();
  // An agent that cannot keep (no keep=1) gets no answer that would stop them.
  HttpResult old = Http(f.port, "GET", "/v1/nodes/n1/assignments?version=0&wait=0");
  EXPECT_EQ(old.status, 503) << old.body;
  EXPECT_EQ(Http(f.port, "GET", "/v1/nodes/n1/assignments?version=0&wait=0&keep=2").status, 422);

  HttpResult stop = Http(f.port, "POST", "/v1/nodes/n1/unknown-processes/stop");
  ASSERT_EQ(stop.status, 200) << stop.body;
  // Named: a range-for over J(stop)["..."] would iterate an array of a temporary destroyed before the loop.
  const Json stopped = J(stop);
  ASSERT_FALSE(stopped["unknown_processes"].empty()) << stop.body;
  for (const Json& u : stopped["unknown_processes"]) EXPECT_EQ(u["decision"], "stop");
  EXPECT_TRUE(Eventually([&] { return !Alive(*f.ranks.begin()) && !Alive(*f.ranks.rbegin()); }))
      << f.agent->log();
  EXPECT_TRUE(Eventually([&] { return UnknownOf(f.port).empty(); })) << b.log();
  EXPECT_EQ(Http(f.port, "POST", "/v1/nodes/n9/unknown-processes/stop").status, 404);
}

TEST(UnknownProcesses, TheConfiguredTimeoutStopsThem) {
  Fleet f;
  ASSERT_NO_FATAL_FAILURE(f.LaunchThenStopDaemonA());
  TempDir b_dir;
  Daemon b = f.StartDaemonB(b_dir, /*unknown_timeout_s=*/3);
  ASSERT_TRUE(b.WaitReady()) << b.log();
  ASSERT_TRUE(Eventually([&] { return UnknownOf(f.port).size() == 2; })) << b.log() << f.agent->log();
  std::optional<Time> first_seen = ParseRfc3339(UnknownOf(f.port)[0]["first_seen"].get<std::string>());
  ASSERT_TRUE(first_seen);
  for (pid_t p : f.ranks) EXPECT_TRUE(Alive(p)) << p;
  EXPECT_TRUE(Eventually([&] { return !Alive(*f.ranks.begin()) && !Alive(*f.ranks.rbegin()); }))
      << f.agent->log();
  // Not before the timeout, counted from when daemon B first saw them.
  EXPECT_GE(ToSeconds(std::chrono::system_clock::now() - *first_seen), 3.0);
  EXPECT_NE(b.log().find("its agent stops them"), std::string::npos) << b.log();
}

// A SIGSTOPped agent cannot fence its ranks itself: the fence keeper `shepherdd agent` forks stops them
// once the lease runs out, not while the agent heartbeats (docs/agent-protocol.md, "Lease").
TEST(Fencing, AStoppedAgentsRanksAreStoppedByItsLease) {
  constexpr double kLease = 3;
  TempDir dir, agent_dir;
  std::string config = dir.path + "/config.json";
  std::ofstream(config) << Json{{"agent_lease_s", kLease}, {"node_heartbeat_timeout_s", 1}}.dump();
  Daemon d(dir.path, {"--config", config});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  AgentProcess agent(d.port(), agent_dir.path);
  ASSERT_TRUE(Eventually([&] {
    return J(Http(d.port(), "GET", "/v1/nodes/n1")).value("agent_attached", false);
  })) << agent.log();
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs", JobBody()).status, 201);
  ASSERT_TRUE(Eventually([&] { return agent.RankPids().size() == 2; })) << agent.log();
  std::set<pid_t> ranks = agent.RankPids();
  // Healthy: a heartbeating agent's ranks outlive several leases.
  std::this_thread::sleep_for(std::chrono::duration<double>(1.5 * kLease));
  for (pid_t p : ranks) EXPECT_TRUE(Alive(p)) << "rank " << p << " fenced while its agent heartbeats";

  ASSERT_EQ(kill(agent.pid(), SIGSTOP), 0);
  auto stopped = std::chrono::steady_clock::now();
  EXPECT_TRUE(Eventually([&] { return !Alive(*ranks.begin()) && !Alive(*ranks.rbegin()); })) << agent.log();
  double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  EXPECT_LE(after_s, kLease + 1.0);  // the lease counts from the last heartbeat sent: never later
  kill(agent.pid(), SIGCONT);
}

// An agent restarted while the daemon is unreachable adopts its predecessor's ranks together with that
// agent's lease: they are stopped when it ends, as the killed agent would have, so an old attempt never
// runs beside its replacements (docs/agent-protocol.md, "Lease").
TEST(Fencing, AnAgentRestartedWhileCutOffFencesTheRanksItAdopts) {
  constexpr double kLease = 4;
  TempDir dir, agent_dir;
  std::string config = dir.path + "/config.json";
  std::ofstream(config) << Json{{"agent_lease_s", kLease}, {"node_heartbeat_timeout_s", 1}}.dump();
  Daemon d(dir.path, {"--config", config});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  AgentProcess first(d.port(), agent_dir.path);
  ASSERT_TRUE(Eventually([&] {
    return J(Http(d.port(), "GET", "/v1/nodes/n1")).value("agent_attached", false);
  })) << first.log();
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs", JobBody()).status, 201);
  ASSERT_TRUE(Eventually([&] { return first.RankPids().size() == 2; })) << first.log();
  std::set<pid_t> ranks = first.RankPids();
  ASSERT_TRUE(Eventually([&] { return first.KeeperPid() > 0; })) << first.log();

  // The daemon goes away; the last lease it granted was sent no later than now.
  auto cut_off = std::chrono::steady_clock::now();
  d.Signal(SIGTERM);
  ASSERT_EQ(d.Wait(), 0) << d.log();
  // The agent and its keeper are killed; a new agent starts on the same state directory.
  kill(first.KeeperPid(), SIGKILL);
  kill(first.pid(), SIGKILL);
  waitpid(first.pid(), nullptr, 0);
  for (pid_t p : ranks) ASSERT_TRUE(Alive(p)) << "rank " << p << " stopped before the lease ended";
  AgentProcess second(d.port(), agent_dir.path);
  ASSERT_TRUE(Eventually([&] { return second.log().find("adopted") != std::string::npos; })) << second.log();

  EXPECT_TRUE(Eventually([&] { return !Alive(*ranks.begin()) && !Alive(*ranks.rbegin()); },
                         std::chrono::milliseconds(static_cast<int>(kLease * 1000) + 10000)))
      << second.log();
  double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_off).count();
  EXPECT_LE(after_s, kLease + 1.5) << second.log();  // by the old lease's expiry, not later
  std::cout << "adopted ranks stopped " << after_s << " s after the daemon went away (lease " << kLease
            << " s)\n";
  EXPECT_NE(second.log().find("keep the lease of the agent that started them"), std::string::npos)
      << second.log();
}

}  // namespace
}  // namespace shepherd::testing
