// The route table: which roles may call which route, and the ownership rules that bind agents to their
// node, ranks to their job and submitters to the jobs they submitted. Pure: no Beast, no controller. The
// router consults it for every request (before 404/405), and the HTTP session consults it on the request
// head, before reading a body (see docs/security.md for the table in prose).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth.h"

namespace shepherd {

enum class Ownership {
  kNone,
  kOwnNode,          // agent: {id} must be the principal's node
  kOwnJob,           // rank: {id} must be the principal's job
  kOwnJobSubmitter,  // submitter: {id} must be a job whose owner is the principal's name
};

struct RouteRule {
  std::string method;
  std::string pattern;      // as given to Router::Add
  bool is_public = false;   // no token needed (/healthz, /readyz, the dashboard's files)
  std::vector<Role> roles;  // who may call it (admin is listed explicitly where allowed)
  // Per role: the ownership check applied to that role (absent: none).
  std::map<Role, Ownership> ownership;
};

// Every route the API serves. tests/api/auth_matrix_test.cpp walks all of them.
const std::vector<RouteRule>& RouteTable();

// Whether a route declared for `route_method` serves a request's `method`: HEAD is served as GET (the
// session sends the headers only).
inline bool Serves(std::string_view route_method, std::string_view method) {
  return route_method == method || (method == "HEAD" && route_method == "GET");
}

// The rule for method + path; path params bound. nullptr when no route matches (404), `*path_known` set when
// the path matches another method (405).
const RouteRule* FindRouteRule(std::string_view method, std::string_view path,
                               std::map<std::string, std::string>* params, bool* path_known);

// Returns the owner (submitter name) of a job, nullopt when the job does not exist.
using JobOwnerLookup = std::function<std::optional<std::string>(const std::string& job)>;

enum class Access { kAllowed, kForbidden };
// Whether `p` may call `rule` with `params`. REQUIRES: rule is not public.
Access Authorize(const Principal& p, const RouteRule& rule, const std::map<std::string, std::string>& params,
                 const JobOwnerLookup& owner_of);

// Percent-decodes a path segment or query component ('+' is a space). The router and the ownership rules
// both use it, so ownership compares exactly what handlers see.
std::string PercentDecode(std::string_view s);

}  // namespace shepherd
