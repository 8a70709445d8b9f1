// A clock that moves only when told. Not thread-safe: single-threaded tests only.
#pragma once

#include "core/time.h"

namespace shepherd {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(Time start = FromUnixSeconds(1'800'000'000)) : now_(start) {}
  Time Now() const override { return now_; }
  void Advance(Duration d) { now_ += d; }
  void AdvanceSeconds(double s) { now_ += Seconds(s); }

 private:
  Time now_;
};

}  // namespace shepherd
