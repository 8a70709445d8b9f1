#include "daemon/overload.h"

#include "api/problem.h"

namespace shepherd {

void Shedding::Count(ShedReason r) {
  by_reason_[static_cast<int>(r)].fetch_add(1, std::memory_order_relaxed);
  if (IsOwnCapacity(r)) own_.fetch_add(1, std::memory_order_relaxed);
}

void Shedding::AppendMetrics(std::string* out) const {
  *out +=
      "# HELP shepherd_requests_shed_total Connections and requests the daemon turned away, by reason "
      "(connection_cap, evicted, body_budget, queue_full, listen_queue: its own capacity, counted as its own "
      "lateness; identity_cap, body_share, rate_limited: the caller's own quota).\n"
      "# TYPE shepherd_requests_shed_total counter\n";
  for (int i = 0; i < kReasons; ++i)
    *out += std::string("shepherd_requests_shed_total{reason=\"") + ToString(static_cast<ShedReason>(i)) +
            "\"} " + std::to_string(by_reason_[i].load(std::memory_order_relaxed)) + "\n";
}

FloodLimits::FloodLimits(FloodLimitOptions o)
    : heartbeats_({.rate_per_s = o.heartbeats_per_node_s, .burst = std::max(20.0, 4 * o.heartbeats_per_node_s)}),
      reports_({.rate_per_s = o.reports_per_rank_s, .burst = std::max(20.0, 4 * o.reports_per_rank_s)}) {}

std::optional<HttpResponse> FloodLimits::Judge(const RouteRule& route,
                                               const std::map<std::string, std::string>& params,
                                               const std::optional<Principal>& principal,
                                               FloodGuard::Clock::time_point now) {
  std::optional<int> wait;
  const char* what = nullptr;
  if (route.rate_key == RateKey::kNode) {
    auto id = params.find("id");
    if (id == params.end()) return std::nullopt;
    wait = heartbeats_.Admit(id->second, now);
    what = "this node's heartbeats";
  } else if (route.rate_key == RateKey::kRank && principal && principal->rank && principal->job) {
    wait = reports_.Admit(*principal->job + "/" + std::to_string(*principal->rank), now);
    what = "this rank's reports";
  }
  if (!wait) return std::nullopt;
  HttpResponse busy = Problem(429, std::string(what) + " arrive far above their interval; retry after the "
                                                       "Retry-After delay");
  busy.headers.emplace_back("Retry-After", std::to_string(*wait));
  return busy;
}

}  // namespace shepherd
