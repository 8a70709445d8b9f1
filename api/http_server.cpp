// The Beast/Asio HTTP server. The only translation unit of shepherd_http that includes Beast.
//
// Shape (after the Beast examples): a ServerCore owns the acceptor and a registry of Sessions; each Session
// reads one request at a time with a fresh parser, hands it to the handler, writes the answer and either
// reads the next request (keep-alive) or closes. Everything here runs on the single io thread; the only
// entry points from other threads are `respond` (which posts) and HttpServer::Shutdown (which posts).
#include "api/http_server.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>
#include <optional>
#include <random>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shepherd {
namespace http_internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

// The read buffer holds at most header_limit + kBufferMargin bytes. The parser reports header_limit once
// the head reaches header_limit, so the margin only has to exceed zero; it is a few KiB so that reads stay
// reasonably large. Beast 1.74 applies no limit of its own to a chunk header (extensions) or to the
// trailer: it waits for the CRLF while the bytes stay in the buffer, so this cap is what turns an endless
// chunk extension or trailer into error::buffer_overflow instead of unbounded growth.
constexpr std::size_t kBufferMargin = 4096;
constexpr std::size_t kMaxReadSize = 16 * 1024;
// After answering with Connection: close, the server shuts down its send side and discards what the client
// still sends, for at most this long and this much, so that the client reads the answer instead of a
// reset (closing a socket with unread input sends RST).
constexpr auto kLingerTimeout = std::chrono::milliseconds(500);
constexpr std::size_t kLingerMaxBytes = 64 * 1024;
// Connections beyond max_connections are answered 503 by at most this many sessions at a time; more are
// closed without an answer.
constexpr std::size_t kMaxRejecting = 64;
constexpr std::size_t kMaxRequestIdLength = 64;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

bool IsSaneRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdLength) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

// A header the handler may set: a token name and a value without CR, LF or NUL (no response splitting),
// and not one of the framing headers the server owns.
bool IsSettableHeader(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool token = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!token) return false;
  }
  if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos) return false;
  const http::field f = http::string_to_field(beast::string_view(name.data(), name.size()));
  return f != http::field::content_length && f != http::field::transfer_encoding &&
         f != http::field::connection;
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string_view ReasonPhrase(int status) {
  const auto r = http::obsolete_reason(static_cast<http::status>(status));
  return {r.data(), r.size()};
}

HttpResponse Problem(int status, std::string_view detail) {
  HttpResponse res;
  res.status = status;
  res.content_type = "application/problem+json";
  res.body = fmt::format(R"({{"type":"about:blank","title":"{}","status":{},"detail":"{}"}})",
                         JsonEscape(ReasonPhrase(status)), status, JsonEscape(detail));
  return res;
}

bool IsHttpParseError(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

}  // namespace

class Session;

// Owns the acceptor and the session registry. Lives as long as the HttpServer or any pending operation.
class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::io_context& ioc, HttpHandler handler, HttpServerOptions options)
      : ioc_(ioc),
        acceptor_(ioc),
        accept_retry_timer_(ioc),
        grace_timer_(ioc),
        handler_(std::move(handler)),
        options_(std::move(options)),
        request_id_seed_(std::random_device{}() * 0x100000000ull + std::random_device{}()) {}

  Status Listen(const std::string& host, uint16_t port);
  void DoAccept();
  void BeginShutdown(std::chrono::milliseconds grace, std::function<void()> on_drained);
  // Closes the acceptor and every session now; on_drained is not called. Used by ~HttpServer.
  void CloseAll();

  // Session callbacks (io thread).
  void Unregister(uint64_t session_id, bool rejecting);
  void Rejected(int status);
  std::string NewRequestId();

  asio::io_context& ioc() { return ioc_; }
  const HttpHandler& handler() const { return handler_; }
  const HttpServerOptions& options() const { return options_; }
  bool shutting_down() const { return shutting_down_; }
  uint16_t port() const { return port_; }
  std::size_t active_sessions() const { return active_.load(std::memory_order_relaxed); }
  std::atomic<bool>& shutdown_requested() { return shutdown_requested_; }

 private:
  void OnAccept(const error_code& ec, tcp::socket socket);
  void ForceCloseSessions();
  void Drained();

  asio::io_context& ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_timer_;
  asio::steady_timer grace_timer_;
  const HttpHandler handler_;
  const HttpServerOptions options_;
  uint16_t port_ = 0;

  // Every open connection. Sessions hold the core; the registry holds the sessions until they close.
  std::unordered_map<uint64_t, std::shared_ptr<Session>> sessions_;
  std::size_t rejecting_ = 0;  // sessions in sessions_ that only answer 503
  uint64_t next_session_id_ = 1;
  std::atomic<std::size_t> active_{0};

  bool shutting_down_ = false;
  bool closed_ = false;
  std::function<void()> on_drained_;
  std::atomic<bool> shutdown_requested_{false};

  const uint64_t request_id_seed_;
  uint64_t request_counter_ = 0;
};

