// Prometheus text exposition. Thread-safe (a mutex): the I/O thread counts the answers it makes itself, the
// control thread and the reader thread (api/front_door.h) count theirs, the reader thread serves scrapes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace shepherd {

class Metrics {
 public:
  // One finished HTTP request. `route` is the route pattern (e.g. "/v1/nodes/{id}"), never the raw path,
  // so label cardinality stays bounded.
  void ObserveRequest(const std::string& route, const std::string& method, int status, double seconds);
  // Gauges read at scrape time (on the scraping thread, with what guards their source held).
  // REQUIRES: set before the first scrape.
  void SetGaugeSource(std::function<void(std::string* out)> source) { gauges_ = std::move(source); }
  // More series read at scrape time, after the gauges (each thread-safe itself). REQUIRES: added before
  // the first scrape.
  void AddSource(std::function<void(std::string* out)> source) { sources_.push_back(std::move(source)); }

  // How long the control thread held the ControlLock for one function it ran (a queued request's round, a
  // store completion, a tick): shepherd_control_hold_seconds (a histogram) and
  // shepherd_control_hold_seconds_max (the longest since start). Called by the control thread only; no lock
  // (relaxed atomics: a scrape may see a hold in the count before the sum).
  void ObserveControlHold(double seconds);

  std::string Exposition(const std::string& version) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1,    2.5};
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  static constexpr std::array<double, 8> kHoldBuckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
  std::array<std::atomic<uint64_t>, kHoldBuckets.size()> hold_buckets_{};
  std::atomic<uint64_t> hold_count_{0};
  std::atomic<double> hold_sum_{0};
  std::atomic<double> hold_max_{0};
  mutable std::mutex mu_;                     // guards requests_ and latency_
  std::map<std::string, uint64_t> requests_;  // labels -> count
  std::map<std::string, Histogram> latency_;  // route labels -> histogram
  std::function<void(std::string*)> gauges_;
  std::vector<std::function<void(std::string*)>> sources_;
};

}  // namespace shepherd
