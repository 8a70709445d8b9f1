// Session: one HTTP connection of HttpServer, from accept to close: reads one request at a time with a fresh
// parser (header and body limits, idle and read timeouts, 100-continue), hands it to the handler, writes
// the answer (or the server's own 400/413/431/503) and then reads the next request or closes lingeringly.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <cctype>
#include <exception>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "api/http_server_internal.h"
#include "api/problem.h"

namespace shepherd::http_internal {
namespace {

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

bool IsHttpParseError(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

// The request target as a path (RFC 9112 §3.2): origin-form ("/v1/jobs?x=1") as it is; absolute-form
// ("http://host:port/v1/jobs") without its scheme and authority. Anything else ("v1/jobs", "*"): nullopt.
std::optional<std::string> OriginForm(std::string_view target) {
  if (target.starts_with('/')) return std::string(target);
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() < scheme.size() || !std::equal(scheme.begin(), scheme.end(), target.begin(),
                                                     [](char a, char b) { return std::tolower(b) == a; }))
      continue;
    const std::size_t path = target.find_first_of("/?", scheme.size());
    if (path == std::string_view::npos) return std::string("/");
    return (target[path] == '?' ? "/" : "") + std::string(target.substr(path));
  }
  return std::nullopt;
}

// The head of a request as the transport-neutral type (no body), for ServerCore's on_head; `target` is
// OriginForm of its target.
HttpRequest HeadOf(const http::request<http::string_body>& req, std::string target) {
  HttpRequest head;
  head.method = std::string(req.method_string());
  head.target = std::move(target);
  for (const auto& field : req)
    head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  return head;
}

}  // namespace

Session::Session(std::shared_ptr<ServerCore> core, uint64_t id, tcp::socket socket, SessionKind kind,
                 std::string address)
    : core_(std::move(core)),
      id_(id),
      kind_(kind),
      address_(std::move(address)),
      stream_(std::move(socket)),
      buffer_(core_->options().header_limit + kBufferMargin) {}

void Session::Start() {
  error_code ec;
  const auto remote = stream_.socket().remote_endpoint(ec);
  remote_ = ec ? std::string("?") : fmt::format("{}:{}", remote.address().to_string(), remote.port());
  if (kind_ == SessionKind::kRejecting) {
    core_->Shed(ShedReason::kConnectionCap);
    RejectBusy(503, "too many connections");
    return;
  }
  DoRead();
}

void Session::OnServerShutdown() {
  if (phase_ == Phase::kIdle) CloseNow();
}

bool Session::Evictable() const {
  // Without on_head the server cannot tell who is authenticated: nothing is evicted (plain 503 at the cap).
  return !trusted_ && kind_ == SessionKind::kServing && core_->options().on_head != nullptr;
}

void Session::CloseNow() {
  if (phase_ == Phase::kClosed) return;
  auto self = shared_from_this();  // Unregister drops the registry's reference
  phase_ = Phase::kClosed;
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.close();  // pending operations complete with operation_aborted; parser_ and response_ stay
  core_->ReleaseBody(body_reserved_, body_class_, body_owner_);
  body_reserved_ = 0;
  core_->Unregister(id_, kind_, address_, identity_);
}

void Session::OnResponse(uint64_t seq, HttpResponse res) {
  if (phase_ != Phase::kHandling || seq != request_seq_) {
    spdlog::debug("http {} response dropped: connection closed", request_id_);
    return;
  }
  Write(std::move(res));
}

void Session::DoRead() {
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
  core_->SetEvictable(id_, Evictable());
  if (!identity_.empty()) {
    core_->SetIdle(id_, identity_, true);
    idle_listed_ = true;
  }
  stream_.expires_after(core_->options().idle_timeout);
  const std::size_t n = std::min(buffer_.max_size() - buffer_.size(), kMaxReadSize);
  stream_.async_read_some(buffer_.prepare(n), [self = shared_from_this()](error_code ec, std::size_t n) {
    self->OnIdleRead(ec, n);
  });
}

void Session::OnIdleRead(const error_code& ec, std::size_t n) {
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    if (ec != asio::error::eof) spdlog::debug("http conn {} closed while idle: {}", id_, ec.message());
    CloseNow();
    return;
  }
  buffer_.commit(n);
  ReadHeader();
}

