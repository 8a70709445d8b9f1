#include "api/router.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "api/auth.h"
#include "core/json.h"

namespace shepherd {
namespace {

HttpResponse Call(const Router& r, const std::string& method, const std::string& target) {
  HttpResponse out;
  out.status = -1;
  HttpRequest req;
  req.method = method;
  req.target = target;
  r.Handle(req, [&](HttpResponse res) { out = std::move(res); });
  return out;
}

Router MakeRouter(Metrics* m) {
  Router r(m);
  r.Replace("GET", "/v1/jobs/{id}", [](const HttpRequest&, const PathParams& p, Respond respond) {
    HttpResponse res;
    res.body = p.at("id");
    respond(res);
  });
  r.Replace("POST", "/v1/jobs/{id}/cancel", [](const HttpRequest&, const PathParams& p, Respond respond) {
    HttpResponse res;
    res.status = 202;
    respond(res);
  });
  return r;
}

}  // namespace

// An agent's long poll is held until its assignments change; its token is withdrawn (SIGHUP) meanwhile.
// The answer carries rank credentials: it must not reach the withdrawn token, and is a 401 instead.
TEST(Router, AHeldRequestWhoseStaticTokenWasWithdrawnIsAnswered401) {
  Metrics m;
  Router r(&m);
  Respond held;
  r.Replace("GET", "/v1/nodes/{id}/assignments",
        [&](const HttpRequest&, const PathParams&, Respond respond) { held = std::move(respond); });
  Authenticator auth;
  const std::string agent = "agent-n4-token-0123456789abcdef";
  auth.SetStatic(ParseTokens(R"({"tokens": [{"token": ")" + agent + R"(", "role": "agent", "node": "n4"},
      {"token": "admin-token-0123456789abcdef", "role": "admin", "name": "ops"}]})")
                     .value());
  r.SetAuth(&auth, [](const std::string&) { return std::nullopt; });
  auto poll = [&](HttpResponse* out) {
    HttpRequest req;
    req.method = "GET";
    req.target = "/v1/nodes/n4/assignments?version=1&wait=25";
    req.headers.emplace_back("Authorization", "Bearer " + agent);
    r.Handle(req, [out](HttpResponse res) { *out = std::move(res); });
  };
  HttpResponse answered;
  poll(&answered);
  ASSERT_TRUE(held);
  held(HttpResponse{});  // still valid: answered as the handler says
  EXPECT_EQ(answered.status, 200);
  poll(&answered);
  auth.SetStatic(ParseTokens(R"({"tokens": [{"token": "admin-token-0123456789abcdef", "role": "admin",
      "name": "ops"}]})")
                     .value());
  held(HttpResponse{});
  EXPECT_EQ(answered.status, 401);
  EXPECT_EQ(answered.body.find("SHEPHERD_TOKEN"), std::string::npos);
}

TEST(Router, BindsDecodedPathParameters) {
  Metrics m;
  Router r = MakeRouter(&m);
  HttpResponse res = Call(r, "GET", "/v1/jobs/job%2D1?x=1");
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.body, "job-1");
}

TEST(Router, UnknownPathIs404ProblemJson) {
  Metrics m;
  Router r = MakeRouter(&m);
  HttpResponse res = Call(r, "GET", "/v2/nothing");
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(res.content_type, "application/problem+json");
  Json body = Json::parse(res.body);
  EXPECT_EQ(body["status"], 404);
  EXPECT_EQ(body["title"], "Not Found");
}

TEST(Router, WrongMethodIs405WithAllow) {
  Metrics m;
  Router r = MakeRouter(&m);
  HttpResponse res = Call(r, "DELETE", "/v1/jobs/j1");
  EXPECT_EQ(res.status, 405);
  ASSERT_EQ(res.headers.size(), 1u);
  EXPECT_EQ(res.headers[0].first, "Allow");
  EXPECT_EQ(res.headers[0].second, "GET, HEAD");  // HEAD is served wherever GET is
}

TEST(Router, MetricsCountByRoutePatternNotRawPath) {
  Metrics m;
  Router r = MakeRouter(&m);
  Call(r, "GET", "/v1/jobs/a");
  Call(r, "GET", "/v1/jobs/b");
  Call(r, "POST", "/v1/jobs/a/cancel");
  std::string text = m.Exposition("test");
  EXPECT_NE(
      text.find("shepherd_http_requests_total{route=\"/v1/jobs/{id}\",method=\"GET\",status=\"200\"} 2"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("route=\"/v1/jobs/{id}/cancel\",method=\"POST\",status=\"202\"} 1"), std::string::npos);
  EXPECT_NE(
      text.find("shepherd_http_request_duration_seconds_count{route=\"/v1/jobs/{id}\",method=\"GET\"} 2"),
      std::string::npos);
  EXPECT_NE(text.find("shepherd_build_info{version=\"test\"} 1"), std::string::npos);
}

// A stand-in handler names a route of the table; a path the table does not list is refused, never added.
TEST(Router, AStandInForARouteTheTableDoesNotListIsRefused) {
  Metrics m;
  Router r(&m);
  auto handler = [](const HttpRequest&, const PathParams&, Respond respond) { respond(HttpResponse{}); };
  EXPECT_THROW(r.Replace("GET", "/v1/not-a-route", handler), std::logic_error);
  EXPECT_THROW(r.Replace("PUT", "/v1/jobs/{id}", handler), std::logic_error);  // the path, another method
  EXPECT_EQ(Call(r, "GET", "/v1/not-a-route").status, 404);
  EXPECT_EQ(Call(r, "PUT", "/v1/jobs/j1").status, 405);
}

TEST(Query, DecodesPairs) {
  auto q = ParseQuery("/v1/failures?kind=hang&job=job%2D1&since=2026-01-01T00%3A00%3A00Z&flag");
  EXPECT_EQ(q.at("kind"), "hang");
  EXPECT_EQ(q.at("job"), "job-1");
  EXPECT_EQ(q.at("since"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(q.at("flag"), "");
  EXPECT_TRUE(ParseQuery("/v1/nodes").empty());
}

}  // namespace shepherd
