// The route table: every route the API serves, declared once (api/route_table.cpp). One entry per route
// holds its method and path pattern, who may call it (public, roles, and the ownership rules that bind
// agents to their node, ranks to their job and submitters to the jobs they submitted), the named handler
// function that answers it, the queue it runs from (which thread), whose rate limits it, and the one-line
// summary docs/api.md's route list is generated from (`shepherdd routes`, scripts/api_routes_table.py).
//
// Everything that asks "which route is this request?" asks FindRouteRule: the router's dispatch and its
// 404/405 (api/router.h), authorization at the request head on the I/O thread and again on the thread that
// runs the route, the FrontDoor's queue choice and probes (api/front_door.h), the per-sender rate limits
// (daemon/overload.h). There is no other list of paths and no other path matcher.
//
// Threading: the table is built once (on first use) and immutable after; every function here is pure and
// thread-safe. Handlers run where `queue` says (api/front_door.h); the table only names them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth.h"
#include "api/http_types.h"
#include "api/request_queue.h"

namespace shepherd {

// What the handlers share (the controller, options, clock, metrics): api/handlers.h.
struct ApiContext;

using PathParams = std::map<std::string, std::string>;
// A route's handler: answers `respond` once, possibly later (a write's answer comes after its COMMIT).
using RouteFn = void (*)(const ApiContext&, const HttpRequest&, const PathParams&, Respond);
// A route's prepare step: turns a parsed body into the typed value its handler uses (HttpRequest::prepared),
// or refuses it, where the body was parsed (the I/O or parser thread), not on the control thread. Must be
// pure (no state but the request and the context's clock).
using RoutePrepareFn = std::optional<HttpResponse> (*)(const ApiContext&, HttpRequest&);

enum class Ownership {
  kNone,
  kOwnNode,          // agent: {id} must be the principal's node
  kOwnJob,           // rank: {id} must be the principal's job
  kOwnJobSubmitter,  // submitter: {id} must be a job whose owner is the principal's name
};
const char* ToString(Ownership o);

// A route the FrontDoor answers itself on the I/O thread, from the readiness flag, never queued (so probes
// answer whatever the control thread is doing). The router answers it too for callers without a FrontDoor.
enum class Probe { kNone, kLive, kReady };

// Whose rate a route's requests are limited by, judged at the request head (daemon/overload.h).
enum class RateKey {
  kNone,
  kNode,  // the node in {id}: an agent's heartbeats
  kRank,  // the rank a per-rank credential names: a rank's reports
};

struct RouteRule {
  std::string method;
  std::string pattern;      // segments in braces bind path parameters: "/v1/jobs/{id}/cancel"
  bool is_public = false;   // no token needed (/healthz, /readyz, the dashboard's files)
  std::vector<Role> roles;  // who may call it (admin is listed explicitly where allowed)
  // Per role: the ownership check applied to that role (absent: none).
  std::map<Role, Ownership> ownership;
  RouteFn handler = nullptr;
  RoutePrepareFn prepare = nullptr;  // runs before the request is queued (FrontDoor), when given
  // Runs before the body is parsed into a tree (HttpRequest::json null), when given: it may read the text
  // itself and set `prepared`, or refuse; if it does neither, the body is parsed and `prepare` runs.
  RoutePrepareFn prepare_text = nullptr;
  // Where it runs: kPriority and kWrite on the control thread, kRead on the reader thread holding the
  // ControlLock shared (api/request_queue.h, api/front_door.h).
  RequestClass queue = RequestClass::kWrite;
  Probe probe = Probe::kNone;
  RateKey rate_key = RateKey::kNone;
  std::string summary;  // one line for docs/api.md's route list
  // Further per-route attributes (e.g. whether a follower may serve the route) belong here, next to the
  // route they describe.
};

// Every route the API serves. tests/api/auth_matrix_test.cpp walks all of them.
const std::vector<RouteRule>& RouteTable();

// Whether a route declared for `route_method` serves a request's `method`: HEAD is served as GET (the
// session sends the headers only).
inline bool Serves(std::string_view route_method, std::string_view method) {
  return route_method == method || (method == "HEAD" && route_method == "GET");
}

// The route for method + path (a query, if any, is ignored); path params bound, percent-decoded. nullptr when
// no route matches (404), `*path_known` set when the path matches another method (405) and `*allow` (when
// given) listing the methods that path serves ("GET, HEAD, POST").
const RouteRule* FindRouteRule(std::string_view method, std::string_view path, PathParams* params,
                               bool* path_known, std::string* allow = nullptr);

// The queue a request runs from: its route's `queue`; a request that matches no route (answered 404/405)
// goes with the reads when it is a GET or HEAD, with the writes otherwise.
RequestClass QueueOf(const RouteRule* route, std::string_view method);

// The same for a request's method and path (a query, if any, is ignored): reports and heartbeats are
// kPriority; GET and HEAD (except agents' long polls, which are kWrite so a read storm cannot delay
// assignments) are kRead.
RequestClass ClassOf(std::string_view method, std::string_view path);

// Returns the owner (submitter name) of a job, nullopt when the job does not exist.
using JobOwnerLookup = std::function<std::optional<std::string>(const std::string& job)>;

enum class Access { kAllowed, kForbidden };
// Whether `p` may call `rule` with `params`. REQUIRES: rule is not public.
Access Authorize(const Principal& p, const RouteRule& rule, const PathParams& params,
                 const JobOwnerLookup& owner_of);

// Percent-decodes a path segment or query component ('+' is a space). The router and the ownership rules
// both use it, so ownership compares exactly what handlers see.
std::string PercentDecode(std::string_view s);

// The table as JSON, for `shepherdd routes` and the docs: [{method, path, public, roles, ownership, queue,
// probe, summary}], in table order.
Json RouteTableJson();

}  // namespace shepherd
