// StepHistory: the last kCapacity final steps of one attempt, for charts (GET /v1/jobs/{id}/steps). A step
// is final as LossMonitor defines it (a report for a later step arrived). Each entry holds the job-level
// loss the LossMonitor judged (the mean of the finite per-rank losses; none when no rank sent a finite one),
// the median of the step_time_s the ranks reported for it (none when no rank did), and when it became final
// on the daemon's clock. Fixed memory: kCapacity entries of 40 bytes, allocated on the first Add.
// Not thread-safe: written by the monitor's owner, read under the same lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/time.h"

namespace shepherd {

struct FinalStep {
  int64_t step = 0;
  std::optional<double> loss;
  std::optional<double> step_time_s;
  Time time{};  // when the step became final
};

class StepHistory {
 public:
  static constexpr size_t kCapacity = 2000;

  // Appends, dropping the oldest entry once kCapacity are held.
  void Add(FinalStep s);
  size_t size() const { return count_; }
  // The newest min(n, size()) entries, oldest first.
  std::vector<FinalStep> Last(size_t n) const;

 private:
  std::vector<FinalStep> ring_;
  size_t head_ = 0;  // next slot to write once the ring is full
  size_t count_ = 0;
};

}  // namespace shepherd
