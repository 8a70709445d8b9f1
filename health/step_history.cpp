#include "health/step_history.h"

#include <algorithm>

namespace shepherd {

void StepHistory::Add(FinalStep s) {
  if (ring_.size() < kCapacity) {
    ring_.push_back(s);
    count_ = ring_.size();
    return;
  }
  ring_[head_] = s;
  head_ = (head_ + 1) % kCapacity;
}

std::vector<FinalStep> StepHistory::Last(size_t n) const {
  n = std::min(n, count_);
  std::vector<FinalStep> out;
  out.reserve(n);
  // The oldest entry is at head_ once the ring is full (head_ is 0 until then).
  for (size_t i = count_ - n; i < count_; ++i) out.push_back(ring_[(head_ + i) % ring_.size()]);
  return out;
}

}  // namespace shepherd