// One connection. Lives in the core's registry from accept until CloseNow().
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerCore> core, uint64_t id, tcp::socket socket, bool rejecting)
      : core_(std::move(core)),
        id_(id),
        rejecting_(rejecting),
        stream_(std::move(socket)),
        buffer_(core_->options().header_limit + kBufferMargin) {}

  void Start() {
    error_code ec;
    const auto remote = stream_.socket().remote_endpoint(ec);
    remote_ = ec ? std::string("?") : fmt::format("{}:{}", remote.address().to_string(), remote.port());
    if (rejecting_) {
      Reject(503, "too many connections");
      return;
    }
    DoRead();
  }

  // The server is shutting down: an idle connection closes now; one with a request in progress closes
  // after answering it (responses built from now on carry Connection: close).
  void OnServerShutdown() {
    if (phase_ == Phase::kIdle) CloseNow();
  }

  void CloseNow() {
    if (phase_ == Phase::kClosed) return;
    auto self = shared_from_this();  // Unregister drops the registry's reference
    phase_ = Phase::kClosed;
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();  // pending operations complete with operation_aborted; parser_ and response_ stay
    core_->Unregister(id_, rejecting_);
  }

  void OnResponse(uint64_t seq, HttpResponse res) {
    if (phase_ != Phase::kHandling || seq != request_seq_) {
      spdlog::debug("http {} response dropped: connection closed", request_id_);
      return;
    }
    Write(std::move(res));
  }

 private:
  enum class Phase { kIdle, kReading, kHandling, kWriting, kLingering, kClosed };

  void DoRead() {
    if (core_->shutting_down()) {
      CloseNow();
      return;
    }
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(core_->options().header_limit));
    parser_->body_limit(core_->options().body_limit);
    request_id_.clear();
    if (buffer_.size() > 0) {  // a pipelined request has begun already
      ReadHeader();
      return;
    }
    phase_ = Phase::kIdle;
    stream_.expires_after(core_->options().idle_timeout);
    const std::size_t n = std::min(buffer_.max_size() - buffer_.size(), kMaxReadSize);
    stream_.async_read_some(buffer_.prepare(n), [self = shared_from_this()](error_code ec, std::size_t n) {
      self->OnIdleRead(ec, n);
    });
  }

  void OnIdleRead(const error_code& ec, std::size_t n) {
    if (phase_ == Phase::kClosed) return;
    if (ec) {
      if (ec != asio::error::eof) spdlog::debug("http conn {} closed while idle: {}", id_, ec.message());
      CloseNow();
      return;
    }
    buffer_.commit(n);
    ReadHeader();
  }

  void ReadHeader() {
    phase_ = Phase::kReading;
    request_start_ = Clock::now();
    request_deadline_ = request_start_ + core_->options().read_timeout;
    stream_.expires_at(request_deadline_);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  void OnHeader(const error_code& ec) {
    if (phase_ == Phase::kClosed) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    const auto& req = parser_->get();
    if (!parser_->is_done() && req.version() >= 11 &&
        beast::iequals(req[http::field::expect], "100-continue")) {
      stream_.expires_at(request_deadline_);
      asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](error_code ec, std::size_t) {
                          if (self->phase_ == Phase::kClosed) return;
                          if (ec) {
                            self->OnReadError(ec);
                            return;
                          }
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) {
      OnRequest();
      return;
    }
    stream_.expires_at(request_deadline_);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (self->phase_ == Phase::kClosed) return;
      if (ec) {
        self->OnReadError(ec);
        return;
      }
      self->OnRequest();
    });
  }

  void OnReadError(const error_code& ec) {
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      // buffer_overflow: the head, a chunk header (extensions) or the trailer outgrew the capped buffer.
      Reject(431, fmt::format("request header, chunk extension or trailer larger than {} bytes",
                              core_->options().header_limit));
    } else if (ec == http::error::body_limit) {
      Reject(413, fmt::format("request body larger than {} bytes", core_->options().body_limit));
    } else if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
               ec == beast::error::timeout || !IsHttpParseError(ec)) {
      // Nobody to answer: the peer left, went silent, or the socket failed.
      spdlog::debug("http conn {} closed while reading a request: {}", id_, ec.message());
      CloseNow();
    } else {
      Reject(400, "malformed HTTP request: " + ec.message());
    }
  }

  void OnRequest() {
    auto& req = parser_->get();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.headers.reserve(std::distance(req.begin(), req.end()));
    for (const auto& field : req) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request.body = std::move(req.body());
    const auto incoming_id = req["X-Request-Id"];
    request_id_ = IsSaneRequestId({incoming_id.data(), incoming_id.size()}) ? std::string(incoming_id)
                                                                            : core_->NewRequestId();
    request.request_id = request_id_;
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    method_ = request.method;
    target_ = request.target;
    parser_.reset();

    phase_ = Phase::kHandling;
    ++request_seq_;
    stream_.expires_never();
    spdlog::debug("http {} {} {} from {}", request_id_, method_, target_, remote_);

    Respond respond = MakeRespond();
    try {
      core_->handler()(std::move(request), respond);
    } catch (const std::exception& e) {
      spdlog::error("http {} handler threw: {}", request_id_, e.what());
      respond(Problem(500, "internal error"));
    } catch (...) {
      spdlog::error("http {} handler threw an unknown exception", request_id_);
      respond(Problem(500, "internal error"));
    }
  }

  Respond MakeRespond() {
    auto used = std::make_shared<std::atomic<bool>>(false);
    std::weak_ptr<Session> weak = shared_from_this();
    auto executor = core_->ioc().get_executor();
    return [used, weak, executor, seq = request_seq_, id = request_id_](HttpResponse res) {
      if (used->exchange(true)) {
        spdlog::warn("http {} respond called more than once; ignored", id);
        return;
      }
      if (weak.expired()) {
        spdlog::debug("http {} response dropped: connection closed", id);
        return;
      }
      asio::post(executor, [weak, seq, res = std::move(res)]() mutable {
        if (auto session = weak.lock()) session->OnResponse(seq, std::move(res));
      });
    };
  }

  // Answers a request the server refuses by itself, then closes.
  void Reject(int status, std::string detail) {
    if (request_id_.empty()) request_id_ = core_->NewRequestId();
    spdlog::warn("http {} answered {} to {}: {}", request_id_, status, remote_, detail);
    core_->Rejected(status);
    version_ = 11;
    keep_alive_ = false;
    head_ = false;
    method_ = "-";
    target_ = "-";
    if (phase_ != Phase::kReading) request_start_ = Clock::now();
    parser_.reset();
    Write(Problem(status, detail));
  }

  void Write(HttpResponse res) {
    if (res.status < 200 || res.status > 599) {
      spdlog::error("http {} handler answered invalid status {}; sending 500", request_id_, res.status);
      res = Problem(500, "invalid response status");
    }
    const bool keep_alive = keep_alive_ && !res.close && !core_->shutting_down();
    auto& msg = response_.emplace();
    msg.version(version_);
    msg.result(static_cast<unsigned>(res.status));
    msg.set(http::field::server, core_->options().server_name);
    if (!res.content_type.empty()) msg.set(http::field::content_type, res.content_type);
    msg.set("X-Request-Id", request_id_);
    for (const auto& [name, value] : res.headers) {
      if (IsSettableHeader(name, value)) {
        msg.insert(name, value);
      } else {
        spdlog::warn("http {} dropped response header '{}'", request_id_, JsonEscape(name));
      }
    }
    msg.keep_alive(keep_alive);
    const bool no_body = res.status == 204 || res.status == 304;
    if (head_) {
      msg.content_length(res.body.size());
    } else {
      if (!no_body) msg.body() = std::move(res.body);
      msg.prepare_payload();
    }

    phase_ = Phase::kWriting;
    stream_.expires_after(core_->options().write_timeout);
    http::async_write(stream_, msg,
                      [self = shared_from_this()](error_code ec, std::size_t n) { self->OnWrite(ec, n); });
  }

  void OnWrite(const error_code& ec, std::size_t bytes) {
    if (phase_ == Phase::kClosed) return;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - request_start_).count();
    const unsigned status = response_->result_int();
    if (ec) {
      spdlog::debug("http {} {} {} -> {} write failed after {} ms: {}", request_id_, method_, target_, status,
                    ms, ec.message());
      CloseNow();
      return;
    }
    spdlog::debug("http {} {} {} -> {} ({} bytes, {} ms)", request_id_, method_, target_, status, bytes, ms);
    const bool keep_alive = response_->keep_alive();
    response_.reset();
    if (keep_alive) {
      DoRead();
    } else {
      BeginLingeringClose();
    }
  }

  void BeginLingeringClose() {
    phase_ = Phase::kLingering;
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    buffer_.consume(buffer_.size());
    linger_bytes_ = 0;
    stream_.expires_after(kLingerTimeout);
    DoLinger();
  }

  void DoLinger() {
    const std::size_t n = std::min(buffer_.max_size(), kMaxReadSize);
    stream_.async_read_some(buffer_.prepare(n), [self = shared_from_this()](error_code ec, std::size_t n) {
      if (self->phase_ == Phase::kClosed) return;
      self->linger_bytes_ += n;
      if (ec || self->linger_bytes_ > kLingerMaxBytes) {
        self->CloseNow();
        return;
      }
      self->DoLinger();
    });
  }

  const std::shared_ptr<ServerCore> core_;
  const uint64_t id_;
  const bool rejecting_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;                                      // capped at header_limit + kBufferMargin
  std::optional<http::request_parser<http::string_body>> parser_;  // fresh for every request
  std::optional<http::response<http::string_body>> response_;      // the one being written
  Phase phase_ = Phase::kIdle;
  std::string remote_;

  // The current request.
  uint64_t request_seq_ = 0;  // tells a late response for an earlier request from the current one
  std::string request_id_;
  std::string method_;
  std::string target_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;
  Clock::time_point request_start_;
  Clock::time_point request_deadline_;
  std::size_t linger_bytes_ = 0;
};

