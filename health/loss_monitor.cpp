#include "health/loss_monitor.h"

#include <algorithm>
#include <cmath>

namespace shepherd {

void LossMonitor::Window::Push(double x) {
  v[head] = x;
  head = (head + 1) % kHistory;
  if (count < kHistory) ++count;
}

std::optional<double> LossMonitor::rolling_median() const {
  if (losses_.count < kMinHistory) return std::nullopt;
  return median_;
}

std::optional<double> LossMonitor::rolling_grad_max() const {
  if (grads_.count < kMinHistory) return std::nullopt;
  return grad_max_;
}

bool LossMonitor::Open(LossIncident& inc, int rank, int64_t step, double value, double reference, Time now) {
  bool opened = !inc.open;
  if (opened) {
    inc = LossIncident{};
    inc.open = true;
    inc.onset_step = step;
    inc.last_step = step;
    inc.detected_at = now;
    inc.value = value;
    inc.reference = reference;
  } else {
    inc.onset_step = std::min(inc.onset_step, step);
    inc.last_step = std::max(inc.last_step, step);
  }
  auto it = std::lower_bound(inc.ranks.begin(), inc.ranks.end(), rank);
  if ((it == inc.ranks.end() || *it != rank) && inc.ranks.size() < LossIncident::kMaxRanks)
    inc.ranks.insert(it, rank);
  return opened;
}

void LossMonitor::Finalize() {
  if (open_.step < 0) return;
  if (open_.loss_max) losses_.Push(*open_.loss_max);
  if (open_.grad_max) grads_.Push(*open_.grad_max);
  std::array<double, kHistory> buf = losses_.v;
  if (losses_.count > 0) {
    std::nth_element(buf.begin(), buf.begin() + losses_.count / 2, buf.begin() + losses_.count);
    median_ = buf[losses_.count / 2];
  }
  grad_max_ = grads_.count > 0 ? *std::max_element(grads_.v.begin(), grads_.v.begin() + grads_.count) : 0;
  // A normal final step after an incident's last anomalous step closes it.
  bool had_loss = open_.loss_max.has_value() || open_.nonfinite || open_.spike;
  if (nonfinite_.open && had_loss && !open_.nonfinite && open_.step > nonfinite_.last_step)
    nonfinite_.open = false;
  if (spike_.open && had_loss && !open_.spike && !open_.nonfinite && open_.step > spike_.last_step)
    spike_.open = false;
  if (grad_spike_.open && open_.grad_max && !open_.grad_spike && open_.step > grad_spike_.last_step)
    grad_spike_.open = false;
  last_final_step_ = open_.step;
  open_ = OpenStep{};
}

bool LossMonitor::OnStep(int rank, int64_t step, std::optional<double> loss, std::optional<double> grad_norm,
                         Time now) {
  if (!loss && !grad_norm) return false;
  if (step > open_.step) {
    Finalize();
    open_.step = step;
  }
  const bool current = step == open_.step;  // late reports are checked but do not feed the windows
  bool opened = false;
  bool loss_normal = !nonfinite_.open && !spike_.open;
  if (loss) {
    last_loss_ = *loss;
    if (!std::isfinite(*loss)) {
      opened |= Open(nonfinite_, rank, step, *loss, 0, now);
      if (current) open_.nonfinite = true;
      loss_normal = false;
    } else if (losses_.count >= kMinHistory && median_ > 0 && *loss > median_ * factor_) {
      opened |= Open(spike_, rank, step, *loss, median_, now);
      if (current) open_.spike = true;
      loss_normal = false;
    } else if (current) {
      open_.loss_max = std::max(open_.loss_max.value_or(*loss), *loss);
    }
  }
  if (grad_norm) {
    const bool spiking = !std::isfinite(*grad_norm) ||
                         (grads_.count >= kMinHistory && *grad_norm > kGradSpikeFactor * grad_max_);
    if (spiking && loss_normal) {
      opened |= Open(grad_spike_, rank, step, *grad_norm, grad_max_, now);
      if (current) open_.grad_spike = true;
    } else if (!spiking && current) {
      open_.grad_max = std::max(open_.grad_max.value_or(*grad_norm), *grad_norm);
    }
  }
  return opened;
}

}  // namespace shepherd
