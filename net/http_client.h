// HttpClient: a small synchronous HTTP/1.1 client: the agent's calls to the daemon, webhooks, and the etcd
// store's calls to etcd's v3 gateway. Beast stays out of this header; net/http_client.cpp is its only Beast
// translation unit.
//
// Threading: Request() must not be called concurrently on one client (use one client per thread).
// Cancel() may be called from any thread: it aborts a Request() in flight and makes every later Request()
// fail at once with kUnavailable (a cancelled client is finished; it exists for shutdown).
//
// Errors are values: a connection refused, a timeout, a reset or a malformed answer is a non-ok Status
// (kUnavailable); an HTTP error status is NOT an error here: the caller reads HttpResult::status.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace shepherd::net {

struct HttpResult {
  int status = 0;
  std::string body;
  // The Retry-After header in seconds (delta-seconds form only), when the answer carried one (429, 503).
  std::optional<double> retry_after_s;
  // The Location header as sent (redirects: 307/308), or empty.
  std::string location;
};

// How long to hold off the next call after `r`: its Retry-After times a jitter factor in [1, 1.5), so
// agents told the same delay do not all come back at once (`unit` is a uniform draw in [0, 1)); nullopt
// when `r` carried no Retry-After. Capped at 60 s.
std::optional<std::chrono::milliseconds> RetryDelay(const HttpResult& r, double unit);

// The whole file, trailing whitespace dropped; refused when group or others may read it, or empty.
Result<std::string> ReadTokenFile(const std::string& path);

struct HttpClientOptions {
  std::string base_url;  // "http://host:port" (an optional trailing path prefix is kept); http only
  std::string token;     // sent as "Authorization: Bearer <token>" when non-empty
  // Where `token` came from (--token-file), or empty. On a 401 the file is read again, and a token that
  // changed (rotated: the tokens file, then the agent's file) is used at once, for this and later calls.
  std::string token_file;
  bool keep_alive = true;  // reuse the connection when the server allows it
  std::size_t body_limit = 64 * 1024 * 1024;
};

// Extra request headers, (name, value).
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

class HttpClient {
 public:
  // kInvalidArgument when base_url is not http://host[:port][/prefix].
  static Result<std::unique_ptr<HttpClient>> Create(const HttpClientOptions& options);
  virtual ~HttpClient() = default;

  // Sends `method` `target` (path and query, appended to the base URL's prefix) with a JSON body when
  // `body` is non-empty, and waits for the whole answer at most `timeout` (connect included). A reused
  // keep-alive connection that turns out closed is retried once on a new connection.
  // `headers` are sent as given (after the client's own).
  virtual Result<HttpResult> Request(std::string_view method, std::string_view target, std::string_view body,
                                     std::chrono::milliseconds timeout, const HttpHeaders& headers) = 0;
  Result<HttpResult> Request(std::string_view method, std::string_view target, std::string_view body,
                             std::chrono::milliseconds timeout) {
    return Request(method, target, body, timeout, {});
  }

  // Thread-safe; see above.
  virtual void Cancel() = 0;
};

// Percent-encodes a path segment (unreserved characters kept).
std::string EscapePathSegment(std::string_view s);

}  // namespace shepherd::net
