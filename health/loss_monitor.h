// Training-signal anomalies from step reports: non-finite loss, loss spikes and gradient-norm spikes.
// Job-level state only (no per-rank cost).
//
// Steps: the reports of one step are folded together (the step's loss is the largest finite loss reported
// for it, so one rank's local spike counts); a step is final once a report for a later step arrives.
// Final steps feed two rolling windows of kHistory steps: the loss median and the grad-norm maximum.
// Detection happens per report, against the windows of final steps (after kMinHistory final steps):
//   - nonfinite_loss: loss NaN or ±Inf. Onset: the first (lowest) step seen with it.
//   - loss_spike: finite loss > rolling median × loss_spike_factor (median > 0). Onset: first such step.
//   - grad_norm_spike: grad norm > 10 × rolling max, or non-finite, while the loss is normal (the report's
//     loss, when present, is finite and no spike, and no loss incident is open). A signal of SDC.
// An incident clears when a later final step is normal on its signal; spike values never enter the
// windows. Loss values <= 0 are tracked but cannot spike (the ratio test needs a positive median).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/time.h"

namespace shepherd {

struct LossIncident {
  bool open = false;
  bool reported = false;  // a finding was emitted for this opening
  int64_t onset_step = 0;
  int64_t last_step = 0;  // latest step showing the anomaly
  Time detected_at{};
  double value = 0;        // the anomalous value first seen
  double reference = 0;    // rolling median (loss) or rolling max (grad norm) at detection
  std::vector<int> ranks;  // reporting ranks, ascending, at most kMaxRanks
  static constexpr size_t kMaxRanks = 64;
};

class LossMonitor {
 public:
  static constexpr int kHistory = 32;
  static constexpr int kMinHistory = 5;
  static constexpr double kGradSpikeFactor = 10;

  explicit LossMonitor(double loss_spike_factor) : factor_(loss_spike_factor) {}

  // Returns true when this report opened an incident.
  bool OnStep(int rank, int64_t step, std::optional<double> loss, std::optional<double> grad_norm, Time now);

  const LossIncident& nonfinite() const { return nonfinite_; }
  const LossIncident& spike() const { return spike_; }
  const LossIncident& grad_spike() const { return grad_spike_; }
  LossIncident& mutable_nonfinite() { return nonfinite_; }
  LossIncident& mutable_spike() { return spike_; }
  LossIncident& mutable_grad_spike() { return grad_spike_; }

  std::optional<double> last_loss() const { return last_loss_; }
  std::optional<double> rolling_median() const;  // of final steps' losses; nullopt before kMinHistory
  std::optional<double> rolling_grad_max() const;
  int64_t last_final_step() const { return last_final_step_; }

 private:
  struct Window {
    std::array<double, kHistory> v{};
    int count = 0, head = 0;
    void Push(double x);
  };
  struct OpenStep {
    int64_t step = -1;
    std::optional<double> loss_max;  // finite, non-spike losses
    std::optional<double> grad_max;  // finite, non-spike grad norms
    bool nonfinite = false, spike = false, grad_spike = false;
  };
  void Finalize();
  static bool Open(LossIncident& inc, int rank, int64_t step, double value, double reference, Time now);

  double factor_;
  Window losses_, grads_;
  double median_ = 0, grad_max_ = 0;  // cached over the windows at each Finalize
  OpenStep open_;
  int64_t last_final_step_ = -1;
  std::optional<double> last_loss_;
  LossIncident nonfinite_, spike_, grad_spike_;
};

}  // namespace shepherd
