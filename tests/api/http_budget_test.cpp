// HttpServer over real loopback TCP: the body budget by class and identity, the body read deadline, and
// the connection cap per identity. `on_head` here trusts the head's "X-Who: <identity> <class> [<cap>]"
// header (class: live, std or low; cap: that identity's connection cap). Linked into http_server_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/http_server.h"
#include "tests/api/http_test_client.h"

namespace shepherd::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

HeadDecision WhoIs(const HttpRequest& head) {
  HeadDecision d;
  const std::string who = head.Header("X-Who");
  const auto space = who.find(' ');
  if (space == std::string::npos) return d;
  d.trusted = true;
  d.identity = who.substr(0, space);
  std::string c = who.substr(space + 1);
  if (const auto cap = c.find(' '); cap != std::string::npos) {
    d.max_connections = std::stoul(c.substr(cap + 1));
    c = c.substr(0, cap);
  }
  d.body_class = c == "live" ? BodyClass::kLiveness : c == "low" ? BodyClass::kLow : BodyClass::kStandard;
  return d;
}

std::string Post(const std::string& who, std::size_t length, const std::string& body = "") {
  return "POST /x HTTP/1.1\r\nHost: t\r\nX-Who: " + who + "\r\nContent-Length: " + std::to_string(length) +
         "\r\nExpect: 100-continue\r\n\r\n" + body;
}

// Sends a head announcing `length` bytes and reads the server's first answer: 100 (reserved) or a refusal.
int Announce(Client& c, const std::string& who, std::size_t length) {
  if (!c.Send(Post(who, length))) return 0;
  auto res = c.ReadResponse();
  return res ? res->status : 0;
}

HttpServerOptions BudgetOptions() {
  HttpServerOptions o;
  o.on_head = WhoIs;
  o.body_limit = 1000;
  o.body_budget = 10000;
  o.body_reserve_liveness = 4000;
  o.body_share_per_identity = 3000;
  o.body_share_low_role = 1000;
  o.body_budget_low_roles = 2000;
  o.body_rate_grace = 30s;
  return o;
}

TEST_F(HttpServerTest, BodyBudgetIsSharedByClassAndIdentity) {
  StartServer(EchoHandler, BudgetOptions());
  std::vector<std::unique_ptr<Client>> held;
  auto announce = [&](const std::string& who, std::size_t length) {
    held.push_back(std::make_unique<Client>(port()));
    return Announce(*held.back(), who, length);
  };
  // One identity: its share (3000), then 429.
  EXPECT_EQ(announce("a std", 1000), 100);
  EXPECT_EQ(announce("a std", 1000), 100);
  EXPECT_EQ(announce("a std", 1000), 100);
  EXPECT_EQ(announce("a std", 1000), 429);
  // Low roles: 1000 each, 2000 together; the pool full is 503.
  EXPECT_EQ(announce("v1 low", 1000), 100);
  EXPECT_EQ(announce("v1 low", 1), 429);
  EXPECT_EQ(announce("v2 low", 1000), 100);
  EXPECT_EQ(announce("v3 low", 1000), 503);
  // Standard and low together may not pass 10000 - 4000: 5000 used, 1000 left.
  EXPECT_EQ(announce("b std", 1000), 100);
  EXPECT_EQ(announce("c std", 1000), 503);
  // The liveness reserve is untouched: heartbeats get all 4000 of it.
  for (const char* who : {"agent1 live", "agent2 live", "agent3 live", "agent4 live"})
    EXPECT_EQ(announce(who, 1000), 100) << who;
  EXPECT_EQ(announce("agent5 live", 1000), 503);
  // A refused head closes its connection; a granted body, once sent, releases its bytes.
  ASSERT_TRUE(held[0]->Send(std::string(1000, 'x')));
  auto done = held[0]->ReadResponse();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200);
  EXPECT_EQ(announce("c std", 1000), 100);
}

TEST_F(HttpServerTest, SlowBodyIsCutOffByTheMinimumRateAndReleased) {
  HttpServerOptions o = BudgetOptions();
  o.body_min_rate = 1000;  // bytes/s
  o.body_rate_grace = 300ms;
  o.body_rate_min_bytes = 0;  // these 1000-byte bodies are rate-checked
  StartServer(EchoHandler, o);
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(std::make_unique<Client>(port()));
    ASSERT_EQ(Announce(*slow.back(), "a std", 1000), 100);
  }
  Client refused(port());
  EXPECT_EQ(Announce(refused, "a std", 1000), 429);
  const auto start = Clock::now();
  for (auto& c : slow) {
    ASSERT_TRUE(c->Send("0123456789"));  // 10 bytes: due again 10 ms after the grace
    EXPECT_TRUE(c->WaitClosed());
  }
  EXPECT_LT(Clock::now() - start, 5s);
  auto cut = [&] {
    const std::vector<int> r = rejected();
    return std::count(r.begin(), r.end(), 408);
  };
  EXPECT_TRUE(WaitFor([&] { return cut() == 3; })) << ::testing::PrintToString(rejected());
  Client again(port());
  EXPECT_EQ(Announce(again, "a std", 1000), 100) << "the cut bodies' reservations are released";
}

// A small body is not rate-checked: its sender may stall between head and body (a Python thread waiting for
// the interpreter lock) and it holds little of the budget; the read deadline still bounds it.
TEST_F(HttpServerTest, ASmallBodyLateAfterItsHeadIsNotCutByTheRate) {
  HttpServerOptions o = BudgetOptions();
  o.body_min_rate = 1000;  // bytes/s
  o.body_rate_grace = 100ms;
  o.body_rate_min_bytes = 1000;
  StartServer(EchoHandler, o);
  Client c(port());
  ASSERT_EQ(Announce(c, "a std", 10), 100);
  std::this_thread::sleep_for(600ms);  // well past the grace: a rate-checked body would be cut by now
  ASSERT_TRUE(c.Send("0123456789"));
  auto res = c.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 200);
}

TEST_F(HttpServerTest, OneIdentitysConnectionsAreCappedOldestIdleFirst) {
  HttpServerOptions o = BudgetOptions();
  o.max_connections_per_identity = 2;
  StartServer(EchoHandler, o);
  auto get = [](const std::string& who) { return Get("/", "X-Who: " + who + "\r\n"); };
  std::vector<std::unique_ptr<Client>> c;
  for (int i = 0; i < 3; ++i) {
    c.push_back(std::make_unique<Client>(port()));
    ASSERT_TRUE(c.back()->Send(get("a std")));
    auto res = c.back()->ReadResponse();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
  EXPECT_TRUE(c[0]->WaitClosed()) << "the oldest idle connection of `a` made room";
  // Two busy connections of `a` (bodies awaited): a third is its own 429, and `b` is served.
  Client busy1(port()), busy2(port());
  c.clear();
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 2; }));
  EXPECT_EQ(Announce(busy1, "a std", 10), 100);
  EXPECT_EQ(Announce(busy2, "a std", 10), 100);
  Client third(port());
  EXPECT_EQ(Announce(third, "a std", 10), 429);
  Client other(port());
  ASSERT_TRUE(other.Send(get("b std")));
  auto res = other.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // An identity with its own cap (a rank token shared by many ranks): 3 busy connections, then 429.
  std::vector<std::unique_ptr<Client>> ranks;
  for (int i = 0; i < 4; ++i) {
    ranks.push_back(std::make_unique<Client>(port()));
    EXPECT_EQ(Announce(*ranks.back(), "r live 3", 10), i < 3 ? 100 : 429) << i;
  }
}

}  // namespace
}  // namespace shepherd::testing
