// Time as a value. Pure modules (scheduler/, health/) never read a clock: they take `Time now`.
// Only daemon/ owns a real Clock; tests use FakeClock (tests/fakes/fake_clock.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace shepherd {

using Time = std::chrono::system_clock::time_point;
using Duration = std::chrono::system_clock::duration;

inline Duration Seconds(double s) {
  return std::chrono::round<Duration>(std::chrono::duration<double>(s));
}
inline double ToSeconds(Duration d) {
  return std::chrono::duration<double>(d).count();
}
inline double ToUnixSeconds(Time t) {
  return ToSeconds(t.time_since_epoch());
}
inline Time FromUnixSeconds(double s) {
  // Whole seconds exactly, then the fraction: a double of ~1.7e18 ns cannot hold nanoseconds exactly.
  double whole = static_cast<double>(static_cast<long long>(s));
  return Time(std::chrono::seconds(static_cast<long long>(whole))) + Seconds(s - whole);
}

// RFC 3339 UTC with millisecond precision, e.g. "2026-11-21T06:48:00.123Z".
std::string FormatRfc3339(Time t);
// Accepts "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)". nullopt when malformed.
std::optional<Time> ParseRfc3339(std::string_view s);

// The one seam for reading time. Thread-safe implementations only.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  Time Now() const override { return std::chrono::system_clock::now(); }
};

}  // namespace shepherd
