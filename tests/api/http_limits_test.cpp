// HttpServer over real loopback TCP, the edges: 413/431 and the bounded read buffer (endless chunk
// extension or trailer), malformed requests, idle and read timeouts, max_connections, a full listen queue,
// graceful and forced shutdown. Linked into http_server_test with http_server_test.cpp.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "tests/api/http_test_client.h"

namespace shepherd::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_F(HttpServerTest, OversizeBodyIs413AndCloses) {
  HttpServerOptions options;
  options.body_limit = 1024;
  StartServer(EchoHandler, options);
  {
    Client c(port());
    ASSERT_TRUE(c.Send("POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n"));
    c.Send(std::string(5000, 'x'));  // may fail once the server has answered and closed
    auto res = c.ReadResponse();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 413);
    EXPECT_EQ(Lower(res->Header("Connection")), "close");
    EXPECT_EQ(res->Header("Content-Type"), "application/problem+json");
    EXPECT_NE(res->body.find(R"("status":413)"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find(R"("title":"Payload Too Large")"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find(R"("type":)"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find(R"("detail":)"), std::string::npos) << res->body;
    EXPECT_EQ(res->Header("X-Request-Id").size(), 16u);
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    // Chunked: the limit applies to the sum of the chunks.
    Client c(port());
    ASSERT_TRUE(
        c.Send("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
               "200\r\n" +
               std::string(0x200, 'a') + "\r\n" + "300\r\n" + std::string(0x300, 'b') + "\r\n0\r\n\r\n"));
    auto res = c.ReadResponse();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 413);
    EXPECT_TRUE(c.WaitClosed());
  }
  EXPECT_EQ(rejected(), (std::vector<int>{413, 413}));
}

TEST_F(HttpServerTest, OversizeHeadersAre431AndClose) {
  HttpServerOptions options;
  options.header_limit = 1024;
  StartServer(EchoHandler, options);
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/", "X-Big: " + std::string(4000, 'h') + "\r\n")));
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 431);
  EXPECT_EQ(Lower(res->Header("Connection")), "close");
  EXPECT_EQ(res->Header("Content-Type"), "application/problem+json");
  EXPECT_NE(res->body.find(R"("status":431)"), std::string::npos) << res->body;
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(rejected(), std::vector<int>{431});
}

// Sends `prefix`, then 'a' bytes in 8 KiB pieces up to 64 KiB, and then waits. The server must answer 431
// and close without more input: Beast 1.74 does not bound a chunk header or a trailer by itself (its parser
// keeps asking for more while the caller's buffer grows), so an answer arrives only because the server caps
// its read buffer (at header_limit + 4 KiB). Were the cap missing or above 64 KiB, no answer would come.
void ExpectEndlessInputRejected(const HttpServer& server, const std::string& prefix) {
  constexpr size_t kPiece = 8 * 1024;
  constexpr size_t kMaxSent = 64 * 1024;
  Client c(server.port());
  ASSERT_TRUE(c.Send(prefix));
  const std::string piece(kPiece, 'a');
  size_t sent = 0;
  while (sent < kMaxSent && !c.closed()) {
    if (!c.Send(piece)) break;  // reset by the server: it stopped reading
    sent += kPiece;
    if (c.ReadSome(0ms)) break;  // the answer started arriving
  }
  auto res = c.ReadResponse();
  ASSERT_TRUE(res) << "no answer after " << sent << " bytes";
  EXPECT_EQ(res->status, 431);
  EXPECT_EQ(Lower(res->Header("Connection")), "close");
  EXPECT_TRUE(c.WaitClosed());

  // The server stops reading: it drops the connection (after a short bounded linger that lets the client
  // read the answer) while the client still holds it open, and further input is refused with a reset.
  EXPECT_TRUE(WaitFor([&] { return server.active_sessions() == 0; })) << "the server kept the connection";
  EXPECT_TRUE(WaitFor([&] { return !c.Send("more"); })) << "the server kept accepting input after closing";
  ::testing::Test::RecordProperty("sent_before_answer", static_cast<int>(sent));
}

