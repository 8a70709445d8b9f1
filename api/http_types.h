// Transport-neutral HTTP request/response. The Beast server (api/http_server.h) converts to and from these,
// so the router and handlers never see a socket and are tested with plain values.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/auth.h"
#include "core/json.h"

namespace shepherd {

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // path plus optional "?query"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The body parsed as JSON before the request was queued (api/front_door.h); null when it was not (no
  // body, another media type, or a request that did not come through a FrontDoor). Shared, never copied.
  std::shared_ptr<const Json> json;
  // What the route's prepare step (api/router.h) made of `json` off the control thread, as the typed value
  // its handler reads; null when no prepare step ran (a route without one, or a request not through a
  // FrontDoor).
  std::shared_ptr<const void> prepared;
  std::string request_id;  // assigned by the server (or taken from X-Request-Id); in every log line
  // Set by the router once the request is authenticated and authorized (route table): who is calling.
  // Handlers use it for checks the table cannot make from the path alone (an agent registering its own
  // node id; the submitter recorded as a job's owner).
  std::optional<Principal> principal;

  // Case-insensitive header lookup; empty when absent.
  std::string Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, Location, ...)
  std::string body;
  bool close = false;  // send Connection: close and close after writing
};

// Called exactly once per request. Thread-safe: may be called from any thread.
using Respond = std::function<void(HttpResponse)>;
// Runs on the server's io thread; must not block; may call `respond` later, from any thread.
using HttpHandler = std::function<void(HttpRequest, Respond)>;

}  // namespace shepherd