Status ServerCore::Listen(const std::string& host, uint16_t port) {
  error_code ec;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(ioc_);
    const auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return InvalidArgument(fmt::format("cannot resolve listen host '{}': {}", host,
                                         ec ? ec.message() : std::string("no address")));
    }
    endpoint = results.begin()->endpoint();
  }
  const std::string where = fmt::format("{}:{}", host, port);
  if (acceptor_.open(endpoint.protocol(), ec)) {
    return Unavailable(fmt::format("listen on {}: open: {}", where, ec.message()));
  }
  acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (acceptor_.bind(endpoint, ec)) {
    return Unavailable(fmt::format("listen on {}: bind: {}", where, ec.message()));
  }
  if (acceptor_.listen(asio::socket_base::max_listen_connections, ec)) {
    return Unavailable(fmt::format("listen on {}: listen: {}", where, ec.message()));
  }
  const auto local = acceptor_.local_endpoint(ec);
  if (ec) return Unavailable(fmt::format("listen on {}: local_endpoint: {}", where, ec.message()));
  port_ = local.port();
  return Status::Ok();
}

void ServerCore::DoAccept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(ioc_, [self = shared_from_this()](error_code ec, tcp::socket socket) {
    self->OnAccept(ec, std::move(socket));
  });
}

void ServerCore::OnAccept(const error_code& ec, tcp::socket socket) {
  if (closed_ || shutting_down_ || ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // E.g. out of file descriptors: back off briefly instead of spinning.
    spdlog::warn("http accept failed: {}", ec.message());
    accept_retry_timer_.expires_after(std::chrono::milliseconds(100));
    accept_retry_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->DoAccept();
    });
    return;
  }
  const std::size_t serving = sessions_.size() - rejecting_;
  const bool reject = serving >= options_.max_connections;
  if (reject && rejecting_ >= kMaxRejecting) {
    error_code ignored;
    socket.close(ignored);
    Rejected(503);
  } else {
    const uint64_t id = next_session_id_++;
    auto session = std::make_shared<Session>(shared_from_this(), id, std::move(socket), reject);
    sessions_.emplace(id, session);
    if (reject) ++rejecting_;
    active_.store(sessions_.size(), std::memory_order_relaxed);
    session->Start();
  }
  DoAccept();
}

