// HttpServer: an HTTP/1.1 server (Boost.Beast) that turns each request into an HttpRequest, hands it to an
// HttpHandler and writes the HttpResponse the handler gives to `respond`. Beast stays out of this header so
// that only api/http_server.cpp and api/http_session.cpp pay for it.
//
// Threading: the io_context passed to Start must be run by exactly ONE thread (the daemon's control
// thread). Every connection, the handler, on_rejected and on_drained run on that thread. `respond`,
// Shutdown(), port() and active_sessions() may be called from any thread. A `respond` posts the answer to
// the io thread; it is a no-op once the connection is gone, and a second call is ignored with a warning.
// Request ids: a sane incoming X-Request-Id (1-64 of [A-Za-z0-9._-]) is kept, else 16 hex digits are made
// up; the id is in HttpRequest::request_id, the X-Request-Id response header and the server's log lines.
//
// What the server answers by itself, with Connection: close and an application/problem+json body:
//   400 malformed request, 413 body larger than body_limit, 431 request head (or a chunk extension or a
//   chunked trailer) larger than header_limit, 503 more than max_connections connections (or the body
//   budget is spent), and whatever `on_head` refuses (401/403/404/405) - before any body byte is read.
//
// Connection fairness: a connection that has not yet presented a valid credential ("untrusted") and is
// idle or still sending its request head is evictable. When a new connection would exceed max_connections
// or max_connections_per_address, the oldest evictable connection (of that address, for the per-address
// cap) is closed to make room; only when none is evictable is the newcomer refused. Beyond that,
// probe_reserve extra connections may still be accepted to answer public routes (/healthz, /readyz) only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/http_types.h"
#include "core/status.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace shepherd {

namespace http_internal {
class ServerCore;
}  // namespace http_internal

// The server's question about a request head, before its body is read (api/router.h Router::Admit).
struct HeadDecision {
  std::optional<HttpResponse> refuse;  // answer this and close instead of reading the body
  bool trusted = false;                // the head carried a valid credential: the connection is not evictable
  bool is_public = false;              // a public route (answerable on a probe-reserve connection)
};

struct HttpServerOptions {
  // Request line plus header fields; also bounds one chunk header (with its extensions) and the chunked
  // trailer, because the read buffer never holds more than header_limit plus a small margin.
  std::size_t header_limit = 16 * 1024;
  std::uint64_t body_limit = 4 * 1024 * 1024;
  // Longest wait for the first byte of a request on an open connection; restarted before every request.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(30);
  // Deadline for receiving a whole request (head and body), counted from its first byte.
  std::chrono::milliseconds read_timeout = std::chrono::seconds(30);
  // Deadline for writing one response.
  std::chrono::milliseconds write_timeout = std::chrono::seconds(30);
  // Open connections beyond this (after evicting untrusted idle ones) are answered 503 and closed.
  std::size_t max_connections = 10000;
  // Open connections from one client address (IP) beyond this: same treatment.
  std::size_t max_connections_per_address = 512;
  // Connections accepted beyond max_connections that may only call public routes (health probes).
  std::size_t probe_reserve = 16;
  // Bytes of request bodies being buffered at once over all connections: a request whose announced body
  // (Content-Length, or body_limit when chunked) does not fit is answered 503 with Retry-After.
  std::uint64_t body_budget = 256ull << 20;
  // Called on the io thread for every request head once it is parsed. Optional; without it no connection
  // is evicted and there is no probe reserve (plain 503 beyond the caps).
  std::function<HeadDecision(const HttpRequest& head)> on_head;
  // Sent in the Server header.
  std::string server_name = "shepherd";
  // Called on the io thread with the status of every answer the server makes itself (400/401/403/404/
  // 405/413/431/503), and with 0 for every untrusted idle connection evicted to make room, e.g. to count
  // them in metrics. Optional.
  std::function<void(int status)> on_rejected;
};

class HttpServer {
 public:
  // Binds host:port (port 0: any free port), starts accepting and returns the server. Errors (bad address,
  // port in use, ...) come back as a Status; nothing throws.
  // REQUIRES: `ioc` outlives the server and every call to a `respond` it handed out.
  static Result<std::unique_ptr<HttpServer>> Start(boost::asio::io_context& ioc, const std::string& host,
                                                   uint16_t port, HttpHandler handler,
                                                   HttpServerOptions options = {});

  // Closes the listening socket and every connection at once (no drain; use Shutdown first for that); a
  // pending Shutdown's on_drained is then never called.
  // REQUIRES: called on the io thread, or while the io_context is not being run.
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (useful after binding port 0).
  uint16_t port() const;

  // Graceful stop: closes the listening socket, closes idle keep-alive connections, lets requests already
  // being read or handled finish and be written (with Connection: close), force-closes whatever is left
  // after `grace`, then calls `on_drained` once on the io thread when no connection remains. Does not stop
  // the io_context. Only the first call has an effect. Thread-safe.
  void Shutdown(std::chrono::milliseconds grace, std::function<void()> on_drained);

  // Connections currently open (including ones being drained). Thread-safe.
  std::size_t active_sessions() const;

 private:
  explicit HttpServer(std::shared_ptr<http_internal::ServerCore> core);
  // Shared with pending async operations, which may outlive this object until they complete.
  std::shared_ptr<http_internal::ServerCore> core_;
};

}  // namespace shepherd
