#include "api/router.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <memory>

#include "api/problem.h"
#include "api/route_table.h"

namespace shepherd {
namespace {

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::string PathOf(std::string_view target) {
  return std::string(target.substr(0, target.find('?')));
}

QueryParams ParseQuery(std::string_view target) {
  QueryParams out;
  size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    size_t eq = kv.find('=');
    if (!kv.empty())
      out[PercentDecode(kv.substr(0, eq))] =
          eq == std::string_view::npos ? "" : PercentDecode(kv.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return out;
}

void Router::Add(const std::string& method, const std::string& pattern, RouteHandler handler,
                 RoutePrepare prepare, RoutePrepare prepare_text) {
  Route r{method, pattern, {}, std::move(handler), std::move(prepare), std::move(prepare_text)};
  for (auto s : Split(pattern)) r.segments.emplace_back(s);
  routes_.push_back(std::move(r));
}

bool Router::Match(const Route& r, const std::vector<std::string_view>& path, PathParams* params) const {
  if (r.segments.size() != path.size()) return false;
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& seg = r.segments[i];
    if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
      if (path[i].empty()) return false;
      (*params)[seg.substr(1, seg.size() - 2)] = PercentDecode(path[i]);
    } else if (seg != path[i]) {
      return false;
    }
  }
  return true;
}

std::optional<HttpResponse> Router::Admit(const HttpRequest& head, std::optional<Principal>* principal,
                                          bool defer_ownership) const {
  std::map<std::string, std::string> params;
  bool path_known = false;
  const RouteRule* rule = FindRouteRule(head.method, PathOf(head.target), &params, &path_known);
  if (rule && rule->is_public) return std::nullopt;
  // Two credentials in one request: which one speaks is not for the server to guess.
  if (std::count_if(head.headers.begin(), head.headers.end(), [](const auto& h) {
        return h.first.size() == 13 && strncasecmp(h.first.c_str(), "Authorization", 13) == 0;
      }) > 1)
    return Problem(400, "more than one Authorization header");
  AuthResult a;
  if (auth_) {
    a = auth_->Authenticate(head.Header("Authorization"));
  } else {
    a.outcome = AuthOutcome::kDisabled;
    a.principal = Principal{Role::kAdmin, "anonymous", {}, {}, {}};
  }
  if (a.outcome == AuthOutcome::kMissing) {
    HttpResponse r = Problem(401, "missing bearer token");
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  if (a.outcome == AuthOutcome::kInvalid) {
    HttpResponse r = Problem(401, "the bearer token is not accepted");
    r.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
    return r;
  }
  *principal = a.principal;
  if (!rule) return std::nullopt;  // Handle answers 404/405 (the caller is authenticated)
  if (a.outcome == AuthOutcome::kDisabled) return std::nullopt;
  JobOwnerLookup own_job = [name = a.principal->name](const std::string&) { return std::optional(name); };
  if (Authorize(*a.principal, *rule, params, defer_ownership ? own_job : owner_of_) == Access::kAllowed)
    return std::nullopt;
  const Principal& p = *a.principal;
  const std::string what = head.method + " " + PathOf(head.target);
  // The role may call the route, on what is its own only: say whose it is.
  if (std::find(rule->roles.begin(), rule->roles.end(), p.role) != rule->roles.end()) {
    const std::string id = params.count("id") ? params.at("id") : "?";
    if (p.role == Role::kAgent)
      return Problem(403, "this credential speaks for node " + p.node.value_or("?") + " only, not " + id);
    if (p.role == Role::kRank)
      return Problem(403, "this credential reports for job " + p.job.value_or("?") + " only, not " + id);
    return Problem(403, "job " + id + " is not " + p.name + "'s: a " + ToString(p.role) + " may " + what +
                            " for its own jobs only");
  }
  return Problem(403, std::string("role ") + ToString(p.role) + " may not " + what);
}

std::optional<HttpResponse> Router::Prepare(HttpRequest& request) const {
  const std::vector<std::string_view> path =
      Split(std::string_view(request.target).substr(0, request.target.find('?')));
  for (const Route& r : routes_) {
    PathParams unused;
    if (Serves(r.method, request.method) && Match(r, path, &unused))
      return r.prepare ? r.prepare(request) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<HttpResponse> Router::PrepareText(HttpRequest& request) const {
  const std::vector<std::string_view> path =
      Split(std::string_view(request.target).substr(0, request.target.find('?')));
  for (const Route& r : routes_) {
    PathParams unused;
    if (Serves(r.method, request.method) && Match(r, path, &unused))
      return r.prepare_text ? r.prepare_text(request) : std::nullopt;
  }
  return std::nullopt;
}

void Router::Handle(HttpRequest request, Respond respond) const {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string_view> path =
      Split(std::string_view(request.target).substr(0, request.target.find('?')));
  const Route* found = nullptr;
  PathParams params;
  std::string allow;
  for (const Route& r : routes_) {
    PathParams p;
    if (!Match(r, path, &p)) continue;
    if (Serves(r.method, request.method)) {
      found = &r;
      params = std::move(p);
      break;
    }
    allow += (allow.empty() ? "" : ", ") + r.method;
    if (r.method == "GET") allow += ", HEAD";  // served wherever GET is (Serves)
  }
  std::string route = found ? found->pattern : allow.empty() ? "unmatched" : "method_not_allowed";
  // A static credential (tokens file) is checked again when the answer leaves: one withdrawn by SIGHUP
  // while its request was held (an agent's long poll) must not receive what the answer carries (rank
  // credentials). Rank credentials are not: a report that ends its job revokes them, and is answered.
  auto recheck = std::make_shared<std::string>();
  // People's changes (not agents', ranks' or reads) are logged at info with who sent them: the log is the
  // record of who cordoned, deleted, cancelled or restarted what.
  auto actor = std::make_shared<std::string>();
  auto finish = [metrics = metrics_, auth = auth_, recheck, actor, route, method = request.method,
                 target = request.target, id = request.request_id, start,
                 respond = std::move(respond)](HttpResponse res) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!recheck->empty() && res.status < 400 && auth->Authenticate(*recheck).outcome != AuthOutcome::kOk) {
      res = Problem(401, "the credential was withdrawn while the request waited");
      res.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
    }
    metrics->ObserveRequest(route, method, res.status, secs);
    // Successes at debug: at a fleet's report rate an info line per request is gigabytes a day.
    if (!actor->empty() && res.status < 500)
      spdlog::info("[{}] {} {} by {} -> {} ({:.3f} ms)", id, method, target, *actor, res.status, secs * 1e3);
    else
      spdlog::log(res.status >= 500   ? spdlog::level::warn
                  : res.status >= 400 ? spdlog::level::info
                                      : spdlog::level::debug,
                  "[{}] {} {} -> {} ({:.3f} ms)", id, method, target, res.status, secs * 1e3);
    respond(std::move(res));
  };
  std::optional<Principal> principal;
  if (auto refused = Admit(request, &principal)) return finish(std::move(*refused));
  request.principal = std::move(principal);
  if (auth_ && auth_->enabled() && request.method != "GET" && request.method != "HEAD" && request.principal &&
      (request.principal->role == Role::kAdmin || request.principal->role == Role::kOperator ||
       request.principal->role == Role::kSubmitter))
    *actor = Describe(request.principal);
  if (auth_ && auth_->enabled() && request.principal && request.principal->role != Role::kRank)
    *recheck = request.Header("Authorization");
  if (found && auth_ && auth_->enabled()) {
    // Fail closed: a route the table does not list is for nobody (auth_matrix_test keeps them in step).
    std::map<std::string, std::string> p;
    bool known = false;
    const RouteRule* rule = FindRouteRule(request.method, PathOf(request.target), &p, &known);
    if (!rule || rule->pattern != found->pattern)
      return finish(Problem(403, "route " + found->pattern + " is not in the route table"));
  }
  if (!found) {
    if (allow.empty()) return finish(Problem(404, "no route for " + PathOf(request.target)));
    HttpResponse res = Problem(405, request.method + " is not allowed on " + PathOf(request.target));
    res.headers.emplace_back("Allow", allow);
    return finish(std::move(res));
  }
  found->handler(request, params, std::move(finish));
}

}  // namespace shepherd
