// The real daemon against one credential trying to stall the others: slow 4 MiB bodies filling the shared
// body budget, bodies dribbled to hold their reservations, and one token holding thousands of connections.
// Heartbeats and reports must still be answered at once, and other identities must still connect.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kViewer = "viewer-token-0123456789";
constexpr const char* kAgentN0 = "agent-n0-token-0123456789";
const std::string kNodeN0 =
    R"({"id": "n0", "hostname": "h0", "gpus": 2, "topology": {"spine": "s0", "leaf": "l0"}})";
const std::string kExternalJob = R"({"name": "a", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
  "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32}, "parallelism": {"tp": 1, "pp": 1,
  "dp": 1}, "resources": {"gpus": 1, "gpus_per_node": 1}})";

// A daemon with admin, viewer and agent (n0) tokens and `config` (JSON) as its configuration file.
struct Fleet {
  explicit Fleet(const std::string& config) {
    const std::string tokens = dir.path + "/tokens.json";
    {
      std::ofstream(tokens) << R"({"tokens": [{"token": ")" << kAdmin
                            << R"(", "role": "admin", "name": "ops"}, {"token": ")" << kViewer
                            << R"(", "role": "viewer", "name": "v"}, {"token": ")" << kAgentN0
                            << R"(", "role": "agent", "node": "n0"}]})";
    }
    ::chmod(tokens.c_str(), 0600);
    const std::string cfg = dir.path + "/config.json";
    { std::ofstream(cfg) << config; }
    daemon = std::make_unique<Daemon>(dir.path,
                                      std::vector<std::string>{"--tokens-file", tokens, "--config", cfg});
  }
  int port() const { return daemon->port(); }
  TempDir dir;
  std::unique_ptr<Daemon> daemon;
};

// `expect_continue`: the server answers 100 Continue once it has reserved the body's budget.
std::string Head(const std::string& method, const std::string& target, const std::string& token,
                 std::size_t content_length, bool expect_continue = false) {
  return method + " " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(content_length) + "\r\n" +
         (expect_continue ? "Expect: 100-continue\r\n" : "") + "\r\n";
}

HttpResult Request(Connection& c, const std::string& method, const std::string& target,
                   const std::string& token, const std::string& body) {
  if (!c.Send(Head(method, target, token, body.size()) + body)) return {};
  return c.Read();
}

HttpResult Request(int port, const std::string& method, const std::string& target, const std::string& token,
                   const std::string& body) {
  Connection c(port);
  return Request(c, method, target, token, body);
}

// Node n0 registered (2 GPUs) and an external job whose rank token the daemon hands out once; the job's id
// and that token.
std::pair<std::string, std::string> RegisterNodeAndExternalJob(int port) {
  EXPECT_EQ(Request(port, "POST", "/v1/nodes", kAgentN0, kNodeN0).status / 100, 2);
  HttpResult job = Request(port, "POST", "/v1/jobs", kAdmin, kExternalJob);
  EXPECT_EQ(job.status, 201) << job.body;
  Json j = Json::parse(job.body);
  return {j.value("id", ""), j.value("rank_token", "")};
}

struct Timed {
  int status = 0;
  std::string body;
  milliseconds took{0};
};
template <typename F>
Timed Time(F f) {
  const auto start = steady_clock::now();
  HttpResult r = f();
  return {r.status, r.body, std::chrono::duration_cast<milliseconds>(steady_clock::now() - start)};
}

// 64 connections announce 4 MiB bodies with `token` on `target` and send 64 KiB of each, then hold them
// (the whole shared budget on a daemon that does not budget per class and identity). Returns the
// connections and how many were refused at once with 429.
std::vector<std::unique_ptr<Connection>> Dribble(int port, const std::string& target,
                                                 const std::string& token, int* refused) {
  std::vector<std::unique_ptr<Connection>> conns;
  const std::string part(64 * 1024, ' ');
  *refused = 0;
  for (int i = 0; i < 64; ++i) {
    auto c = std::make_unique<Connection>(port, std::chrono::seconds(2));
    EXPECT_TRUE(c->ok());
    c->Send(Head("POST", target, token, 4 << 20));
    c->Send(part);
    conns.push_back(std::move(c));
  }
  for (auto& c : conns)
    if (c->Read().status == 429) ++*refused;  // a held connection answers nothing within 2 s
  return conns;
}

void ExpectLivenessAnsweredPromptly(int port, const std::string& job, const std::string& rank_token) {
  for (int i = 0; i < 5; ++i) {
    Timed hb = Time(
        [&] { return Request(port, "POST", "/v1/nodes/n0/heartbeat", kAgentN0, R"({"processes": []})"); });
    EXPECT_EQ(hb.status, 200) << "heartbeat " << i;
    EXPECT_LT(hb.took.count(), 2000) << "heartbeat " << i;
    Timed report = Time([&] {
      return Request(port, "POST", "/v1/jobs/" + job + "/reports", rank_token,
                     R"({"reports": [{"rank": 0, "attempt": 1, "kind": "step", "step": )" +
                         std::to_string(i + 1) + R"(, "loss": 2.0}]})");
    });
    EXPECT_EQ(report.status / 100, 2)
        << "report " << i << " answered " << report.status << " " << report.body;
    EXPECT_LT(report.took.count(), 2000) << "report " << i;
  }
}

