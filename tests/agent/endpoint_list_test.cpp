// EndpointListClient (net/endpoint_list.h) against FakeDaemons playing replicas: a dead one, a follower
// that redirects to the leader, a follower that knows no leader (503), and a redirect loop.
#include "net/endpoint_list.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "tests/agent/fake_daemon.h"

namespace shepherd::net {
namespace {

using namespace std::chrono_literals;
using agent::testing::FakeDaemon;

// A loopback port that refuses connections: bound (so nobody else takes it) but not listening.
class DeadPort {
 public:
  DeadPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~DeadPort() { ::close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::unique_ptr<EndpointListClient> Client(const std::string& list) {
  auto c = EndpointListClient::Create({.base_url = list, .token = "tok"});
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(*c) : nullptr;
}

int Count(const FakeDaemon& d, const std::string& request) {
  int n = 0;
  for (const std::string& r : d.requests()) n += r == request;
  return n;
}

TEST(EndpointList, ParsesAndRefusesLists) {
  auto ok = ParseEndpointList("http://a:1, http://b:2/ ,http://c:3/prefix");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, (std::vector<std::string>{"http://a:1", "http://b:2", "http://c:3/prefix"}));
  auto one = ParseEndpointList("http://a:1");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);

  auto empty_entry = ParseEndpointList("http://a:1,,http://b:2");
  ASSERT_FALSE(empty_entry.ok());
  EXPECT_EQ(empty_entry.status().code(), Code::kInvalidArgument);
  EXPECT_NE(empty_entry.status().message().find("empty entry"), std::string::npos);
  auto https = ParseEndpointList("http://a:1,https://b:2");
  ASSERT_FALSE(https.ok());
  EXPECT_NE(https.status().message().find("https://b:2"), std::string::npos) << https.status().message();
  auto twice = ParseEndpointList("http://a:1,http://a:1/");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("http://a:1 is listed twice"), std::string::npos);
  EXPECT_FALSE(ParseEndpointList("").ok());
  std::string many;
  for (int i = 0; i <= 32; ++i) many += (i ? "," : "") + std::string("http://h:") + std::to_string(1000 + i);
  EXPECT_FALSE(ParseEndpointList(many).ok());
  EXPECT_FALSE(EndpointListClient::Create({.base_url = "http://a:1,ftp://b"}).ok());
}

TEST(EndpointList, FirstEndpointDownTheSecondAnswersAndStaysCurrent) {
  DeadPort dead;
  FakeDaemon live;
  auto c = Client(dead.url() + "," + live.url());
  Result<HttpResult> r = c->Request("POST", "/echo", R"({"n": 1})", 10s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["body"], R"({"n": 1})");
  EXPECT_EQ(Json::parse(r->body)["authorization"], "Bearer tok");
  EXPECT_EQ(c->current(), live.url());
  // The next calls go straight to the endpoint that answered, on its kept-alive connection.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c->Request("GET", "/echo", "", 10s)->status, 200);
  EXPECT_EQ(Count(live, "GET /echo"), 3);
  EXPECT_EQ(live.connections(), 1);
}

TEST(EndpointList, AFollowerWithoutLeaderIsSkippedAndAnAnswerIsNotRetried) {
  FakeDaemon follower, leader;
  follower.SetDown(true);  // 503: knows no leader
  auto c = Client(follower.url() + "," + leader.url());
  ASSERT_EQ(c->Request("POST", "/echo", "{}", 10s)->status, 200);
  EXPECT_EQ(Count(follower, "POST /echo"), 1);
  EXPECT_EQ(Count(leader, "POST /echo"), 1);
  // A 4xx is the application's answer: returned as is, no other endpoint asked.
  Result<HttpResult> r = c->Request("GET", "/nowhere", "", 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Count(follower, "GET /nowhere"), 0);
  // Every endpoint 503: the last 503 is returned (its Retry-After for the caller), each asked once.
  leader.SetDown(true);
  r = c->Request("GET", "/echo", "", 10s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(Count(follower, "GET /echo"), 1);
  EXPECT_EQ(Count(leader, "GET /echo"), 1);
}

TEST(EndpointList, AFollowersRedirectLeadsToTheLeaderWithTheBodyIntact) {
  FakeDaemon follower, leader;
  follower.SetRedirect(leader.url());
  // The leader is not in the list: found by the redirect, then remembered.
  auto c = Client(follower.url());
  const std::string body = R"({"report": "checkpoint", "step": 1200})";
  Result<HttpResult> r = c->Request("POST", "/echo?x=1", body, 10s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->status, 200);
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["body"], body);
  EXPECT_EQ(j["authorization"], "Bearer tok");
  EXPECT_EQ(leader.requests(), std::vector<std::string>{"POST /echo?x=1"});
  EXPECT_EQ(c->current(), leader.url());
  ASSERT_EQ(c->Request("POST", "/echo", body, 10s)->status, 200);
  EXPECT_EQ(follower.requests().size(), 1u) << "the leader is asked directly once known";
  EXPECT_EQ(leader.bodies().back(), body);

  // 308 too; and when the remembered leader dies, the configured list is tried again.
  FakeDaemon other_leader;
  follower.SetRedirect(other_leader.url(), 308);
  leader.SetDown(true);
  r = c->Request("PUT", "/echo", body, 10s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["method"], "PUT");
  EXPECT_EQ(other_leader.bodies(), std::vector<std::string>{body});
  EXPECT_EQ(c->current(), other_leader.url());
}

TEST(EndpointList, ARedirectLoopStopsAfterTwoHopsWithAClearError) {
  FakeDaemon a, b;
  a.SetRedirect(b.url());
  b.SetRedirect(a.url());
  auto c = Client(a.url() + "," + b.url());
  Result<HttpResult> r = c->Request("POST", "/echo", "{}", 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("more than 2 redirects"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(a.url() + "/echo -> " + b.url() + "/echo -> " + a.url() + "/echo -> " +
                                      b.url() + "/echo"),
            std::string::npos)
      << r.status().message();
  // One request, two hops followed: three requests in all.
  EXPECT_EQ(a.requests().size() + b.requests().size(), 3u);
}

TEST(EndpointList, ARedirectToSomethingElseThanAnHttpUrlIsRefused) {
  FakeDaemon bad, good;
  bad.SetRedirect("https://elsewhere.example");
  auto c = Client(bad.url() + "," + good.url());
  ASSERT_EQ(c->Request("GET", "/echo", "", 10s)->status, 200);  // the next endpoint answers
  bad.SetRedirect("/relative");
  auto only = Client(bad.url());
  Result<HttpResult> r = only->Request("GET", "/echo", "", 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an absolute http:// URL"), std::string::npos)
      << r.status().message();
}

TEST(EndpointList, AllDownIsUnavailableNamingEveryEndpoint) {
  DeadPort d1, d2;
  auto c = Client(d1.url() + "," + d2.url());
  Result<HttpResult> r = c->Request("POST", "/v1/nodes", "{}", 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find(d1.url() + ": "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(d2.url() + ": "), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("no daemon answered"), std::string::npos) << r.status().message();
}

// A stalled endpoint takes the request's budget, not more; the next request starts at the next endpoint.
TEST(EndpointList, TheBudgetCoversEveryAttemptAndAStalledEndpointIsLeftBehind) {
  FakeDaemon stalled, live;
  // /slow stands for a replica that accepts the connection and does not answer in time (SIGSTOP).
  auto c = Client(stalled.url() + "," + live.url());
  const auto start = std::chrono::steady_clock::now();
  Result<HttpResult> r = c->Request("GET", "/slow?ms=5000", "", 500ms);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_LT(took, 4000ms) << "the whole request stays within its budget (with slack for a loaded machine)";
  EXPECT_EQ(c->current(), live.url());
  ASSERT_EQ(c->Request("GET", "/echo", "", 10s)->status, 200);
  EXPECT_EQ(Count(stalled, "GET /echo"), 0);
}

TEST(EndpointList, CancelAbortsARequestInFlightAndEveryLaterOne) {
  FakeDaemon d;
  auto c = Client(d.url());
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);  // lets the request start; the assertion does not depend on it
    c->Cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  Result<HttpResult> r = c->Request("GET", "/slow?ms=20000", "", 30s);
  t.join();
  EXPECT_FALSE(r.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_FALSE(c->Request("GET", "/echo", "", 5s).ok());
}

}  // namespace
}  // namespace shepherd::net