void Session::ReadHeader() {
  phase_ = Phase::kReading;
  core_->SetEvictable(id_, Evictable());
  if (idle_listed_) {
    core_->SetIdle(id_, identity_, false);
    idle_listed_ = false;
  }
  request_start_ = Clock::now();
  request_deadline_ = request_start_ + core_->options().read_timeout;
  stream_.expires_at(request_deadline_);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) { self->OnHeader(ec); });
}

void Session::OnHeader(const error_code& ec) {
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    OnReadError(ec);
    return;
  }
  core_->SetEvictable(id_, false);
  const auto& req = parser_->get();
  std::optional<std::string> target = OriginForm({req.target().data(), req.target().size()});
  if (!target) {
    Reject(400, "the request target must be a path starting with '/' (or an absolute http:// URL)");
    return;
  }
  // Authentication and authorization on the head: a refused request never has its body read, and the
  // connection closes (its announced body is discarded only by the bounded lingering close).
  BodyClass body_class = BodyClass::kStandard;
  if (const auto& on_head = core_->options().on_head) {
    HttpRequest head = HeadOf(req, std::move(*target));
    HeadDecision d = on_head(head);
    if (d.trusted) trusted_ = true;
    method_ = head.method;  // for a refusal's log line
    target_ = head.target;
    if (d.refuse) {
      RejectWith(std::move(*d.refuse));
      return;
    }
    if (kind_ == SessionKind::kReserve && !d.is_public) {
      core_->Shed(ShedReason::kConnectionCap);
      RejectBusy(503, "too many connections; this one may only call /healthz and /readyz");
      return;
    }
    if (d.trusted && !d.identity.empty() && kind_ == SessionKind::kServing && d.identity != identity_) {
      const std::size_t cap =
          d.max_connections > 0 ? d.max_connections : core_->options().max_connections_per_identity;
      if (!core_->ClaimIdentity(id_, address_, identity_, d.identity, cap)) {
        HttpResponse busy = Problem(
            429,
            fmt::format("this credential already holds {} connections, none of them idle; retry later", cap));
        busy.headers.emplace_back("Retry-After", "1");
        core_->Shed(ShedReason::kIdentityCap);
        RejectWith(std::move(busy));
        return;
      }
      identity_ = std::move(d.identity);
    }
    body_class = d.body_class;
  }
  if (!parser_->is_done()) {
    const auto announced = parser_->content_length();
    const std::uint64_t need = announced ? *announced : core_->options().body_limit;
    std::string owner = BodyOwner();
    switch (core_->ReserveBody(need, body_class, owner)) {
      case ServerCore::BodyGrant::kGranted:
        break;
      case ServerCore::BodyGrant::kOwnShare: {
        HttpResponse busy =
            Problem(429, "this caller's request bodies in flight have reached its share; retry later");
        busy.headers.emplace_back("Retry-After", "1");
        core_->Shed(ShedReason::kBodyShare);
        RejectWith(std::move(busy));
        return;
      }
      case ServerCore::BodyGrant::kClassFull: {
        HttpResponse busy = Problem(503, "the server is buffering too many request bodies; retry later");
        busy.headers.emplace_back("Retry-After", "1");
        core_->Shed(ShedReason::kBodyBudget);
        RejectWith(std::move(busy));
        return;
      }
    }
    body_reserved_ = need;
    body_class_ = body_class;
    body_owner_ = std::move(owner);
    body_start_ = Clock::now();
  }
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

std::string Session::BodyOwner() const {
  return identity_.empty() ? "addr:" + address_ : identity_;
}

void Session::ReadBody() {
  if (parser_->is_done()) {
    OnRequest();
    return;
  }
  ReadSomeBody();
}

