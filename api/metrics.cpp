#include "api/metrics.h"

#include <cstdio>

namespace shepherd {
namespace {
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
// A bucket bound as written in the source ("0.005", not its nearest double's 17 digits).
std::string Bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

void Metrics::ObserveRequest(const std::string& route, const std::string& method, int status,
                             double seconds) {
  std::string base = "route=\"" + route + "\",method=\"" + method + "\"";
  std::lock_guard lock(mu_);
  ++requests_[base + ",status=\"" + std::to_string(status) + "\""];
  Histogram& h = latency_[base];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++h.buckets[i];
  ++h.count;
  h.sum += seconds;
}

void Metrics::ObserveControlHold(double seconds) {
  for (size_t i = 0; i < kHoldBuckets.size(); ++i)
    if (seconds <= kHoldBuckets[i]) hold_buckets_[i].fetch_add(1, std::memory_order_relaxed);
  hold_count_.fetch_add(1, std::memory_order_relaxed);
  // One writer: load and store need no compare-and-swap.
  hold_sum_.store(hold_sum_.load(std::memory_order_relaxed) + seconds, std::memory_order_relaxed);
  if (seconds > hold_max_.load(std::memory_order_relaxed))
    hold_max_.store(seconds, std::memory_order_relaxed);
}

std::string Metrics::Exposition(const std::string& version) const {
  std::string out;
  out +=
      "# HELP shepherd_control_hold_seconds_max The longest the control thread held the control lock for "
      "one function since start.\n# TYPE shepherd_control_hold_seconds_max gauge\n";
  out += "shepherd_control_hold_seconds_max " + Num(hold_max_.load(std::memory_order_relaxed)) + "\n";
  out +=
      "# HELP shepherd_control_hold_seconds How long the control thread held the control lock per "
      "function.\n# TYPE shepherd_control_hold_seconds histogram\n";
  for (size_t i = 0; i < kHoldBuckets.size(); ++i)
    out += "shepherd_control_hold_seconds_bucket{le=\"" + Bound(kHoldBuckets[i]) + "\"} " +
           std::to_string(hold_buckets_[i].load(std::memory_order_relaxed)) + "\n";
  const uint64_t holds = hold_count_.load(std::memory_order_relaxed);
  out += "shepherd_control_hold_seconds_bucket{le=\"+Inf\"} " + std::to_string(holds) + "\n";
  out += "shepherd_control_hold_seconds_sum " + Num(hold_sum_.load(std::memory_order_relaxed)) + "\n";
  out += "shepherd_control_hold_seconds_count " + std::to_string(holds) + "\n";
  out += "# HELP shepherd_build_info Build information.\n# TYPE shepherd_build_info gauge\n";
  out += "shepherd_build_info{version=\"" + version + "\"} 1\n";
  std::unique_lock lock(mu_);
  out += "# HELP shepherd_http_requests_total HTTP requests by route, method and status.\n";
  out += "# TYPE shepherd_http_requests_total counter\n";
  for (const auto& [labels, n] : requests_)
    out += "shepherd_http_requests_total{" + labels + "} " + std::to_string(n) + "\n";
  out += "# HELP shepherd_http_request_duration_seconds HTTP request latency by route.\n";
  out += "# TYPE shepherd_http_request_duration_seconds histogram\n";
  for (const auto& [labels, h] : latency_) {
    for (size_t i = 0; i < kBuckets.size(); ++i)
      out += "shepherd_http_request_duration_seconds_bucket{" + labels + ",le=\"" + Num(kBuckets[i]) +
             "\"} " + std::to_string(h.buckets[i]) + "\n";
    out += "shepherd_http_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} " +
           std::to_string(h.count) + "\n";
    out += "shepherd_http_request_duration_seconds_sum{" + labels + "} " + Num(h.sum) + "\n";
    out += "shepherd_http_request_duration_seconds_count{" + labels + "} " + std::to_string(h.count) + "\n";
  }
  lock.unlock();
  if (gauges_) gauges_(&out);
  for (const auto& source : sources_) source(&out);
  return out;
}

}  // namespace shepherd
