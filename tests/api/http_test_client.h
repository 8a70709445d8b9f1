// Test support for HttpServer over real loopback TCP: a blocking POSIX socket client with deadlines on every
// read, canned handlers, and a fixture that runs the server in-process on 127.0.0.1:0 with its io_context on
// a background thread. Every wait is a poll with a deadline, so a bug fails a test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/http_server.h"

namespace shepherd::testing {

inline constexpr std::chrono::seconds kDeadline{5};  // generous: only reached when something is broken

// Polls `done` until it holds or `timeout` passes.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = kDeadline) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

inline std::string Lower(std::string s) {
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
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto res = TakeResponse()) return res;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= std::chrono::milliseconds(0) || !ReadSome(left)) {
        if (auto res = TakeResponse()) return res;
        return std::nullopt;
      }
    }
  }

  // True once the server has closed the connection (EOF or reset) within `timeout`. Fails if data arrives.
  bool WaitClosed(std::chrono::milliseconds timeout = kDeadline) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!closed_) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= std::chrono::milliseconds(0)) return false;
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

inline std::string Get(const std::string& target, const std::string& extra_headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n";
}

// Answers every request at once: 200 with "<METHOD> <target> <body>" and the request id in X-Seen-Id.
inline void EchoHandler(HttpRequest req, Respond respond) {
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
    options.on_shed = [this](ShedReason r) {
      std::lock_guard lock(mu_);
      shed_.push_back(r);
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
    if (server_ && !shut_down_) ShutdownServer(std::chrono::milliseconds(0));
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

  std::vector<ShedReason> shed() {
    std::lock_guard lock(mu_);
    return shed_;
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
  std::vector<ShedReason> shed_;
};

}  // namespace shepherd::testing
