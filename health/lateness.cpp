#include "health/lateness.h"

#include <algorithm>

namespace shepherd {

void Lateness::Late(double how_long_s, Time now) {
  // One episode per run of lateness: a sample right after another late one extends it.
  if (stalls_ == 0 || ToSeconds(now - late_at_) > threshold_s()) ++stalls_;
  longest_stall_s_ = std::max(longest_stall_s_, how_long_s);
  listening_since_ = std::max(listening_since_, now);
  late_at_ = now;
}

void Lateness::OnTurn(Time now) {
  if (late_after_s_ > 0 && ToSeconds(now - last_turn_) > late_after_s_)
    Late(ToSeconds(now - last_turn_), now);
  last_turn_ = std::max(last_turn_, now);
}

void Lateness::OnTickLag(Duration lag, Time now) {
  tick_lag_s_ = ToSeconds(lag);
  if (tick_lag_s_ > threshold_s()) Late(tick_lag_s_, now);
  OnTurn(now);
}

void Lateness::OnQueueAge(Duration age, Time now) {
  queue_age_s_ = ToSeconds(age);
  if (queue_age_s_ > threshold_s()) Late(queue_age_s_, now);
  OnTurn(now);
}

Lateness::Facts Lateness::facts(Time now) const {
  Facts f;
  f.tick_lag_s = tick_lag_s_;
  f.queue_age_s = queue_age_s_;
  f.since_reports_s = last_reports_ == Time{} ? -1 : ToSeconds(now - last_reports_);
  f.listening_for_s = ToSeconds(now - listening_since_);
  f.late = std::max(tick_lag_s_, queue_age_s_) > threshold_s();
  f.stalls = stalls_;
  f.longest_stall_s = longest_stall_s_;
  return f;
}

}  // namespace shepherd
