// EndpointListClient: an HttpClient over several daemon replicas that follows leadership. It owns one
// single-URL HttpClient per endpoint it talks to (the configured ones, plus a leader learned from a
// redirect), created lazily.
//
// Rules for one Request() (all within the request's `timeout`, counted from the call):
//   - It goes first to the endpoint that last answered (at the start: the first one listed).
//   - On a transport failure (refused, reset, timed out) or a 503 (a replica that knows no leader, or one
//     that is shutting down), it tries the next configured endpoint, in list order, wrapping around; each
//     endpoint at most once per request.
//   - A 307 or 308 is followed, for any method and with the body and headers resent, to its Location when
//     that is an absolute http:// URL; at most kMaxRedirects hops per request. A further redirect ends the
//     request with kUnavailable naming the chain (a redirect loop); a Location that is not an absolute
//     http URL counts as that endpoint's failure. When the Location ends with the request's target, its
//     front part is the leader's base URL: later requests go there first (it is remembered even when it
//     is not in the configured list).
//   - Any other answer (2xx, 4xx, 5xx other than 503) is returned as is and makes its endpoint current.
//   - When every endpoint answered 503, the last 503 is returned (with its Retry-After); when none
//     answered, kUnavailable naming each endpoint and its error. The next request starts at the endpoint
//     after the one that was current, so a stalled endpoint costs at most one request's budget in a row.
// A stalled endpoint (accepts but never answers) takes the whole remaining budget of that request.
//
// Threading: as HttpClient. Request() must not be called concurrently on one client; Cancel() from any
// thread aborts the request in flight (on whichever endpoint) and every later one.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "net/http_client.h"

namespace shepherd::net {

inline constexpr int kMaxRedirects = 2;
inline constexpr std::size_t kMaxEndpoints = 32;

// Parses "URL[,URL...]" (spaces around commas allowed): each an http://host[:port][/prefix] URL (a
// trailing '/' dropped), none repeated, at most kMaxEndpoints. kInvalidArgument naming the bad entry.
Result<std::vector<std::string>> ParseEndpointList(std::string_view list);
// The list as ParseEndpointList reads it: "url1,url2,...".
std::string JoinEndpoints(const std::vector<std::string>& urls);

class EndpointListClient final : public HttpClient {
 public:
  // `options.base_url` is a list as ParseEndpointList takes it (one URL is a list of one); the other
  // options apply to every endpoint. kInvalidArgument for a bad list.
  static Result<std::unique_ptr<EndpointListClient>> Create(const HttpClientOptions& options);
  ~EndpointListClient() override;

  using HttpClient::Request;
  Result<HttpResult> Request(std::string_view method, std::string_view target, std::string_view body,
                             std::chrono::milliseconds timeout, const HttpHeaders& headers) override;
  void Cancel() override;

  // The base URL requests go to first (the one that last answered). Caller's thread only.
  const std::string& current() const { return current_; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  EndpointListClient(HttpClientOptions options, std::vector<std::string> endpoints);
  // The client for `base_url`, made on first use; nullptr when the URL is refused (with *error set).
  HttpClient* ClientFor(const std::string& base_url, std::string* error);
  // Follows one endpoint's answer through redirects; returns the final answer or a transport error.
  // `answered_by` is set to the base URL that gave the final answer ("" when it cannot be remembered);
  // `loop` to true when the redirect limit ended the chain (the request ends there). Appends every base
  // URL it sent the request to to `visited`.
  Result<HttpResult> Chain(const std::string& first, std::string_view method, std::string_view target,
                           std::string_view body, std::chrono::steady_clock::time_point deadline,
                           const HttpHeaders& headers, int* hops, bool* loop, std::string* answered_by,
                           std::vector<std::string>* visited);

  HttpClientOptions options_;
  std::vector<std::string> endpoints_;  // configured, in order
  std::string current_;                 // caller's thread only

  std::mutex mu_;  // guards clients_ (Cancel reads it from any thread)
  std::vector<std::pair<std::string, std::unique_ptr<HttpClient>>> clients_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace shepherd::net
