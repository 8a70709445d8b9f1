// A function from request to response. Matches "METHOD /path/{param}" routes, answers 404 for unknown
// paths and 405 (with Allow) for known paths with another method, records metrics and an access log line
// with the request id. No sockets: tests call Handle() with plain values.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "api/http_types.h"
#include "api/metrics.h"

namespace shepherd {

using PathParams = std::map<std::string, std::string>;
using QueryParams = std::map<std::string, std::string>;
using RouteHandler = std::function<void(const HttpRequest&, const PathParams&, Respond)>;

// Splits "a=1&b=x%20y" into decoded pairs (last one wins).
QueryParams ParseQuery(std::string_view target);
std::string PathOf(std::string_view target);

class Router {
 public:
  explicit Router(Metrics* metrics) : metrics_(metrics) {}

  // `pattern` segments in braces bind path parameters: "/v1/jobs/{id}/cancel".
  void Add(const std::string& method, const std::string& pattern, RouteHandler handler);

  // Runs on the control thread. `respond` is called once, possibly later; metrics are recorded then.
  // REQUIRES: respond is invoked on the control thread (the controller posts completions back there).
  void Handle(HttpRequest request, Respond respond) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    RouteHandler handler;
  };
  bool Match(const Route& r, const std::vector<std::string_view>& path, PathParams* params) const;

  Metrics* metrics_;
  std::vector<Route> routes_;
};

}  // namespace shepherd