void ServerCore::Unregister(uint64_t session_id, bool rejecting) {
  if (sessions_.erase(session_id) == 0) return;
  if (rejecting) --rejecting_;
  active_.store(sessions_.size(), std::memory_order_relaxed);
  if (shutting_down_ && sessions_.empty()) Drained();
}

void ServerCore::Rejected(int status) {
  if (!options_.on_rejected) return;
  try {
    options_.on_rejected(status);
  } catch (const std::exception& e) {
    spdlog::error("http on_rejected threw: {}", e.what());
  } catch (...) {
    spdlog::error("http on_rejected threw an unknown exception");
  }
}

std::string ServerCore::NewRequestId() {
  // splitmix64 of seed + counter: a bijection, so ids are unique within a server, and look random across
  // restarts.
  uint64_t z = request_id_seed_ + (++request_counter_) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return fmt::format("{:016x}", z);
}

void ServerCore::BeginShutdown(std::chrono::milliseconds grace, std::function<void()> on_drained) {
  if (closed_ || shutting_down_) return;
  shutting_down_ = true;
  on_drained_ = std::move(on_drained);
  error_code ec;
  acceptor_.close(ec);
  accept_retry_timer_.cancel();
  spdlog::info("http server on port {} shutting down: {} connections, grace {} ms", port_, sessions_.size(),
               grace.count());
  std::vector<std::shared_ptr<Session>> sessions;
  for (const auto& [id, session] : sessions_) sessions.push_back(session);
  for (const auto& session : sessions) session->OnServerShutdown();
  if (sessions_.empty()) {
    Drained();
    return;
  }
  grace_timer_.expires_after(grace);
  grace_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->sessions_.empty()) return;
    spdlog::warn("http server on port {}: grace period over, closing {} connections", self->port_,
                 self->sessions_.size());
    self->ForceCloseSessions();
  });
}

