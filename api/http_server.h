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
//   budget of the request's class is spent), 429 the caller's identity is at its connection cap or body
//   share, and whatever `on_head` refuses (401/403/404/405/429) - before any body byte is read.
// Every connection or request the server turns away to protect itself is also reported to on_shed with its
// ShedReason (the daemon counts them, and counts the daemon's own shedding as its own lateness).
//
// Connection fairness: a connection that has not yet presented a valid credential ("untrusted") and is
// idle or still sending its request head is evictable. When a new connection would exceed max_connections
// or max_connections_per_address, the oldest evictable connection (of that address, for the per-address
// cap) is closed to make room. A connection whose head carried a valid credential ("trusted") leaves its
// address's count and counts against its identity (HeadDecision::identity) instead: at most
// max_connections_per_identity, and when an identity is at its cap its own oldest idle connection is closed
// to make room (none idle: 429). At max_connections with nothing untrusted to evict, the oldest idle
// connection of the identity holding the most connections is closed, if it holds more than its share
// (max_connections over the number of identities plus one). Only when nothing is evictable is the newcomer
// refused; probe_reserve extra connections may still be accepted to answer public routes (/healthz,
// /readyz) only.
//
// Body budget: a request's announced body (Content-Length, or body_limit when chunked) is reserved before
// it is read and released when the request is handed on or the connection closes. It must fit its
// identity's share (body_share_per_identity, or body_share_low_role for BodyClass::kLow): else 429 with
// Retry-After (the caller's own quota). It must fit its class: kLiveness (heartbeats and reports) may use
// the whole body_budget, the other classes leave body_reserve_liveness of it unused, and kLow together at
// most body_budget_low_roles: else 503 with Retry-After. So no other class can take the liveness reserve.
// A body over body_rate_min_bytes must keep arriving at body_min_rate bytes/s on average (after
// body_rate_grace from its head), and every request must be complete within read_timeout of the request's first byte, or the connection is closed (no answer)
// and its reservation released.
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

// Whose body budget a request draws on (see "Body budget" above).
enum class BodyClass {
  kLiveness,  // agent heartbeats and rank reports: may use the reserve no other class can
  kStandard,  // everything else
  kLow,       // low-privilege callers (viewers): a small share each and a small pool together
};

// Why the server turned a connection or a request away (on_shed). Connection caps, evictions, the body
// budget, a full queue and the listen queue are the server's own capacity: whoever was turned away may have
// been an agent or a rank speaking, so the daemon counts them as its own lateness (health/lateness.h). The
// identity cap, the body share and the rate limit are the caller's own quota (it holds its share).
enum class ShedReason {
  kConnectionCap,  // refused at accept: max_connections or max_connections_per_address (503)
  kEvicted,        // an idle or head-sending connection closed to make room for another caller's
  kBodyBudget,     // the body budget of the request's class is spent (503)
  kQueueFull,      // the request queue of its class is full (429; reported by the front door, not here)
  kIdentityCap,    // the caller's credential holds its connection cap, none idle (429)
  kBodyShare,      // the caller's bodies in flight hold its share of the body budget (429)
  kRateLimited,    // the sender is over its request rate (429; decided by on_head, not here)
  // Not accepted in time: a connection taken while the listen queue was full (the kernel drops what
  // arrives then, unseen by the daemon), or an accept that failed (out of file descriptors).
  kListenQueue,
};
const char* ToString(ShedReason r);
// Whether shedding for `r` was the daemon's own capacity (not the caller's own quota).
inline bool IsOwnCapacity(ShedReason r) {
  return r == ShedReason::kConnectionCap || r == ShedReason::kEvicted || r == ShedReason::kBodyBudget ||
         r == ShedReason::kQueueFull || r == ShedReason::kListenQueue;
}

// The server's question about a request head, before its body is read (api/router.h Router::Admit).
struct HeadDecision {
  std::optional<HttpResponse> refuse;  // answer this and close instead of reading the body
  bool trusted = false;                // the head carried a valid credential (then `identity` is set)
  bool is_public = false;              // a public route (answerable on a probe-reserve connection)
  // Who the credential is (one key per token; never the token itself): its connection cap and body share.
  // Empty: anonymous; the client address stands in for it in the body budget.
  std::string identity;
  BodyClass body_class = BodyClass::kStandard;
  // This identity's connection cap; 0: HttpServerOptions::max_connections_per_identity.
  std::size_t max_connections = 0;
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
  // Open connections beyond this (after evicting untrusted idle ones, then an idle one of an identity over
  // its share) are answered 503 and closed. 40000: 16,896 node agents (two connections each: the long poll
  // and the heartbeat's keep-alive) with room for a burst of rank and operator requests.
  std::size_t max_connections = 40000;
  // Open connections from one client address (IP) without a credential beyond this: same treatment. As
  // high as max_connections by default: behind a NAT, a proxy or a load balancer every agent shares one
  // address, and each connection is anonymous until its first request head is read.
  std::size_t max_connections_per_address = 40000;
  // The kernel's listen queue of not yet accepted connections; 0: the system's maximum (somaxconn).
  int listen_backlog = 0;
  // Connections accepted beyond max_connections that may only call public routes (health probes).
  std::size_t probe_reserve = 16;
  // Open connections of one identity (trusted connections only; they leave the per-address count).
  std::size_t max_connections_per_identity = 64;
  // Bytes of request bodies being buffered at once over all connections ("Body budget" above).
  std::uint64_t body_budget = 256ull << 20;
  // Part of body_budget only BodyClass::kLiveness may use.
  std::uint64_t body_reserve_liveness = 64ull << 20;
  // Bytes one identity (anonymous: one address) may have reserved at once; raised to body_limit if lower.
  std::uint64_t body_share_per_identity = 16ull << 20;
  // The same for a BodyClass::kLow identity, and for all of them together.
  std::uint64_t body_share_low_role = 4ull << 20;
  std::uint64_t body_budget_low_roles = 32ull << 20;
  // Slowest average arrival of a body, after body_rate_grace; 0: no rate check (read_timeout still holds).
  std::uint64_t body_min_rate = 16 * 1024;
  std::chrono::milliseconds body_rate_grace = std::chrono::seconds(5);
  // Bodies of at most this many bytes are not rate-checked (read_timeout still holds): they hold little of
  // the budget, and their senders may stall between head and body (a Python rank's report thread waits for
  // the interpreter lock while another thread imports a C extension, seconds under load).
  std::uint64_t body_rate_min_bytes = 64 * 1024;
  // Called on the io thread for every request head once it is parsed. Optional; without it no connection
  // is evicted and there is no probe reserve (plain 503 beyond the caps).
  std::function<HeadDecision(const HttpRequest& head)> on_head;
  // Sent in the Server header.
  std::string server_name = "shepherd";
  // Called on the io thread with the status of every answer the server makes itself (400/401/403/404/
  // 405/413/429/431/503), with 0 for every idle connection evicted to make room, and with 408 for every
  // body cut off by its read deadline, e.g. to count them in metrics. Optional.
  std::function<void(int status)> on_rejected;
  // Called on the io thread for every connection or request turned away for a ShedReason. Optional.
  std::function<void(ShedReason reason)> on_shed;
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
