#include "health/loss_monitor.h"

#include <algorithm>
#include <cmath>

namespace shepherd {
namespace {

void AddRank(std::vector<int>& ranks, int rank) {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  if ((it == ranks.end() || *it != rank) && ranks.size() < LossIncident::kMaxRanks) ranks.insert(it, rank);
}

double MedianOf(std::array<double, LossMonitor::kHistory> buf, int n) {
  std::nth_element(buf.begin(), buf.begin() + n / 2, buf.begin() + n);
  return buf[n / 2];
}

}  // namespace

void LossMonitor::Window::Push(double x) {
  v[head] = x;
  head = (head + 1) % kHistory;
  if (count < kHistory) ++count;
}

std::optional<double> LossMonitor::rolling_median() const {
  if (losses_.count < kMinHistory) return std::nullopt;
  return median_;
}

std::optional<double> LossMonitor::rolling_mad() const {
  if (losses_.count < kMinHistory) return std::nullopt;
  return mad_;
}

std::optional<double> LossMonitor::threshold() const {
  if (losses_.count < kMinHistory || median_ <= 0) return std::nullopt;
  return threshold_;
}

std::optional<double> LossMonitor::rolling_grad_max() const {
  if (grads_.count < kMinHistory) return std::nullopt;
  return grad_max_;
}

bool LossMonitor::Open(LossIncident& inc, const std::vector<int>& ranks, int64_t onset, Time onset_at,
                       int64_t step, double value, double reference, Time now) {
  const bool opened = !inc.open;
  if (opened && inc.pending) {  // reopened before it was reported: one incident
    inc.open = true;
    if (onset < inc.onset_step) inc.onset_at = onset_at;
    inc.onset_step = std::min(inc.onset_step, onset);
    inc.last_step = std::max(inc.last_step, step);
  } else if (opened) {
    inc = LossIncident{};
    inc.pending = true;
    inc.open = true;
    inc.onset_step = onset;
    inc.onset_at = onset_at;
    inc.last_step = step;
    inc.detected_at = now;
    inc.value = value;
    inc.reference = reference;
  } else {
    if (onset < inc.onset_step) inc.onset_at = onset_at;
    inc.onset_step = std::min(inc.onset_step, onset);
    inc.last_step = std::max(inc.last_step, step);
  }
  for (int r : ranks) AddRank(inc.ranks, r);
  return opened;
}

void LossMonitor::RestartBaseline(int64_t step) {
  losses_ = Window{};
  grads_ = Window{};
  run_len_ = 0;
  spike_.open = divergence_.open = grad_spike_.open = false;
  baseline_since_ = step;
}

bool LossMonitor::Finalize(Time now) {
  if (open_.step < 0) return false;
  const int64_t s = open_.step;
  bool opened = false;
  std::optional<double> loss;
  if (open_.loss_count > 0) loss = open_.loss_sum / open_.loss_count;
  if (open_.lr) {
    if (last_lr_ && *open_.lr > kLrRiseFactor * *last_lr_) RestartBaseline(s);
    last_lr_ = open_.lr;
  }
  const bool judging = losses_.count >= kMinHistory && median_ > 0;
  const bool above = loss && judging && *loss > threshold_;

  if (nonfinite_.open && loss && !open_.nonfinite && s > nonfinite_.last_step) nonfinite_.open = false;
  if (above && !open_.nonfinite) {
    if (run_len_ == 0) {
      run_start_ = s;
      run_start_at_ = open_.first_seen;
      run_ranks_ = open_.ranks;
      run_value_ = *loss;
    }
    ++run_len_;
    if (run_len_ == 1 && divergence_steps_ > 1)
      opened |= Open(spike_, open_.ranks, s, open_.first_seen, s, *loss, threshold_, now);
    else if (spike_.open)
      spike_.last_step = s;
    if (run_len_ >= divergence_steps_)
      opened |= Open(divergence_, run_ranks_, run_start_, run_start_at_, s, run_value_, threshold_, now);
  } else if (loss && !open_.nonfinite) {
    run_len_ = 0;
    spike_.open = false;
    divergence_.open = false;
    losses_.Push(*loss);
    last_loss_ = *loss;
  }

  const bool loss_normal = !open_.nonfinite && !above && !nonfinite_.open && !divergence_.open;
  if (!open_.grad_ranks.empty()) {
    if (loss_normal)
      opened |= Open(grad_spike_, open_.grad_ranks, s, open_.first_seen, s, *open_.grad_spike_value,
                     grad_max_, now);
  } else if (open_.grad_max) {
    grads_.Push(*open_.grad_max);
    if (grad_spike_.open && s > grad_spike_.last_step) grad_spike_.open = false;
  }

  if (losses_.count > 0) {
    median_ = MedianOf(losses_.v, losses_.count);
    std::array<double, kHistory> dev{};
    for (int i = 0; i < losses_.count; ++i) dev[i] = std::fabs(losses_.v[i] - median_);
    mad_ = MedianOf(dev, losses_.count);
    threshold_ = median_ + std::max(kMadK * kMadScale * mad_, (factor_ - 1) * median_);
  }
  grad_max_ = grads_.count > 0 ? *std::max_element(grads_.v.begin(), grads_.v.begin() + grads_.count) : 0;
  last_final_step_ = s;
  std::optional<double> step_time;
  if (!open_.step_times.empty()) {
    auto& t = open_.step_times;
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    step_time = t[t.size() / 2];
  }
  history_.Add({s, loss, step_time, now});
  open_ = OpenStep{};
  return opened;
}

bool LossMonitor::OnStep(int rank, int64_t step, std::optional<double> loss, std::optional<double> grad_norm,
                         std::optional<double> lr, Time now, std::optional<double> step_time_s) {
  if (!loss && !grad_norm && !lr && !step_time_s) return false;
  bool opened = false;
  if (step > open_.step) {
    opened |= Finalize(now);
    open_.step = step;
    open_.first_seen = now;
  }
  const bool current = step == open_.step;  // late reports are checked for non-finite values only
  if (loss && !std::isfinite(*loss)) {
    // A late report's step was first reported before; when is not kept: this report's receipt.
    opened |= Open(nonfinite_, {rank}, step, current ? open_.first_seen : now, step, *loss, 0, now);
    if (current) open_.nonfinite = true;
  }
  if (!current) return opened;
  AddRank(open_.ranks, rank);
  if (step_time_s && std::isfinite(*step_time_s) && open_.step_times.size() < kMaxStepTimeSamples)
    open_.step_times.push_back(static_cast<float>(*step_time_s));
  if (lr) open_.lr = std::max(open_.lr.value_or(*lr), *lr);
  if (loss && std::isfinite(*loss)) {
    open_.loss_sum += *loss;
    ++open_.loss_count;
  }
  if (grad_norm) {
    const bool spiking = !std::isfinite(*grad_norm) ||
                         (grads_.count >= kMinHistory && *grad_norm > kGradSpikeFactor * grad_max_);
    if (spiking) {
      if (!open_.grad_spike_value) open_.grad_spike_value = *grad_norm;
      AddRank(open_.grad_ranks, rank);
    } else {
      open_.grad_max = std::max(open_.grad_max.value_or(*grad_norm), *grad_norm);
    }
  }
  return opened;
}

}  // namespace shepherd
