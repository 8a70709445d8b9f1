#include "api/route_table.h"

#include <algorithm>

namespace shepherd {
namespace {

constexpr Role A = Role::kAdmin, O = Role::kOperator, S = Role::kSubmitter, V = Role::kViewer,
               G = Role::kAgent, R = Role::kRank;

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

bool Match(std::string_view pattern, const std::vector<std::string_view>& path,
           std::map<std::string, std::string>* params) {
  auto segs = Split(pattern);
  if (segs.size() != path.size()) return false;
  std::map<std::string, std::string> p;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (segs[i].size() > 2 && segs[i].front() == '{' && segs[i].back() == '}') {
      if (path[i].empty()) return false;
      p[std::string(segs[i].substr(1, segs[i].size() - 2))] = PercentDecode(path[i]);
    } else if (segs[i] != path[i]) {
      return false;
    }
  }
  *params = std::move(p);
  return true;
}

}  // namespace

const std::vector<RouteRule>& RouteTable() {
  static const std::vector<RouteRule> table = {
      {"GET", "/healthz", true, {}, {}},
      {"GET", "/readyz", true, {}, {}},
      // The dashboard's static files carry no data: the page asks for a token and calls the API with it.
      {"GET", "/ui", true, {}, {}},
      {"GET", "/ui/{file}", true, {}, {}},
      {"GET", "/metrics", false, {A, O, S, V}, {}},
      // Nodes. Registration carries the node id in the body: the handler checks an agent's id against it.
      {"POST", "/v1/nodes", false, {A, G}, {}},
      {"GET", "/v1/nodes", false, {A, O, S, V}, {}},
      {"GET", "/v1/nodes/{id}", false, {A, O, S, V, G}, {{G, Ownership::kOwnNode}}},
      {"PATCH", "/v1/nodes/{id}", false, {A, O}, {}},
      {"DELETE", "/v1/nodes/{id}", false, {A}, {}},
      {"POST", "/v1/nodes/{id}/unknown-processes/stop", false, {A, O}, {}},
      {"POST", "/v1/nodes/{id}/heartbeat", false, {A, G}, {{G, Ownership::kOwnNode}}},
      // Assignments carry the ranks' credentials: only the node's own agent reads them, not even admin.
      {"GET", "/v1/nodes/{id}/assignments", false, {G}, {{G, Ownership::kOwnNode}}},
      // Planning and jobs.
      {"POST", "/v1/plan", false, {A, O, S, V}, {}},
      {"POST", "/v1/jobs", false, {A, S}, {}},
      {"GET", "/v1/jobs", false, {A, O, S, V}, {}},
      {"GET", "/v1/jobs/{id}", false, {A, O, S, V}, {}},
      {"POST", "/v1/jobs/{id}/cancel", false, {A, O, S}, {{S, Ownership::kOwnJobSubmitter}}},
      {"POST", "/v1/jobs/{id}/restart", false, {A, O, S}, {{S, Ownership::kOwnJobSubmitter}}},
      {"GET", "/v1/jobs/{id}/placement", false, {A, O, S, V}, {}},
      // Reports and health.
      {"POST", "/v1/jobs/{id}/reports", false, {A, R}, {{R, Ownership::kOwnJob}}},
      // Reports of a user's srun job, bound by its SLURM_JOB_ID. Ownership needs the id resolved to a job,
      // so the handler applies it: a rank only for its own job (never creates one), a submitter for its
      // own jobs (and creates the job when none has the id).
      {"POST", "/v1/external/slurm/{slurm_job_id}/reports", false, {A, S, R}, {}},
      {"GET", "/v1/jobs/{id}/health", false, {A, O, S, V}, {}},
      {"GET", "/v1/jobs/{id}/steps", false, {A, O, S, V}, {}},
      {"GET", "/v1/jobs/{id}/checkpoints", false, {A, O, S, V}, {}},
      {"GET", "/v1/jobs/{id}/failures", false, {A, O, S, V}, {}},
      {"GET", "/v1/failures", false, {A, O, S, V}, {}},
      // Goodput: where every GPU-hour went (docs/goodput.md).
      {"GET", "/v1/jobs/{id}/goodput", false, {A, O, S, V}, {}},
      {"GET", "/v1/goodput", false, {A, O, S, V}, {}},
      // Events of every job and node (docs/events.md).
      {"GET", "/v1/events", false, {A, O, S, V}, {}},
      // Who the token speaks for: the dashboard shows write buttons only to roles that may use them.
      {"GET", "/v1/whoami", false, {A, O, S, V, G, R}, {}},
  };
  return table;
}

const RouteRule* FindRouteRule(std::string_view method, std::string_view path,
                               std::map<std::string, std::string>* params, bool* path_known) {
  auto segs = Split(path.substr(0, path.find('?')));
  *path_known = false;
  for (const RouteRule& r : RouteTable()) {
    std::map<std::string, std::string> p;
    if (!Match(r.pattern, segs, &p)) continue;
    *path_known = true;
    if (Serves(r.method, method)) {
      *params = std::move(p);
      return &r;
    }
  }
  return nullptr;
}

Access Authorize(const Principal& p, const RouteRule& rule, const std::map<std::string, std::string>& params,
                 const JobOwnerLookup& owner_of) {
  if (std::find(rule.roles.begin(), rule.roles.end(), p.role) == rule.roles.end()) return Access::kForbidden;
  auto own = rule.ownership.find(p.role);
  if (own == rule.ownership.end()) return Access::kAllowed;
  auto id = params.find("id");
  if (id == params.end()) return Access::kForbidden;
  switch (own->second) {
    case Ownership::kNone:
      return Access::kAllowed;
    case Ownership::kOwnNode:
      return p.node && *p.node == id->second ? Access::kAllowed : Access::kForbidden;
    case Ownership::kOwnJob:
      return p.job && *p.job == id->second ? Access::kAllowed : Access::kForbidden;
    case Ownership::kOwnJobSubmitter: {
      if (!owner_of) return Access::kForbidden;
      auto owner = owner_of(id->second);
      return owner && !owner->empty() && *owner == p.name ? Access::kAllowed : Access::kForbidden;
    }
  }
  return Access::kForbidden;
}

static int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      out += static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace shepherd
