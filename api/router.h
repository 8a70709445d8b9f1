// A function from request to response, dispatching from the route table (api/route_table.h). Authenticates
// and authorizes every request against its route's entry BEFORE anything else, so an unauthenticated client
// learns nothing, not even 404/405; then answers 404 for unknown paths and 405 (with Allow) for known paths
// with another method, or runs the route's named handler with the ApiContext bound here; records metrics
// and an access log line with the request id. No sockets: tests call Handle() with plain values.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/http_types.h"
#include "api/metrics.h"
#include "api/route_table.h"

namespace shepherd {

using QueryParams = std::map<std::string, std::string>;
// A stand-in for a route's handler or prepare step, for tests of the router or the FrontDoor alone (Replace).
using RouteHandler = std::function<void(const HttpRequest&, const PathParams&, Respond)>;
// A prepare or text step as a stand-in (RouteRule::prepare, RouteRule::prepare_text).
using RoutePrepare = std::function<std::optional<HttpResponse>(HttpRequest&)>;

// Splits "a=1&b=x%20y" into decoded pairs (last one wins).
QueryParams ParseQuery(std::string_view target);
std::string PathOf(std::string_view target);

class Router {
 public:
  explicit Router(Metrics* metrics) : metrics_(metrics) {}

  // Hands `context` to every route's handler and prepare step from now on (RegisterRoutes, api/handlers.h).
  // Before, a route answers 404: nothing serves it.
  void Bind(std::shared_ptr<const ApiContext> context) { context_ = std::move(context); }

  // For tests of the router or the FrontDoor alone: the table's route `method pattern` runs `handler` (and
  // `prepare`) instead of its named function; auth, 404/405 and metrics are the table's as ever. Throws
  // std::logic_error when the table has no such route.
  void Replace(const std::string& method, const std::string& pattern, RouteHandler handler,
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
  // parsing the body, before queueing): nullopt to go on, or the refusal to answer. Thread-safe: the table
  // is fixed, and Bind and Replace are done before requests arrive.
  std::optional<HttpResponse> Prepare(HttpRequest& request) const;
  // The same for the route's text step, which the FrontDoor runs before parsing the body (the body is then
  // not parsed when it set `prepared`).
  std::optional<HttpResponse> PrepareText(HttpRequest& request) const;
  // The same two for a route already found (`rule`: the request's entry of RouteTable(), or nullptr), so
  // a caller that matched the path once does not match it again per step.
  std::optional<HttpResponse> Prepare(const RouteRule* rule, HttpRequest& request) const;
  std::optional<HttpResponse> PrepareText(const RouteRule* rule, HttpRequest& request) const;

 private:
  struct StandIn {
    RouteHandler handler;
    RoutePrepare prepare;
    RoutePrepare prepare_text;
  };
  // Admit for the route `rule` (nullptr: none matches) the head's path gave, with its `params`.
  std::optional<HttpResponse> AdmitTo(const HttpRequest& head, const RouteRule* rule,
                                      const PathParams& params, std::optional<Principal>* principal,
                                      bool defer_ownership) const;

  Metrics* metrics_;
  std::shared_ptr<const ApiContext> context_;
  std::map<const RouteRule*, StandIn> stand_ins_;  // by entry of RouteTable() (Replace)
  const Authenticator* auth_ = nullptr;
  JobOwnerLookup owner_of_;
};

}  // namespace shepherd
