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
// REQUIRES: s is finite and |s| < kMaxUnixSeconds (untrusted input goes through TimeFromUnixSeconds).
inline Time FromUnixSeconds(double s) {
  // Whole seconds exactly, then the fraction: a double of ~1.7e18 ns cannot hold nanoseconds exactly.
  double whole = static_cast<double>(static_cast<long long>(s));
  return Time(std::chrono::seconds(static_cast<long long>(whole))) + Seconds(s - whole);
}

// Time holds int64 nanoseconds since 1970: 1677-09-21 to 2262-04-11. Whole seconds strictly within
// ±kMaxUnixSeconds (plus any fraction) fit.
inline constexpr double kMaxUnixSeconds = 9223372036.0;
// Unix seconds from untrusted input; nullopt when not finite or outside what Time holds.
std::optional<Time> TimeFromUnixSeconds(double s);

// RFC 3339 UTC with millisecond precision, e.g. "2026-11-21T06:48:00.123Z".
std::string FormatRfc3339(Time t);
// Accepts "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)" ('T' and 'Z' also lower case, RFC 3339 5.6).
// nullopt when malformed: a date the calendar does not have (02-30), second 60 (leap seconds are not
// accepted), an offset beyond ±23:59, a separator other than 'T', or a time outside what Time holds.
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
