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
//   chunked trailer) larger than header_limit, 503 more than max_connections connections.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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
  // Open connections beyond this are answered 503 and closed.
  std::size_t max_connections = 10000;
  // Sent in the Server header.
  std::string server_name = "shepherd";
  // Called on the io thread with the status of every answer the server makes itself (400/413/431/503),
  // e.g. to count them in metrics. Optional.
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
