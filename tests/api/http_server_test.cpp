// HttpServer over real loopback TCP, the ordinary paths: round trips, request ids, keep-alive and
// pipelining, HEAD, deferred and failing handlers, 100-continue, bind errors. The server's own refusals,
// timeouts and shutdown are in http_limits_test.cpp; the client and fixture in http_test_client.h.
#include "api/http_server.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

#include "tests/api/http_test_client.h"

namespace shepherd::testing {
namespace {

TEST_F(HttpServerTest, GetRoundTripEchoesRequestId) {
  StartServer(EchoHandler);
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Get("/v1/nodes?x=1", "X-Request-Id: abc-123.X_y\r\n")));
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "GET /v1/nodes?x=1 ");
  EXPECT_EQ(res->Header("X-Request-Id"), "abc-123.X_y");
  EXPECT_EQ(res->Header("X-Seen-Id"), "abc-123.X_y");
  EXPECT_EQ(res->Header("Content-Type"), "text/plain");
  EXPECT_EQ(res->Header("Server"), "shepherd");
  EXPECT_EQ(res->Header("Content-Length"), "18");
  EXPECT_NE(Lower(res->Header("Connection")), "close");
}

TEST_F(HttpServerTest, PostBodyAndHeadersReachHandler) {
  DeferredHandler h;
  StartServer(h.handler());
  Client c(port());
  ASSERT_TRUE(
      c.Send("POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
             "Content-Length: 7\r\n\r\n{\"a\":1}"));
  ASSERT_TRUE(WaitFor([&] { return h.count() == 1; }));
  const HttpRequest req = h.request(0);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/v1/jobs");
  EXPECT_EQ(req.body, "{\"a\":1}");
  EXPECT_EQ(req.Header("content-type"), "application/json");
  EXPECT_EQ(req.Header("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(req.Header("X-Absent"), "");
  h.respond(0)(HttpResponse{201, "application/json", {{"Location", "/v1/jobs/job-1"}}, "{}", false});
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->Header("Location"), "/v1/jobs/job-1");
  EXPECT_EQ(res->Header("X-Request-Id"), req.request_id);
}

TEST_F(HttpServerTest, GeneratesRequestIdWhenIncomingOneIsNotSane) {
  StartServer(EchoHandler);
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/a", "X-Request-Id: has space!\r\n")));
  auto first = c.ReadResponse();
  ASSERT_TRUE(first);
  ASSERT_TRUE(c.Send(Get("/b", "X-Request-Id: " + std::string(65, 'a') + "\r\n")));
  auto second = c.ReadResponse();
  ASSERT_TRUE(second);
  for (const auto& res : {*first, *second}) {
    const std::string id = res.Header("X-Request-Id");
    EXPECT_EQ(id.size(), 16u) << id;
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    EXPECT_EQ(res.Header("X-Seen-Id"), id);
  }
  EXPECT_NE(first->Header("X-Request-Id"), second->Header("X-Request-Id"));
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer(EchoHandler);
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/one")));
  auto first = c.ReadResponse();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->body, "GET /one ");
  ASSERT_TRUE(c.Send(Get("/two")));
  auto second = c.ReadResponse();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->body, "GET /two ");
  EXPECT_EQ(server_->active_sessions(), 1u);

  // Two pipelined requests in one write, the second asking to close.
  ASSERT_TRUE(c.Send(Get("/three") + Get("/four", "Connection: close\r\n")));
  auto third = c.ReadResponse();
  auto fourth = c.ReadResponse();
  ASSERT_TRUE(third && fourth);
  EXPECT_EQ(third->body, "GET /three ");
  EXPECT_EQ(fourth->body, "GET /four ");
  EXPECT_EQ(Lower(fourth->Header("Connection")), "close");
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpServerTest, HandlerCloseFlagClosesConnection) {
  StartServer([](HttpRequest, Respond respond) {
    respond(HttpResponse{200, "text/plain", {}, "bye", true});
  });
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/")));
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(Lower(res->Header("Connection")), "close");
  EXPECT_TRUE(c.WaitClosed());
}

TEST_F(HttpServerTest, HeadAnswersWithoutBodyAndUnsafeHeadersAreDropped) {
  StartServer([](HttpRequest, Respond respond) {
    respond(HttpResponse{200,
                         "text/plain",
                         {{"X-Ok", "yes"}, {"X-Evil", "a\r\nSet-Cookie: x=1"}, {"Content-Length", "99"}},
                         "12345",
                         false});
  });
  Client c(port());
  ASSERT_TRUE(c.Send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"));
  const auto end = [&] { return c.pending().find("\r\n\r\n"); };
  ASSERT_TRUE(WaitFor([&] { return end() != std::string::npos || !c.ReadSome(kDeadline); }));
  const std::string head = c.pending().substr(0, end());
  EXPECT_NE(head.find("Content-Length: 5"), std::string::npos) << head;
  EXPECT_NE(head.find("X-Ok: yes"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Evil"), std::string::npos) << head;
  EXPECT_EQ(head.find("Set-Cookie"), std::string::npos) << head;
  // No body follows: the next response on the connection starts right after the head.
  ASSERT_TRUE(c.Send(Get("/")));
  ASSERT_TRUE(WaitFor([&] { return c.pending().size() > end() + 4 || !c.ReadSome(kDeadline); }));
  EXPECT_EQ(c.pending().substr(end() + 4, 8), "HTTP/1.1");
}

TEST_F(HttpServerTest, DeferredRespondFromAnotherThreadArrives) {
  DeferredHandler h;
  StartServer(h.handler());
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/slow")));
  ASSERT_TRUE(WaitFor([&] { return h.count() == 1; }));
  std::thread worker([respond = h.respond(0)] {
    respond(HttpResponse{202, "application/json", {}, R"({"late":true})", false});
    respond(HttpResponse{500, "text/plain", {}, "second call must be ignored", false});
  });
  worker.join();
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 202);
  EXPECT_EQ(res->body, R"({"late":true})");

  // The ignored second call left nothing behind: the next request gets its own answer.
  ASSERT_TRUE(c.Send(Get("/next")));
  ASSERT_TRUE(WaitFor([&] { return h.count() == 2; }));
  h.respond(1)(HttpResponse{200, "text/plain", {}, "next", false});
  auto next = c.ReadResponse();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
  EXPECT_EQ(next->body, "next");
}

TEST_F(HttpServerTest, HandlerExceptionBecomes500) {
  StartServer([](HttpRequest, Respond) { throw std::runtime_error("boom"); });
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/")));
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(res->Header("Content-Type"), "application/problem+json");
}

TEST_F(HttpServerTest, ExpectContinueGetsInterimResponse) {
  StartServer(EchoHandler);
  Client c(port());
  ASSERT_TRUE(c.Send("PUT /x HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = c.ReadResponse();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(c.Send("data"));
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "PUT /x data");
}

TEST(HttpServerStart, BindErrorsAreStatuses) {
  boost::asio::io_context ioc;
  auto first = HttpServer::Start(ioc, "127.0.0.1", 0, EchoHandler, {});
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = HttpServer::Start(ioc, "127.0.0.1", (*first)->port(), EchoHandler, {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  EXPECT_NE(second.status().message().find("bind"), std::string::npos) << second.status().message();
}

}  // namespace
}  // namespace shepherd::testing
