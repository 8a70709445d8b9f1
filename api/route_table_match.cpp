// The one path matcher, and what reads the route table's entries: authorization, the queue choice, the
// table as JSON. The entries themselves are in api/route_table.cpp.
#include <algorithm>

#include "api/route_table.h"

namespace shepherd {
namespace {

// The next non-empty '/'-separated segment of `s` from `*i`; empty at the end. Empty segments ("//", a
// trailing '/') are skipped, as they always were.
std::string_view NextSegment(std::string_view s, std::size_t* i) {
  while (*i < s.size() && s[*i] == '/') ++*i;
  const std::size_t from = *i;
  while (*i < s.size() && s[*i] != '/') ++*i;
  return s.substr(from, *i - from);
}

std::vector<std::string_view> Split(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  for (std::string_view seg = NextSegment(path, &i); !seg.empty(); seg = NextSegment(path, &i))
    out.push_back(seg);
  return out;
}

bool IsParam(std::string_view seg) {
  return seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
}

// Whether `pattern` matches the segments of a path; binds its parameters into `params` only when it does.
bool Match(std::string_view pattern, const std::vector<std::string_view>& path, PathParams* params) {
  std::size_t i = 0, n = 0;
  for (std::string_view seg = NextSegment(pattern, &i); !seg.empty(); seg = NextSegment(pattern, &i), ++n) {
    if (n >= path.size()) return false;
    if (IsParam(seg) ? path[n].empty() : seg != path[n]) return false;
  }
  if (n != path.size()) return false;
  if (params) {
    params->clear();
    i = n = 0;
    for (std::string_view seg = NextSegment(pattern, &i); !seg.empty(); seg = NextSegment(pattern, &i), ++n)
      if (IsParam(seg)) (*params)[std::string(seg.substr(1, seg.size() - 2))] = PercentDecode(path[n]);
  }
  return true;
}

const char* ToString(RequestClass c, Probe probe) {
  if (probe != Probe::kNone) return "io";
  return ToString(c);
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

const char* ToString(Ownership o) {
  switch (o) {
    case Ownership::kNone:
      return "none";
    case Ownership::kOwnNode:
      return "own node";
    case Ownership::kOwnJob:
      return "own job";
    case Ownership::kOwnJobSubmitter:
      return "own jobs";
  }
  return "?";
}

const RouteRule* FindRouteRule(std::string_view method, std::string_view path, PathParams* params,
                               bool* path_known, std::string* allow) {
  const std::vector<std::string_view> segs = Split(path.substr(0, path.find('?')));
  *path_known = false;
  const RouteRule* found = nullptr;
  for (const RouteRule& r : RouteTable()) {
    if (!Match(r.pattern, segs, nullptr)) continue;
    *path_known = true;
    if (Serves(r.method, method)) {
      found = &r;
      break;
    }
    if (allow) {
      *allow += (allow->empty() ? "" : ", ") + r.method;
      if (r.method == "GET") *allow += ", HEAD";  // served wherever GET is (Serves)
    }
  }
  if (found) Match(found->pattern, segs, params);
  return found;
}

RequestClass QueueOf(const RouteRule* route, std::string_view method) {
  if (route) return route->queue;
  return method == "GET" || method == "HEAD" ? RequestClass::kRead : RequestClass::kWrite;
}

RequestClass ClassOf(std::string_view method, std::string_view path) {
  PathParams unused;
  bool known = false;
  return QueueOf(FindRouteRule(method, path, &unused, &known), method);
}

Access Authorize(const Principal& p, const RouteRule& rule, const PathParams& params,
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

Json RouteTableJson() {
  Json out = Json::array();
  for (const RouteRule& r : RouteTable()) {
    Json roles = Json::array();
    for (Role role : r.roles) roles.push_back(ToString(role));
    Json ownership = Json::object();
    for (const auto& [role, own] : r.ownership) ownership[ToString(role)] = ToString(own);
    out.push_back({{"method", r.method},
                   {"path", r.pattern},
                   {"public", r.is_public},
                   {"roles", std::move(roles)},
                   {"ownership", std::move(ownership)},
                   {"queue", ToString(r.queue, r.probe)},
                   {"summary", r.summary}});
  }
  return out;
}

}  // namespace shepherd
