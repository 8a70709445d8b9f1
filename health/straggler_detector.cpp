#include "health/straggler_detector.h"

#include <algorithm>
#include <array>

namespace shepherd {
namespace {

// Median of the last `w` samples of the ring (w <= count).
float RankMedian(const RankState& s, int w) {
  std::array<float, kMaxStragglerWindow> buf;
  for (int i = 0; i < w; ++i)
    buf[i] = s.step_times[(s.step_time_head + kMaxStragglerWindow - 1 - i) % kMaxStragglerWindow];
  std::nth_element(buf.begin(), buf.begin() + w / 2, buf.begin() + w);
  return buf[w / 2];
}

}  // namespace

int StragglerWindow(const Policy& policy) {
  return std::clamp(policy.straggler_window_steps, 3, kMaxStragglerWindow);
}

void RecordStepTime(RankState& s, double step_time_s) {
  s.step_times[s.step_time_head] = static_cast<float>(step_time_s);
  s.step_time_head = static_cast<uint8_t>((s.step_time_head + 1) % kMaxStragglerWindow);
  if (s.step_time_count < kMaxStragglerWindow) ++s.step_time_count;
}

StragglerAnalysis AnalyzeStragglers(const std::vector<RankState>& ranks, const Policy& policy) {
  StragglerAnalysis a;
  const int w = StragglerWindow(policy);
  a.window = w;
  std::vector<float> medians;
  for (const RankState& s : ranks)
    if (s.step_time_count >= w) medians.push_back(RankMedian(s, w));
  a.ranks_with_full_window = static_cast<int>(medians.size());
  if (medians.size() < 2) return a;  // a median of one rank is that rank: nothing to compare
  std::nth_element(medians.begin(), medians.begin() + medians.size() / 2, medians.end());
  a.job_median_s = medians[medians.size() / 2];
  const double threshold = a.job_median_s * policy.straggler_factor;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankState& s = ranks[r];
    if (s.step_time_count < w) continue;
    int slow = 0;
    for (int i = 0; i < w; ++i)
      if (s.step_times[(s.step_time_head + kMaxStragglerWindow - 1 - i) % kMaxStragglerWindow] > threshold)
        ++slow;
    if (2 * slow > w) {
      a.stragglers.push_back(static_cast<int>(r));
      a.median_s.push_back(RankMedian(s, w));
    }
  }
  return a;
}

}  // namespace shepherd
