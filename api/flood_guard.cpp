#include "api/flood_guard.h"

#include <algorithm>
#include <cmath>

namespace shepherd {

FloodGuard::FloodGuard(FloodGuardOptions options) : options_(options) {
  options_.burst = std::max(options_.burst, 1.0);
  options_.max_keys = std::max<std::size_t>(options_.max_keys, 1);
}

double FloodGuard::Refilled(const Bucket& b, Clock::time_point now) const {
  const double elapsed = std::max(0.0, std::chrono::duration<double>(now - b.at).count());
  return std::min(options_.burst, b.tokens + elapsed * options_.rate_per_s);
}

void FloodGuard::Prune(Clock::time_point now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (Refilled(it->second, now) >= options_.burst)
      it = buckets_.erase(it);
    else
      ++it;
  }
}

std::optional<int> FloodGuard::Admit(const std::string& key, Clock::time_point now) {
  if (options_.rate_per_s <= 0) return std::nullopt;
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    // A sweep is linear in the buckets: at most one a second, so a stream of new keys stays cheap.
    if (buckets_.size() >= options_.max_keys && now - last_prune_ >= std::chrono::seconds(1)) {
      last_prune_ = now;
      Prune(now);
    }
    if (buckets_.size() >= options_.max_keys) return std::nullopt;  // untracked: liveness first
    buckets_.emplace(key, Bucket{options_.burst - 1, now});
    return std::nullopt;
  }
  Bucket& b = it->second;
  b.tokens = Refilled(b, now);
  b.at = std::max(b.at, now);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::nullopt;
  }
  const double wait_s = (1 - b.tokens) / options_.rate_per_s;
  return std::max(1, static_cast<int>(std::ceil(wait_s)));
}

}  // namespace shepherd
