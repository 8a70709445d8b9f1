// Prometheus text exposition. Thread-safe (a mutex): the I/O thread counts the answers it makes itself, the
// control thread and the reader thread (api/front_door.h) count theirs, the reader thread serves scrapes.
#pragma once

#include <array>
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

  std::string Exposition(const std::string& version) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1,    2.5};
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;                     // guards requests_ and latency_
  std::map<std::string, uint64_t> requests_;  // labels -> count
  std::map<std::string, Histogram> latency_;  // route labels -> histogram
  std::function<void(std::string*)> gauges_;
};

}  // namespace shepherd
