// Hostile and malformed HTTP against the real daemon: every case is answered with a problem, never a crash.
#include <gtest/gtest.h>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

class ProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.WaitReady()) << daemon_.log(); }
  void TearDown() override {
    // The daemon survived everything: it still answers.
    EXPECT_EQ(Http(daemon_.port(), "GET", "/healthz").status, 200) << daemon_.log();
  }
  TempDir dir_;
  Daemon daemon_{dir_.path, {"--config", WriteConfig()}};

  std::string WriteConfig() {
    std::string path = dir_.path + "/config.json";
    FILE* f = fopen(path.c_str(), "w");
    fputs(R"({"body_limit": 65536, "header_limit": 8192})", f);
    fclose(f);
    return path;
  }
};

TEST_F(ProtocolTest, MalformedJsonIs400Problem) {
  HttpResult r = Http(daemon_.port(), "POST", "/v1/nodes", "{\"id\": ");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.headers["content-type"], "application/problem+json");
  auto j = Json::parse(r.body);
  EXPECT_EQ(j["status"], 400);
  EXPECT_TRUE(j.contains("detail") && j.contains("title") && j.contains("type"));
}

TEST_F(ProtocolTest, AKeyGivenTwiceIs400NamingItAndStoresNothing) {
  // Before, the last "id" won and the node was registered under a name the client never meant.
  HttpResult r =
      Http(daemon_.port(), "POST", "/v1/nodes", R"({"id": "n-first", "gpus": 8, "id": "n-second"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/problem+json");
  auto j = Json::parse(r.body);
  ASSERT_EQ(j["errors"].size(), 1u) << r.body;
  EXPECT_EQ(j["errors"][0]["field"], "id");
  auto nodes = Json::parse(Http(daemon_.port(), "GET", "/v1/nodes").body);
  EXPECT_EQ(nodes.dump().find("n-second"), std::string::npos) << nodes.dump();
  EXPECT_EQ(nodes.dump().find("n-first"), std::string::npos) << nodes.dump();
}

TEST_F(ProtocolTest, ATargetThatIsNotAPathIs400AndAnAbsoluteUrlIsItsPath) {
  // "GET v1/jobs" was served as "/v1/jobs"; "GET http://host/healthz" (absolute-form, which servers must
  // accept) was a 404.
  auto send = [&](const std::string& target) {
    Connection c(daemon_.port());
    EXPECT_TRUE(c.Send("GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    return c.Read();
  };
  for (const char* bad : {"v1/jobs", "*", "healthz", "ftp://x/healthz"}) {
    HttpResult r = send(bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_NE(r.body.find("must be a path"), std::string::npos) << bad << ": " << r.body;
  }
  EXPECT_EQ(send("http://localhost/healthz").status, 200);
  EXPECT_EQ(send("HTTP://localhost:8080/v1/jobs?limit=1").status, 200);
  EXPECT_EQ(send("http://localhost").status, 404);  // the path "/": no route
}

TEST_F(ProtocolTest, TooDeepJsonIs400) {
  std::string deep = std::string(5000, '[') + std::string(5000, ']');
  HttpResult r = Http(daemon_.port(), "POST", "/v1/jobs", deep);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("deeper"), std::string::npos);
}

TEST_F(ProtocolTest, OversizeBodyIs413AndCloses) {
  HttpResult r = Http(daemon_.port(), "POST", "/v1/nodes", std::string(70000, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.headers["connection"], "close");
}

TEST_F(ProtocolTest, OversizeHeaderIs431AndCloses) {
  Connection c(daemon_.port());
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n"));
  HttpResult r = c.Read();
  EXPECT_EQ(r.status, 431);
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(ProtocolTest, EndlessChunkExtensionIsCutOff) {
  Connection c(daemon_.port());
  ASSERT_TRUE(
      c.Send("POST /v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\n\r\n5;ext="));
  std::string piece(16384, 'e');
  size_t sent = 0;
  while (sent < (64u << 20) && c.Send(piece)) sent += piece.size();
  // The server stopped reading long before 64 MiB: it answered and closed.
  EXPECT_LT(sent, 64u << 20);
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(ProtocolTest, WrongContentTypeIs415) {
  HttpResult r = Http(daemon_.port(), "POST", "/v1/nodes", "id=1", "application/x-www-form-urlencoded");
  EXPECT_EQ(r.status, 415);
}

TEST_F(ProtocolTest, UnknownRouteIs404AndWrongMethodIs405) {
  EXPECT_EQ(Http(daemon_.port(), "GET", "/v1/nope").status, 404);
  HttpResult r = Http(daemon_.port(), "PUT", "/v1/nodes");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST, GET, HEAD");
}

TEST_F(ProtocolTest, GarbageRequestLineIs400) {
  Connection c(daemon_.port());
  ASSERT_TRUE(c.Send("HELLO\r\n\r\n"));
  HttpResult r = c.Read();
  EXPECT_EQ(r.status, 400);
}

TEST_F(ProtocolTest, KeepAliveServesSeveralRequests) {
  Connection c(daemon_.port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    HttpResult r = c.Read();
    EXPECT_EQ(r.status, 200);
    EXPECT_FALSE(r.headers["x-request-id"].empty());
  }
}

}  // namespace
}  // namespace shepherd::testing