void Session::ReadSomeBody() {
  // The body must keep up an average of body_min_rate after the grace: the next bytes are due by the time
  // the average would fall below it, and the whole request by request_deadline_.
  Clock::time_point due = request_deadline_;
  const auto& o = core_->options();
  if (o.body_min_rate > 0 && body_reserved_ > o.body_rate_min_bytes) {
    const auto received = static_cast<double>(parser_->get().body().size());
    due = std::min(due, body_start_ + o.body_rate_grace +
                            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                received / static_cast<double>(o.body_min_rate))));
  }
  stream_.expires_at(due);
  http::async_read_some(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, std::size_t) {
    if (self->phase_ == Phase::kClosed) return;
    if (ec) {
      self->OnReadError(ec);
      return;
    }
    if (self->parser_->is_done()) {
      self->OnRequest();
      return;
    }
    self->ReadSomeBody();
  });
}

void Session::OnReadError(const error_code& ec) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    // buffer_overflow: the head, a chunk header (extensions) or the trailer outgrew the capped buffer.
    Reject(431, fmt::format("request header, chunk extension or trailer larger than {} bytes",
                            core_->options().header_limit));
  } else if (ec == http::error::body_limit) {
    Reject(413, fmt::format("request body larger than {} bytes", core_->options().body_limit));
  } else if (ec == beast::error::timeout && body_reserved_ > 0) {
    // A body too slow for the read deadline: its reservation goes back now (no answer; the sender is
    // either gone or dribbling on purpose).
    if (core_->LogRefusal())
      spdlog::info("http conn {} from {}: {} {} body cut off by its read deadline after {} of {} bytes", id_,
                   remote_, method_, target_.substr(0, target_.find('?')),
                   parser_ ? parser_->get().body().size() : 0, body_reserved_);
    core_->Rejected(408);
    CloseNow();
  } else if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
             ec == beast::error::timeout || !IsHttpParseError(ec)) {
    // Nobody to answer: the peer left, went silent, or the socket failed.
    spdlog::debug("http conn {} closed while reading a request: {}", id_, ec.message());
    CloseNow();
  } else {
    Reject(400, "malformed HTTP request: " + ec.message());
  }
}

void Session::OnRequest() {
  auto& req = parser_->get();
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = *OriginForm({req.target().data(), req.target().size()});  // checked in OnHeader
  request.headers.reserve(std::distance(req.begin(), req.end()));
  for (const auto& field : req) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(req.body());
  core_->ReleaseBody(body_reserved_, body_class_, body_owner_);
  body_reserved_ = 0;
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

Respond Session::MakeRespond() {
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

void Session::Reject(int status, std::string detail) {
  spdlog::warn("http answered {} to {}: {}", status, remote_, detail);
  RejectWith(Problem(status, detail));
}

void Session::RejectBusy(int status, std::string detail) {
  // Logged like refusals on a head (a fleet turned away at once would drown the log), with Retry-After so
  // agents and ranks hold off (the agent and the Python client honour it, with jitter).
  if (core_->LogRefusal()) spdlog::warn("http answered {} to {}: {}", status, remote_, detail);
  HttpResponse busy = Problem(status, std::move(detail));
  busy.headers.emplace_back("Retry-After", "1");
  RejectWith(std::move(busy));
}

void Session::RejectWith(HttpResponse res) {
  if (request_id_.empty()) request_id_ = core_->NewRequestId();
  if (res.status != 503 && res.status != 413 && res.status != 431 && res.status != 400 && core_->LogRefusal())
    spdlog::info("http {} refused {} {} {} from {} on its head", request_id_, res.status, method_,
                 target_.substr(0, target_.find('?')), remote_);
  core_->Rejected(res.status);
  core_->ReleaseBody(body_reserved_, body_class_, body_owner_);
  body_reserved_ = 0;
  version_ = 11;
  keep_alive_ = false;
  head_ = false;
  method_ = "-";
  target_ = "-";
  if (phase_ != Phase::kReading) request_start_ = Clock::now();
  parser_.reset();
  Write(std::move(res));
}

void Session::Write(HttpResponse res) {
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

void Session::OnWrite(const error_code& ec, std::size_t bytes) {
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

void Session::BeginLingeringClose() {
  phase_ = Phase::kLingering;
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  buffer_.consume(buffer_.size());
  linger_bytes_ = 0;
  stream_.expires_after(kLingerTimeout);
  DoLinger();
}

void Session::DoLinger() {
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

}  // namespace shepherd::http_internal