TEST_F(HttpServerTest, EndlessChunkExtensionIsRejectedWithBoundedMemory) {
  StartServer(EchoHandler);
  ExpectEndlessInputRejected(
      *server_,
      "POST /v1/jobs/j/reports HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=");
  EXPECT_EQ(rejected(), std::vector<int>{431});
}

TEST_F(HttpServerTest, EndlessTrailerIsRejectedWithBoundedMemory) {
  StartServer(EchoHandler);
  ExpectEndlessInputRejected(
      *server_,
      "POST /v1/jobs/j/reports HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\nX-Trailer: ");
  EXPECT_EQ(rejected(), std::vector<int>{431});
}

TEST_F(HttpServerTest, MalformedRequestLineIs400AndCloses) {
  StartServer(EchoHandler);
  Client c(port());
  ASSERT_TRUE(c.Send("THIS IS NOT HTTP\r\n\r\n"));
  auto res = c.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(Lower(res->Header("Connection")), "close");
  EXPECT_EQ(res->Header("Content-Type"), "application/problem+json");
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(rejected(), std::vector<int>{400});
}

TEST_F(HttpServerTest, IdleTimeoutClosesSilentConnection) {
  HttpServerOptions options;
  options.idle_timeout = 200ms;
  StartServer(EchoHandler, options);
  {
    const auto start = Clock::now();
    Client c(port());
    ASSERT_TRUE(c.connected());
    EXPECT_TRUE(c.WaitClosed());
    EXPECT_GE(Clock::now() - start, 190ms);
  }
  {
    // Also after a request on a keep-alive connection.
    Client c(port());
    ASSERT_TRUE(c.Send(Get("/")));
    ASSERT_TRUE(c.ReadResponse());
    const auto answered = Clock::now();
    EXPECT_TRUE(c.WaitClosed());
    // The server's timer may have started a moment before the client saw the answer.
    EXPECT_GE(Clock::now() - answered, 100ms);
  }
  EXPECT_TRUE(WaitFor([&] { return server_->active_sessions() == 0; }));
}

TEST_F(HttpServerTest, ReadTimeoutClosesStalledRequest) {
  HttpServerOptions options;
  options.idle_timeout = 30s;
  options.read_timeout = 200ms;
  StartServer(EchoHandler, options);
  Client c(port());
  const auto start = Clock::now();
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: t\r\n"));  // head never finishes
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_GE(Clock::now() - start, 190ms);
  EXPECT_TRUE(c.pending().empty()) << "a timeout closes without an answer";
}

TEST_F(HttpServerTest, ConnectionsBeyondLimitGet503) {
  HttpServerOptions options;
  options.max_connections = 1;
  StartServer(EchoHandler, options);
  Client first(port());
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 1; }));
  Client second(port());
  auto res = second.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(Lower(res->Header("Connection")), "close");
  EXPECT_TRUE(second.WaitClosed());
  EXPECT_EQ(rejected(), std::vector<int>{503});
  EXPECT_EQ(res->Header("Retry-After"), "1");  // agents and ranks hold off, then come back
  EXPECT_EQ(shed(), std::vector<ShedReason>{ShedReason::kConnectionCap});
  // The first connection still works.
  ASSERT_TRUE(first.Send(Get("/ok")));
  auto ok = first.ReadResponse();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, ShutdownDeliversInFlightResponseAndRefusesNewConnections) {
  DeferredHandler h;
  StartServer(h.handler());
  Client busy(port());
  ASSERT_TRUE(busy.Send(Get("/in-flight")));
  ASSERT_TRUE(WaitFor([&] { return h.count() == 1; }));
  Client idle(port());
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 2; }));

  ShutdownServer(10s);
  EXPECT_TRUE(idle.WaitClosed()) << "idle keep-alive connections close at once";
  EXPECT_TRUE(idle.pending().empty());
  EXPECT_TRUE(WaitFor([&] {
    Client probe(port());
    return !probe.connected();
  })) << "new connections are refused";
  EXPECT_EQ(drained_calls_.load(), 0) << "a request is still in flight";

  h.respond(0)(HttpResponse{200, "text/plain", {}, "finished", false});
  auto res = busy.ReadResponse();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "finished");
  EXPECT_EQ(Lower(res->Header("Connection")), "close");
  EXPECT_TRUE(busy.WaitClosed());
  EXPECT_TRUE(WaitFor([&] { return drained_calls_ == 1; }));
  EXPECT_EQ(server_->active_sessions(), 0u);
}

