#include "net/http_client.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "tests/agent/fake_daemon.h"
#include "tests/agent/test_util.h"

namespace shepherd::net {
namespace {

using namespace std::chrono_literals;
using agent::testing::FakeDaemon;
using agent::testing::TempDir;

std::unique_ptr<HttpClient> Client(const std::string& url, const std::string& token = "") {
  auto c = HttpClient::Create({url, token});
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(*c);
}

TEST(HttpClient, SendsBodyAndBearerTokenAndReusesTheConnection) {
  FakeDaemon d;
  auto c = Client(d.url(), "s3cret");
  for (int i = 0; i < 3; ++i) {
    Result<HttpResult> r = c->Request("POST", "/echo", R"({"n": 1})", 5s);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->status, 200);
    Json j = Json::parse(r->body);
    EXPECT_EQ(j["authorization"], "Bearer s3cret");
    EXPECT_EQ(j["body"], R"({"n": 1})");
    EXPECT_EQ(j["method"], "POST");
  }
  EXPECT_EQ(d.connections(), 1);
}

// The documented rotation (new token in the tokens file, SIGHUP, then the agent's --token-file) made a
// running agent's calls 401 until its lease ran out: the node was failed and its job restarted. A 401 now
// reads the file again and repeats the call with the new token, once.
TEST(HttpClient, A401ReadsTheTokenFileAgainAndUsesARotatedToken) {
  FakeDaemon d;
  TempDir dir;
  const std::string file = dir.path() + "/token";
  auto write = [&](const std::string& t) {
    std::ofstream(file) << t << "\n";
    ::chmod(file.c_str(), 0600);
  };
  write("old-token");
  auto made = HttpClient::Create({.base_url = d.url(), .token = "old-token", .token_file = file});
  ASSERT_TRUE(made.ok());
  HttpClient& c = **made;
  ASSERT_EQ(c.Request("GET", "/echo", "", 5s)->status, 200);
  d.SetRequiredToken("new-token");  // the daemon reloaded its tokens: the old one is withdrawn
  EXPECT_EQ(c.Request("GET", "/echo", "", 5s)->status, 401);  // the agent's file still has the old one
  write("new-token");
  Result<HttpResult> r = c.Request("GET", "/echo", "", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["authorization"], "Bearer new-token");
  write("third-token");  // refused too: answered as is, not retried in a loop
  d.SetRequiredToken("fourth-token");
  EXPECT_EQ(c.Request("GET", "/echo", "", 5s)->status, 401);
  auto without = Client(d.url(), "new-token");  // no file: nothing to read again
  EXPECT_EQ(without->Request("GET", "/echo", "", 5s)->status, 401);
}

TEST(HttpClient, ReadsRetryAfterAndJittersIt) {
  FakeDaemon d;
  d.SetBusy(2);
  Result<HttpResult> r = Client(d.url())->Request("POST", "/echo", "{}", 5s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 429);
  ASSERT_TRUE(r->retry_after_s.has_value());
  EXPECT_EQ(*r->retry_after_s, 2.0);
  EXPECT_EQ(RetryDelay(*r, 0.0), 2000ms);
  EXPECT_EQ(RetryDelay(*r, 0.5), 2500ms);
  EXPECT_EQ(RetryDelay(*r, 1.0), 3000ms);
  HttpResult huge{429, "", 1000.0};
  EXPECT_EQ(RetryDelay(huge, 0.0), 60000ms);
  EXPECT_FALSE(RetryDelay(HttpResult{503, "", std::nullopt}, 0.5).has_value());
  d.SetBusy(std::nullopt);
  r = Client(d.url())->Request("GET", "/echo", "", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->retry_after_s.has_value());
}

TEST(HttpClient, HttpErrorStatusIsAValueNotAnError) {
  FakeDaemon d;
  Result<HttpResult> r = Client(d.url())->Request("GET", "/nowhere", "", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
}

TEST(HttpClient, KeepsTheBaseUrlPrefix) {
  FakeDaemon d;
  Result<HttpResult> r = Client(d.url() + "/")->Request("GET", "/echo", "", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(d.requests().back(), "GET /echo");
}

TEST(HttpClient, RetriesOnceWhenAKeptConnectionWasClosed) {
  FakeDaemon d;
  d.SetDropAfterResponse(true);
  auto c = Client(d.url());
  ASSERT_TRUE(c->Request("GET", "/echo", "", 5s).ok());
  Result<HttpResult> r = c->Request("GET", "/echo", "", 5s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(d.connections(), 2);
}

TEST(HttpClient, ConnectionRefusedIsUnavailable) {
  int port;
  {
    FakeDaemon d;
    port = d.port();
  }
  Result<HttpResult> r = Client("http://127.0.0.1:" + std::to_string(port))->Request("GET", "/echo", "", 5s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

TEST(HttpClient, TimesOut) {
  FakeDaemon d;
  auto start = std::chrono::steady_clock::now();
  Result<HttpResult> r = Client(d.url())->Request("GET", "/slow?ms=5000", "", 200ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(HttpClient, CancelAbortsARequestInFlightAndLaterOnes) {
  FakeDaemon d;
  auto c = Client(d.url());
  std::optional<Result<HttpResult>> r;
  auto start = std::chrono::steady_clock::now();
  std::thread t([&] { r = c->Request("GET", "/slow?ms=20000", "", 30s); });
  // Wait until the request reached the server, then cancel from this thread.
  while (d.requests().empty() && std::chrono::steady_clock::now() - start < 10s) std::this_thread::yield();
  c->Cancel();
  t.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_FALSE(c->Request("GET", "/echo", "", 5s).ok());
}

TEST(HttpClient, RejectsBadUrls) {
  EXPECT_FALSE(HttpClient::Create({"https://x:1", ""}).ok());
  EXPECT_FALSE(HttpClient::Create({"http://:80", ""}).ok());
  EXPECT_FALSE(HttpClient::Create({"http://host:port", ""}).ok());
  EXPECT_TRUE(HttpClient::Create({"http://[::1]:8080/api", ""}).ok());
}

TEST(HttpClient, EscapesPathSegments) {
  EXPECT_EQ(EscapePathSegment("node-0001_a.b~"), "node-0001_a.b~");
  EXPECT_EQ(EscapePathSegment("a/b c"), "a%2Fb%20c");
}

}  // namespace
}  // namespace shepherd::net
