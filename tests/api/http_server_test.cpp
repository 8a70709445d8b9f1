// HttpServer over real loopback TCP: the server runs in-process on 127.0.0.1:0 with its io_context on a
// background thread; the tests talk to it with blocking POSIX sockets. Every wait is a poll with a deadline,
// so a bug fails a test instead of hanging it.
#include "api/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace shepherd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = 5s;  // generous: only reached when something is broken

// Polls `done` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = kDeadline) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct ParsedResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(Lower(name));
    return it == headers.end() ? "" : it->second;
  }
};

// A blocking client connection with deadlines on every read.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }

  // False once the peer has reset or closed the connection.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Waits up to `timeout` for bytes; appends them to the pending input. Returns false on EOF or error
  // (then `closed()` is true) and on timeout.
  bool ReadSome(std::chrono::milliseconds timeout) {
    if (closed_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  // Reads one complete response (Content-Length framed, as the server always sends).
  std::optional<ParsedResponse> ReadResponse(std::chrono::milliseconds timeout = kDeadline) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (auto res = TakeResponse()) return res;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms || !ReadSome(left)) {
        if (auto res = TakeResponse()) return res;
        return std::nullopt;
      }
    }
  }

  // True once the server has closed the connection (EOF or reset) within `timeout`. Fails if data arrives.
  bool WaitClosed(std::chrono::milliseconds timeout = kDeadline) {
    const auto deadline = Clock::now() + timeout;
    while (!closed_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms) return false;
      ReadSome(left);
    }
    return true;
  }

  bool closed() const { return closed_; }
  const std::string& pending() const { return in_; }

 private:
  std::optional<ParsedResponse> TakeResponse() {
    const auto end = in_.find("\r\n\r\n");
    if (end == std::string::npos) return std::nullopt;
    ParsedResponse res;
    std::string head = in_.substr(0, end);
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    res.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line =
          head.substr(start, line_end == std::string::npos ? line_end : line_end - start);
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      res.headers[Lower(line.substr(0, colon))] = value;
    }
    size_t length = 0;
    if (auto it = res.headers.find("content-length"); it != res.headers.end())
      length = std::stoul(it->second);
    if (res.status == 100) length = 0;
    if (in_.size() < end + 4 + length) return std::nullopt;
    res.body = in_.substr(end + 4, length);
    in_.erase(0, end + 4 + length);
    return res;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string in_;
};

std::string Get(const std::string& target, const std::string& extra_headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n";
}

// Answers every request at once: 200 with "<METHOD> <target> <body>" and the request id in X-Seen-Id.
void EchoHandler(HttpRequest req, Respond respond) {
  HttpResponse res;
  res.content_type = "text/plain";
  res.body = req.method + " " + req.target + " " + req.body;
  res.headers.emplace_back("X-Seen-Id", req.request_id);
  respond(std::move(res));
}

// Keeps the `respond` of each request for the test to call later.
class DeferredHandler {
 public:
  HttpHandler handler() {
    return [this](HttpRequest req, Respond respond) {
      std::lock_guard lock(mu_);
      requests_.push_back(std::move(req));
      responds_.push_back(std::move(respond));
    };
  }
  size_t count() {
    std::lock_guard lock(mu_);
    return responds_.size();
  }
  Respond respond(size_t i) {
    std::lock_guard lock(mu_);
    return responds_.at(i);
  }
  HttpRequest request(size_t i) {
    std::lock_guard lock(mu_);
    return requests_.at(i);
  }

 private:
  std::mutex mu_;
  std::vector<HttpRequest> requests_;
  std::vector<Respond> responds_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpHandler handler, HttpServerOptions options = {}) {
    options.on_rejected = [this](int status) {
      std::lock_guard lock(mu_);
      rejected_.push_back(status);
    };
    auto server = HttpServer::Start(ioc_, "127.0.0.1", 0, std::move(handler), std::move(options));
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    ASSERT_NE(server_->port(), 0);
    io_thread_ = std::thread([this] { ioc_.run(); });
  }

  // Starts a graceful shutdown; `drained_` flips when on_drained runs.
  void ShutdownServer(std::chrono::milliseconds grace) {
    shut_down_ = true;
    server_->Shutdown(grace, [this] {
      drain_thread_ = std::this_thread::get_id();
      drained_calls_++;
    });
  }

  void TearDown() override {
    if (server_ && !shut_down_) ShutdownServer(0ms);
    if (server_) {
      EXPECT_TRUE(WaitFor([&] { return drained_calls_ > 0; })) << "server never drained";
    }
    work_.reset();
    // With the server drained nothing is left to do, so run() returns by itself.
    if (io_thread_.joinable()) {
      auto joined = std::async(std::launch::async, [&] { io_thread_.join(); });
      if (joined.wait_for(kDeadline) != std::future_status::ready) {
        ADD_FAILURE() << "io_context still had work after the server drained";
        ioc_.stop();
        joined.wait();
      }
    }
    server_.reset();
  }

  std::vector<int> rejected() {
    std::lock_guard lock(mu_);
    return rejected_;
  }

  uint16_t port() const { return server_->port(); }

  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      boost::asio::make_work_guard(ioc_)};
  std::thread io_thread_;
  std::unique_ptr<HttpServer> server_;
  bool shut_down_ = false;
  std::atomic<int> drained_calls_{0};
  std::thread::id drain_thread_;
  std::mutex mu_;
  std::vector<int> rejected_;
};

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
}  // namespace shepherd
