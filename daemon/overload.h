// Overload glue of the serving daemon: what it sheds, and whom it rate-limits.
//
// Shedding counts every connection or request the daemon turns away (api/http_server.h ShedReason) for
// shepherd_requests_shed_total{reason}, and hands the control thread's tick the number shed for the
// daemon's own capacity since the previous tick (connection caps at accept, evictions, the body budget, a
// full request queue): the tick feeds it to Lateness::OnRefusals, so nobody the daemon turned away is read
// as silent (health/lateness.h). Shedding for the caller's own quota (its credential's connection cap, its
// body share, its request rate) is counted but is not the daemon's lateness: one caller's flood must not
// blind the daemon to everyone else's silence. Thread-safe (atomics): the I/O thread and the front door
// count, the control thread takes, the scraping thread reads.
//
// FloodLimits: the per-node heartbeat and per-rank report rates (api/flood_guard.h), judged on a request
// head on the I/O thread (one owner, no lock): heartbeats keyed by the path's node, reports by job and
// rank credential (a token naming one rank; an unscoped sender is not limited here).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "api/auth.h"
#include "api/flood_guard.h"
#include "api/http_server.h"
#include "api/http_types.h"
#include "api/route_table.h"

namespace shepherd {

class Shedding {
 public:
  void Count(ShedReason r);
  // Shed for the daemon's own capacity since the previous call.
  uint64_t TakeOwnCapacity() { return own_.exchange(0, std::memory_order_relaxed); }
  uint64_t total(ShedReason r) const { return by_reason_[static_cast<int>(r)].load(std::memory_order_relaxed); }
  // shepherd_requests_shed_total{reason}, every reason (zeros included).
  void AppendMetrics(std::string* out) const;

 private:
  static constexpr int kReasons = static_cast<int>(ShedReason::kListenQueue) + 1;
  std::array<std::atomic<uint64_t>, kReasons> by_reason_{};
  std::atomic<uint64_t> own_{0};
};

struct FloodLimitOptions {
  double heartbeats_per_node_s = 20;  // 0: no limit
  double reports_per_rank_s = 50;    // 0: no limit
};

class FloodLimits {
 public:
  explicit FloodLimits(FloodLimitOptions o);
  // The 429 (Retry-After) for a request head over its sender's rate (the route's RateKey), else nullopt.
  // `route` and `params` are the matched route's; `principal` the head's credential, if any.
  std::optional<HttpResponse> Judge(const RouteRule& route, const std::map<std::string, std::string>& params,
                                    const std::optional<Principal>& principal, FloodGuard::Clock::time_point now);

 private:
  FloodGuard heartbeats_;
  FloodGuard reports_;
};

}  // namespace shepherd
