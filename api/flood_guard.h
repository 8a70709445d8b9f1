// FloodGuard: per-sender token buckets that turn a flood away before it costs the daemon anything. The
// daemon keys agent heartbeats by node (the path's {id}) and rank reports by job and rank credential
// (daemon/serve.cpp); a sender over its rate is answered 429 with Retry-After on its request head, on the
// I/O thread, so the flood never reaches the request queue and never delays another node's heartbeat.
//
// A bucket holds up to `burst` tokens and gains `rate_per_s` a second; each request takes one. A legitimate
// agent heartbeats once a second (plus one at once after a rank exits), so the default heartbeat rate (20/s,
// burst 80) is never reached by one, nor by one heartbeating every 0.2 s; a node flooding at 1000/s still
// gets `rate_per_s` through, so it is never read as silent. Being rate-limited is the sender's own quota, not the daemon's lateness.
//
// Memory is bounded: at most `max_keys` buckets; when full, buckets that have refilled (idle senders) are
// dropped (one sweep a second at most), and a new key that still finds no room is admitted untracked (liveness first).
//
// Pure: no clock reads (`now` in), no threads. One owner (the daemon's I/O thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>

namespace shepherd {

struct FloodGuardOptions {
  double rate_per_s = 5;  // <= 0: no limit (Admit always admits)
  double burst = 20;      // at least 1
  std::size_t max_keys = 1 << 17;
};

class FloodGuard {
 public:
  using Clock = std::chrono::steady_clock;

  explicit FloodGuard(FloodGuardOptions options);

  // Takes a token of `key`'s bucket: nullopt when admitted, else the seconds until the next token
  // (at least 1, whole: a Retry-After).
  std::optional<int> Admit(const std::string& key, Clock::time_point now);

  std::size_t keys() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point at;
  };
  double Refilled(const Bucket& b, Clock::time_point now) const;
  void Prune(Clock::time_point now);

  FloodGuardOptions options_;
  std::unordered_map<std::string, Bucket> buckets_;
  Clock::time_point last_prune_{};
};

}  // namespace shepherd
