#include "api/router.h"

#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "api/problem.h"
#include "api/route_table.h"

namespace shepherd {
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

void Router::Replace(const std::string& method, const std::string& pattern, RouteHandler handler,
                     RoutePrepare prepare, RoutePrepare prepare_text) {
  for (const RouteRule& r : RouteTable()) {
    if (r.method != method || r.pattern != pattern) continue;
    stand_ins_[&r] = {std::move(handler), std::move(prepare), std::move(prepare_text)};
    return;
  }
  throw std::logic_error("the route table has no route " + method + " " + pattern);
}

std::optional<HttpResponse> Router::Admit(const HttpRequest& head, std::optional<Principal>* principal,
                                          bool defer_ownership) const {
  PathParams params;
  bool path_known = false;
  const RouteRule* rule = FindRouteRule(head.method, head.target, &params, &path_known);
  return AdmitTo(head, rule, params, principal, defer_ownership);
}

std::optional<HttpResponse> Router::AdmitTo(const HttpRequest& head, const RouteRule* rule,
                                            const PathParams& params, std::optional<Principal>* principal,
                                            bool defer_ownership) const {
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

namespace {
const RouteRule* RuleOf(const HttpRequest& request) {
  PathParams unused;
  bool known = false;
  return FindRouteRule(request.method, request.target, &unused, &known);
}
}  // namespace

std::optional<HttpResponse> Router::Prepare(HttpRequest& request) const { return Prepare(RuleOf(request), request); }

std::optional<HttpResponse> Router::PrepareText(HttpRequest& request) const {
  return PrepareText(RuleOf(request), request);
}

std::optional<HttpResponse> Router::Prepare(const RouteRule* rule, HttpRequest& request) const {
  if (!rule) return std::nullopt;
  if (auto it = stand_ins_.find(rule); it != stand_ins_.end())
    return it->second.prepare ? it->second.prepare(request) : std::nullopt;
  return rule->prepare && context_ ? rule->prepare(*context_, request) : std::nullopt;
}

std::optional<HttpResponse> Router::PrepareText(const RouteRule* rule, HttpRequest& request) const {
  if (!rule) return std::nullopt;
  if (auto it = stand_ins_.find(rule); it != stand_ins_.end())
    return it->second.prepare_text ? it->second.prepare_text(request) : std::nullopt;
  return rule->prepare_text && context_ ? rule->prepare_text(*context_, request) : std::nullopt;
}

void Router::Handle(HttpRequest request, Respond respond) const {
  auto start = std::chrono::steady_clock::now();
  PathParams params;
  bool known = false;
  std::string allow;
  const RouteRule* found = FindRouteRule(request.method, request.target, &params, &known, &allow);
  std::string route = found ? found->pattern : known ? "method_not_allowed" : "unmatched";
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
  if (auto refused = AdmitTo(request, found, params, &principal, false)) return finish(std::move(*refused));
  request.principal = std::move(principal);
  if (auth_ && auth_->enabled() && request.method != "GET" && request.method != "HEAD" && request.principal &&
      (request.principal->role == Role::kAdmin || request.principal->role == Role::kOperator ||
       request.principal->role == Role::kSubmitter))
    *actor = Describe(request.principal);
  if (auth_ && auth_->enabled() && request.principal && request.principal->role != Role::kRank)
    *recheck = request.Header("Authorization");
  if (!found) {
    if (allow.empty()) return finish(Problem(404, "no route for " + PathOf(request.target)));
    HttpResponse res = Problem(405, request.method + " is not allowed on " + PathOf(request.target));
    res.headers.emplace_back("Allow", allow);
    return finish(std::move(res));
  }
  if (auto it = stand_ins_.find(found); it != stand_ins_.end())
    return it->second.handler(request, params, std::move(finish));
  if (!context_ || !found->handler) return finish(Problem(404, "no handler serves " + found->pattern));
  found->handler(*context_, request, params, std::move(finish));
}

}  // namespace shepherd
