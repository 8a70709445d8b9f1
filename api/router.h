// A function from request to response. Authenticates and authorizes every request against the route table
// (api/route_table.h) BEFORE anything else, so an unauthenticated client learns nothing, not even 404/405;
// then matches "METHOD /path/{param}" routes, answers 404 for unknown paths and 405 (with Allow) for known
// paths with another method, records metrics and an access log line with the request id. No sockets: tests
// call Handle() with plain values.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "api/http_types.h"
#include "api/metrics.h"
#include "api/route_table.h"

namespace shepherd {

using PathParams = std::map<std::string, std::string>;
using QueryParams = std::map<std::string, std::string>;
using RouteHandler = std::function<void(const HttpRequest&, const PathParams&, Respond)>;
// Turns a request's parsed body into the typed value its handler uses (HttpRequest::prepared), or refuses
// it: the costly conversion of a large body then runs where the body was parsed, not on the control thread.
// Must be pure (no state but the request): it runs on the I/O or parser thread. A route may also have a
// text step (`prepare_text`), run before the body is parsed (HttpRequest::json null): it may read the text
// itself and set `prepared`, or refuse; if it does neither, the body is parsed and `prepare` runs as usual.
using RoutePrepare = std::function<std::optional<HttpResponse>(HttpRequest&)>;

// Splits "a=1&b=x%20y" into decoded pairs (last one wins).
QueryParams ParseQuery(std::string_view target);
std::string PathOf(std::string_view target);

class Router {
 public:
  explicit Router(Metrics* metrics) : metrics_(metrics) {}

  // `pattern` segments in braces bind path parameters: "/v1/jobs/{id}/cancel".
  // `prepare`, when given, runs before the request is queued (Prepare); `prepare_text` before the body is
  // parsed (PrepareText).
  void Add(const std::string& method, const std::string& pattern, RouteHandler handler,
           RoutePrepare prepare = nullptr, RoutePrepare prepare_text = nullptr);

  // Auth: `auth` must outlive the router (nullptr: every request is an anonymous admin, for tests of
  // routing alone). `owner_of` answers the owner of a job for the submitter's own-job rule.
  void SetAuth(const Authenticator* auth, JobOwnerLookup owner_of) {
    auth_ = auth;
    owner_of_ = std::move(owner_of);
  }

  // The auth decision for a request head (method, target, headers; the body is not looked at): a 401/403/
  // 404/405 to send, or nullopt with `*principal` set (left unset for public routes). The HTTP session
  // calls it before reading a body; Handle calls it again for every request.
  // `defer_ownership`: skip the submitter's own-job rule (it reads control-thread state); the I/O thread
  // sets it on heads, and Handle applies the rule in full.
  // Thread-safe when `defer_ownership` is set.
  std::optional<HttpResponse> Admit(const HttpRequest& head, std::optional<Principal>* principal,
                                    bool defer_ownership = false) const;

  // Runs on the control thread, or on the reader thread for read routes (api/front_door.h). `respond` is
  // called once, possibly later (a write's answer comes after its COMMIT); metrics are recorded then.
  void Handle(HttpRequest request, Respond respond) const;

  // Runs the prepare step of the route `request` goes to, if it has one (the FrontDoor calls it after
  // parsing the body, before queueing): nullopt to go on, or the refusal to answer. Thread-safe: routes are
  // fixed once registered.
  std::optional<HttpResponse> Prepare(HttpRequest& request) const;
  // The same for the route's text step, which the FrontDoor runs before parsing the body (the body is then
  // not parsed when it set `prepared`).
  std::optional<HttpResponse> PrepareText(HttpRequest& request) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    RouteHandler handler;
    RoutePrepare prepare;
    RoutePrepare prepare_text;
  };
  bool Match(const Route& r, const std::vector<std::string_view>& path, PathParams* params) const;

  Metrics* metrics_;
  std::vector<Route> routes_;
  const Authenticator* auth_ = nullptr;
  JobOwnerLookup owner_of_;
};

}  // namespace shepherd