// A viewer dribbling 64 slow 4 MiB bodies made 44 of 45 agent heartbeats get 503 and fenced every rank.
TEST(Fairness, AViewersSlowBodiesDoNotStarveHeartbeatsOrReports) {
  Fleet f("{}");  // the defaults; within the test's 2 s no body is slow enough to be cut off
  ASSERT_TRUE(f.daemon->WaitReady()) << f.daemon->log();
  auto [job, rank_token] = RegisterNodeAndExternalJob(f.port());
  ASSERT_EQ(rank_token.size(), 64u);
  int refused = 0;
  auto held = Dribble(f.port(), "/v1/plan", kViewer, &refused);
  EXPECT_GE(refused, 63) << "a viewer holds at most one 4 MiB body at a time";
  ExpectLivenessAnsweredPromptly(f.port(), job, rank_token);
  // The viewer's own share is spent: its next body is its own 429, the admin's is served.
  EXPECT_EQ(Request(f.port(), "POST", "/v1/plan", kViewer, "{}").status, 429);
  EXPECT_EQ(Request(f.port(), "GET", "/v1/jobs", kAdmin, "").status, 200);
}

TEST(Fairness, ARankTokensSlowBodiesDoNotStarveHeartbeatsOrOtherReports) {
  Fleet f("{}");
  ASSERT_TRUE(f.daemon->WaitReady()) << f.daemon->log();
  auto [job, rank_token] = RegisterNodeAndExternalJob(f.port());
  auto [other_job, other_token] = RegisterNodeAndExternalJob(f.port());
  ASSERT_EQ(other_token.size(), 64u);
  int refused = 0;
  auto held = Dribble(f.port(), "/v1/jobs/" + job + "/reports", rank_token, &refused);
  EXPECT_GE(refused, 60) << "one identity holds at most 16 MiB of bodies at a time";
  ExpectLivenessAnsweredPromptly(f.port(), other_job, other_token);
  EXPECT_EQ(Request(f.port(), "POST", "/v1/jobs", kAdmin, "{}").status, 422);  // people's writes too
}

// Dribbled bodies are cut off once they fall below the minimum rate (defaults: 16 KiB/s after a 5 s
// grace), and their reservation is released.
TEST(Fairness, DribbledBodiesAreCutOffByTheReadDeadline) {
  Fleet f("{}");
  ASSERT_TRUE(f.daemon->WaitReady()) << f.daemon->log();
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < 4; ++i) {  // the admin's whole 16 MiB share
    conns.push_back(std::make_unique<Connection>(f.port()));
    ASSERT_TRUE(conns.back()->Send(Head("POST", "/v1/jobs", kAdmin, 4 << 20, /*expect_continue=*/true)));
    ASSERT_EQ(conns.back()->Read().status, 100) << i;
  }
  EXPECT_EQ(Request(f.port(), "POST", "/v1/jobs", kAdmin, "{}").status, 429);
  // 64 bytes every 100 ms (640 B/s) until the server closes; bounded by 15 s.
  const auto start = steady_clock::now();
  std::vector<bool> open(conns.size(), true);
  std::size_t still_open = conns.size();
  while (still_open > 0 && steady_clock::now() - start < std::chrono::seconds(15)) {
    for (std::size_t i = 0; i < conns.size(); ++i)
      if (open[i] && !conns[i]->Send(std::string(64, ' '))) {
        open[i] = false;
        --still_open;
      }
    std::this_thread::sleep_for(milliseconds(100));
  }
  const auto cut_after = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
  std::printf("4 dribbled bodies cut off after %lld ms (grace 5 s, minimum 16 KiB/s)\n",
              static_cast<long long>(cut_after.count()));
  EXPECT_EQ(still_open, 0u) << "dribbled connections still open after " << cut_after.count() << " ms";
  EXPECT_LT(cut_after.count(), 10000);
  // Their reservations are back: the admin's next body is read (and refused for what it says).
  EXPECT_EQ(Request(f.port(), "POST", "/v1/jobs", kAdmin, "{}").status, 422);
}