TEST_F(HttpServerTest, ShutdownForceClosesAfterGrace) {
  DeferredHandler h;  // never answers on its own
  StartServer(h.handler());
  Client c(port());
  ASSERT_TRUE(c.Send(Get("/hangs")));
  ASSERT_TRUE(WaitFor([&] { return h.count() == 1; }));

  const auto start = Clock::now();
  ShutdownServer(200ms);
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_GE(Clock::now() - start, 190ms);
  EXPECT_TRUE(WaitFor([&] { return drained_calls_ == 1; }));
  EXPECT_EQ(drain_thread_, io_thread_.get_id()) << "on_drained runs on the io thread";
  EXPECT_EQ(server_->active_sessions(), 0u);

  // Answering after the connection is gone is a harmless no-op.
  h.respond(0)(HttpResponse{200, "text/plain", {}, "too late", false});
  EXPECT_TRUE(c.pending().empty());
}

// Closing an idle anonymous connection to make room is shedding too: whoever held it may have been an agent
// between heartbeats, so the daemon counts it as its own lateness (ShedReason::kEvicted is own capacity).
TEST_F(HttpServerTest, AnIdleConnectionEvictedToMakeRoomIsReportedAsShed) {
  HttpServerOptions options;
  options.max_connections = 1;
  options.on_head = [](const HttpRequest&) { return HeadDecision{}; };  // nobody trusted: all evictable
  StartServer(EchoHandler, options);
  Client first(port());
  ASSERT_TRUE(WaitFor([&] { return server_->active_sessions() == 1; }));
  Client second(port());
  EXPECT_TRUE(first.WaitClosed());
  ASSERT_TRUE(second.Send(Get("/ok")));
  auto ok = second.ReadResponse();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(shed(), std::vector<ShedReason>{ShedReason::kEvicted});
  EXPECT_TRUE(IsOwnCapacity(ShedReason::kEvicted));
  EXPECT_FALSE(IsOwnCapacity(ShedReason::kIdentityCap));
  EXPECT_FALSE(IsOwnCapacity(ShedReason::kRateLimited));
}

// A non-blocking connect to 127.0.0.1:port (the handshake completes in the kernel, or waits).
int StartConnect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);  // EINPROGRESS
  return fd;
}

int Established(const std::vector<int>& fds) {
  int n = 0;
  for (int fd : fds) {
    pollfd p{fd, POLLOUT, 0};
    n += poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0;
  }
  return n;
}

TEST_F(HttpServerTest, ConnectionsLeftInAFullListenQueueAreReportedAsShed) {
  // The io thread is held, so nothing is accepted: connections fill a listen queue of two, and the kernel
  // drops later ones, unseen by the server. Taking the first from the full queue is reported as shedding
  // for the server's own capacity (whoever the kernel dropped may have been an agent speaking).
  HttpServerOptions options;
  options.listen_backlog = 2;
  StartServer(EchoHandler, options);
  std::promise<void> release;
  boost::asio::post(ioc_, [held = release.get_future().share()] { held.wait(); });
  std::vector<int> fds;
  for (int i = 0; i < 6; ++i) fds.push_back(StartConnect(port()));
  ASSERT_TRUE(WaitFor([&] { return Established(fds) >= 2; }));
  EXPECT_TRUE(shed().empty());
  release.set_value();
  EXPECT_TRUE(WaitFor([&] {
    const std::vector<ShedReason> s = shed();
    return std::count(s.begin(), s.end(), ShedReason::kListenQueue) > 0;
  }));
  EXPECT_TRUE(IsOwnCapacity(ShedReason::kListenQueue));
  EXPECT_STREQ(ToString(ShedReason::kListenQueue), "listen_queue");
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace shepherd::testing