void ServerCore::ForceCloseSessions() {
  std::vector<std::shared_ptr<Session>> sessions;
  for (const auto& [id, session] : sessions_) sessions.push_back(session);
  for (const auto& session : sessions) session->CloseNow();
}

void ServerCore::Drained() {
  grace_timer_.cancel();
  auto on_drained = std::move(on_drained_);
  on_drained_ = nullptr;
  spdlog::info("http server on port {} drained", port_);
  if (!on_drained) return;
  try {
    on_drained();
  } catch (const std::exception& e) {
    spdlog::error("http on_drained threw: {}", e.what());
  } catch (...) {
    spdlog::error("http on_drained threw an unknown exception");
  }
}

void ServerCore::CloseAll() {
  closed_ = true;
  shutting_down_ = true;
  on_drained_ = nullptr;
  error_code ec;
  acceptor_.close(ec);
  accept_retry_timer_.cancel();
  grace_timer_.cancel();
  ForceCloseSessions();
}

}  // namespace http_internal

HttpServer::HttpServer(std::shared_ptr<http_internal::ServerCore> core) : core_(std::move(core)) {}

HttpServer::~HttpServer() {
  core_->CloseAll();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(boost::asio::io_context& ioc, const std::string& host,
                                                      uint16_t port, HttpHandler handler,
                                                      HttpServerOptions options) {
  if (!handler) return InvalidArgument("http server needs a handler");
  if (options.header_limit == 0 || options.header_limit > UINT32_MAX) {
    return InvalidArgument("http server header_limit must be in [1, 2^32)");
  }
  try {
    auto core = std::make_shared<http_internal::ServerCore>(ioc, std::move(handler), std::move(options));
    if (Status status = core->Listen(host, port); !status.ok()) return status;
    // Accepting starts on the io thread, so the acceptor is only ever touched there.
    boost::asio::post(ioc, [core] { core->DoAccept(); });
    spdlog::info("http server listening on {}:{}", host, core->port());
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(core)));
  } catch (const std::exception& e) {
    return Internal(fmt::format("http server start on {}:{}: {}", host, port, e.what()));
  }
}

uint16_t HttpServer::port() const {
  return core_->port();
}

void HttpServer::Shutdown(std::chrono::milliseconds grace, std::function<void()> on_drained) {
  if (core_->shutdown_requested().exchange(true)) {
    spdlog::warn("http server on port {}: Shutdown called more than once; ignored", core_->port());
    return;
  }
  boost::asio::post(core_->ioc(), [core = core_, grace, on_drained = std::move(on_drained)]() mutable {
    core->BeginShutdown(grace, std::move(on_drained));
  });
}

std::size_t HttpServer::active_sessions() const {
  return core_->active_sessions();
}

}  // namespace shepherd