// One rank token held about 10,000 authenticated connections, never evicted; a restarted agent was then
// locked out for 36 s.
TEST(Fairness, OneTokensConnectionsAreCappedAndItsOldestIdleOnesEvicted) {
  // At most 64 connections per identity; no heartbeat rate limit (64 heartbeats at once are this test's tool).
  Fleet f(R"({"heartbeats_per_node_s": 0})");
  ASSERT_TRUE(f.daemon->WaitReady()) << f.daemon->log();
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < 200; ++i) {
    conns.push_back(std::make_unique<Connection>(f.port(), std::chrono::seconds(3)));
    HttpResult r = Request(*conns.back(), "POST", "/v1/nodes", kAgentN0, kNodeN0);
    ASSERT_EQ(r.status / 100, 2) << "connection " << i << ": " << r.status << " " << r.body;
  }
  int closed = 0;
  while (closed < 136 && conns[closed]->WaitClosed()) ++closed;
  EXPECT_EQ(closed, 136) << "the agent's oldest idle connections are closed beyond its cap of 64";
  for (int i = 136; i < 200; ++i)
    EXPECT_EQ(Request(*conns[i], "POST", "/v1/nodes/n0/heartbeat", kAgentN0, "{}").status, 200) << i;
  // A restarted agent (new connections, same token) and other identities are served at once.
  for (int i = 0; i < 3; ++i) {
    Timed hb = Time([&] { return Request(f.port(), "POST", "/v1/nodes/n0/heartbeat", kAgentN0, "{}"); });
    EXPECT_EQ(hb.status, 200);
    EXPECT_LT(hb.took.count(), 2000);
  }
  EXPECT_EQ(Request(f.port(), "GET", "/v1/jobs", kAdmin, "").status, 200);
  EXPECT_EQ(Request(f.port(), "GET", "/v1/jobs", kViewer, "").status, 200);
}

// A rank token for any rank of a job (another launcher's job, a Slurm step) may be shared by all its ranks,
// which report at the same step boundary: it keeps the larger max_connections_per_rank_token (1024).
TEST(Fairness, AJobWideRankTokenKeepsItsLargerCap) {
  Fleet f("{}");
  ASSERT_TRUE(f.daemon->WaitReady()) << f.daemon->log();
  auto [job, rank_token] = RegisterNodeAndExternalJob(f.port());
  const std::string target = "/v1/jobs/" + job + "/reports";
  const std::string report = R"({"reports": [{"rank": 0, "attempt": 1, "kind": "heartbeat"}]})";
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < 80; ++i) {
    conns.push_back(std::make_unique<Connection>(f.port(), std::chrono::seconds(3)));
    ASSERT_EQ(Request(*conns.back(), "POST", target, rank_token, report).status, 202) << i;
  }
  for (int i = 0; i < 80; ++i)
    EXPECT_EQ(Request(*conns[i], "POST", target, rank_token, report).status, 202) << "connection " << i;
}

// At max_connections, a newcomer closes an idle connection of the identity holding more than its share:
// a flood of one identity never locks another out.
TEST(Fairness, AtTheGlobalCapANewIdentityEvictsTheBiggestHoldersIdleConnection) {
  Fleet f(R"({"max_connections": 16})");
  ASSERT_TRUE(f.daemon->WaitReady()) << f.daemon->log();
  std::vector<std::unique_ptr<Connection>> held;
  for (int i = 0; i < 14; ++i) {
    held.push_back(std::make_unique<Connection>(f.port()));
    ASSERT_EQ(Request(*held.back(), "GET", "/v1/jobs", kAdmin, "").status, 200) << i;
  }
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<Connection>(f.port()));
    ASSERT_EQ(Request(*held.back(), "GET", "/v1/jobs", kViewer, "").status, 200) << i;
  }
  // 16 of 16, all authenticated and idle: the agent's connection takes the admin's oldest.
  Connection agent(f.port());
  EXPECT_EQ(Request(agent, "POST", "/v1/nodes", kAgentN0, kNodeN0).status, 201);
  EXPECT_TRUE(held[0]->WaitClosed());
  EXPECT_EQ(Request(*held[15], "GET", "/v1/jobs", kViewer, "").status, 200);  // the viewer kept its own
}

// Authenticated connections count against their identity, not their address: thousands of agents
// behind one NAT address are not limited by max_connections_per_address.
TEST(Fairness, AuthenticatedConnectionsLeaveTheirAddresssCount) {
  Fleet f(R"({"max_connections_per_address": 4})");
  ASSERT_TRUE(f.daemon->WaitReady()) << f.daemon->log();
  std::vector<std::unique_ptr<Connection>> held;
  for (int i = 0; i < 12; ++i) {
    held.push_back(std::make_unique<Connection>(f.port()));
    ASSERT_EQ(Request(*held.back(), "GET", "/v1/jobs", i % 2 ? kAdmin : kViewer, "").status, 200) << i;
  }
  for (auto& c : held) EXPECT_EQ(Request(*c, "GET", "/v1/jobs", kAdmin, "").status, 200);
  EXPECT_EQ(Request(f.port(), "POST", "/v1/nodes", kAgentN0, kNodeN0).status, 201);
}

}  // namespace
}  // namespace shepherd::testing
