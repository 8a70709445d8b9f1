// Internals of HttpServer, private to shepherd_http (the one header of it that includes Beast):
// api/http_server.cpp holds ServerCore (acceptor, connection accounting, shutdown and drain) and the
// HttpServer facade; api/http_session.cpp holds Session (one connection: read, limits, timeouts, write,
// lingering close).
//
// Shape (after the Beast examples): a ServerCore owns the acceptor and a registry of Sessions; each Session
// reads one request at a time with a fresh parser, hands it to the handler, writes the answer and either
// reads the next request (keep-alive) or closes. Everything here runs on the single io thread; the only
// entry points from other threads are `respond` (which posts) and HttpServer::Shutdown (which posts).
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "api/http_server.h"
#include "api/http_types.h"
#include "core/status.h"

namespace shepherd::http_internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

class Session;

// kRejecting: the connection is over every limit and is only answered 503. kReserve: beyond
// max_connections, answers public routes only (probe_reserve). kServing: the rest.
enum class SessionKind { kServing, kReserve, kRejecting };

// Owns the acceptor and the session registry. Lives as long as the HttpServer or any pending operation.
class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::io_context& ioc, HttpHandler handler, HttpServerOptions options);

  Status Listen(const std::string& host, uint16_t port);
  void DoAccept();
  void BeginShutdown(std::chrono::milliseconds grace, std::function<void()> on_drained);
  // Closes the acceptor and every session now; on_drained is not called. Used by ~HttpServer.
  void CloseAll();

  // Session callbacks (io thread).
  // `identity`: the one the session counts against ("" when untrusted).
  void Unregister(uint64_t session_id, SessionKind kind, const std::string& address,
                  const std::string& identity);
  // An untrusted connection that is idle or reading a head may be closed to make room (oldest first).
  void SetEvictable(uint64_t session_id, bool evictable);
  // A trusted connection waiting for its next request may be closed to make room for its own identity
  // or, at max_connections, for others (see HttpServer's "Connection fairness").
  void SetIdle(uint64_t session_id, const std::string& identity, bool idle);
  // Moves a serving session from its address's count (or from identity `from`) to identity `to`, first
  // closing `to`'s oldest idle connection when `to` is at `cap`. False (nothing moved) when `to` is at
  // `cap` with no idle connection.
  bool ClaimIdentity(uint64_t session_id, const std::string& address, const std::string& from,
                     const std::string& to, std::size_t cap);

  enum class BodyGrant { kGranted, kOwnShare, kClassFull };
  // Reserves `bytes` for `owner` (an identity, or "addr:<ip>") in class `c`.
  BodyGrant ReserveBody(std::uint64_t bytes, BodyClass c, const std::string& owner);
  void ReleaseBody(std::uint64_t bytes, BodyClass c, const std::string& owner);
  void Rejected(int status);
  // Reports one connection or request turned away (HttpServerOptions::on_shed).
  void Shed(ShedReason reason);
  // Whether to log one more refusal on a request head: at most kRefusalLines per kRefusalWindow, then one
  // line counting the rest (a client retrying with a withdrawn token twice a second would drown the log).
  bool LogRefusal();
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
  // Whether the listen queue is (nearly) full right after an accept: the kernel drops new connections
  // then, which the server never sees (TCP_INFO of a listener: tcpi_unacked queued, tcpi_sacked limit).
  bool ListenQueueFull();
  // Closes the oldest evictable session (of `address` when given). False when there is none.
  bool EvictOne(const std::string* address);
  // Closes the oldest idle connection of `identity`. False when it has none. `for_another`: the room is
  // for another caller (shed: ShedReason::kEvicted), not for the same identity's newer connection.
  bool EvictIdleOf(const std::string& identity, bool for_another);
  // At max_connections: closes the oldest idle connection of the identity holding the most connections,
  // when that is more than its share. False when there is none.
  bool EvictOverShare();
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
  std::size_t rejecting_ = 0;                                 // sessions in sessions_ that only answer 503
  std::size_t reserve_ = 0;                                   // sessions in sessions_ on the probe reserve
  std::set<uint64_t> evictable_;                              // ordered: oldest first
  std::unordered_map<std::string, std::size_t> per_address_;  // serving sessions by client IP
  struct IdentityState {
    std::size_t connections = 0;
    std::set<uint64_t> idle;  // ordered: oldest first
  };
  std::unordered_map<std::string, IdentityState> identities_;
  std::array<std::uint64_t, 3> body_in_use_{};  // by BodyClass
  std::unordered_map<std::string, std::uint64_t> body_by_owner_;  // identity or "addr:<ip>"
  uint64_t next_session_id_ = 1;
  std::atomic<std::size_t> active_{0};

  bool shutting_down_ = false;
  bool closed_ = false;
  std::function<void()> on_drained_;
  std::atomic<bool> shutdown_requested_{false};

  const uint64_t request_id_seed_;
  uint64_t request_counter_ = 0;

  static constexpr int kRefusalLines = 20;
  static constexpr std::chrono::seconds kRefusalWindow{10};
  Clock::time_point refusal_window_start_{};
  int refusals_logged_ = 0;
  std::uint64_t refusals_unlogged_ = 0;
};

// One connection. Lives in the core's registry from accept until CloseNow(). All members run on the io
// thread.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerCore> core, uint64_t id, tcp::socket socket, SessionKind kind,
          std::string address);

  const std::string& address() const { return address_; }

  void Start();

  // The server is shutting down: an idle connection closes now; one with a request in progress closes
  // after answering it (responses built from now on carry Connection: close).
  void OnServerShutdown();

  void CloseNow();

  void OnResponse(uint64_t seq, HttpResponse res);

 private:
  enum class Phase { kIdle, kReading, kHandling, kWriting, kLingering, kClosed };

  bool Evictable() const;
  void DoRead();
  void OnIdleRead(const error_code& ec, std::size_t n);
  void ReadHeader();
  void OnHeader(const error_code& ec);
  void ReadBody();
  void ReadSomeBody();
  // Where to draw the body budget from: the identity, or the address of an anonymous caller.
  std::string BodyOwner() const;
  void OnReadError(const error_code& ec);
  void OnRequest();
  Respond MakeRespond();
  // Answers a request the server refuses by itself, then closes.
  void Reject(int status, std::string detail);
  // 503/429 for the server's own capacity: rate-limited log line, Retry-After: 1.
  void RejectBusy(int status, std::string detail);
  void RejectWith(HttpResponse res);
  void Write(HttpResponse res);
  void OnWrite(const error_code& ec, std::size_t bytes);
  void BeginLingeringClose();
  void DoLinger();

  const std::shared_ptr<ServerCore> core_;
  const uint64_t id_;
  const SessionKind kind_;
  const std::string address_;  // client IP ("" when unknown)
  bool trusted_ = false;       // a request on this connection carried a valid credential
  std::string identity_;       // the identity this connection counts against ("" while untrusted)
  bool idle_listed_ = false;   // in the core's idle set of identity_
  std::uint64_t body_reserved_ = 0;
  BodyClass body_class_ = BodyClass::kStandard;
  std::string body_owner_;
  Clock::time_point body_start_;
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

}  // namespace shepherd::http_internal
