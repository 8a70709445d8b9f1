// Training-signal anomalies from step reports, judged at job level: non-finite loss, a one-step loss
// spike, loss divergence, and gradient-norm spikes. Job-level state only (no per-rank cost).
//
// Steps: the reports of one step are folded together; a step is final once a report for a later step
// arrives (reports for an earlier step than the open one are late: checked for non-finite values only).
// The job-level loss of a step is the MEAN of the finite per-rank losses reported for it (per-rank losses
// of small per-rank batches swing 10x; their mean does not). Its grad norm is the largest finite one.
// Final steps judged normal feed two rolling windows of kHistory steps: job-level losses (median m and
// median absolute deviation MAD) and grad norms (maximum). Judging starts after kMinHistory final steps.
//   - threshold T = m + max(kMadK × kMadScale × MAD, (loss_spike_factor − 1) × m), for m > 0 (a loss <= 0
//     cannot spike). The floor keeps a near-constant loss (MAD about 0) from making every wiggle a spike;
//     with the default factor 3 it is the old "3 × median" rule, raised when the loss is noisier.
//   - nonfinite_loss: any rank's loss NaN or ±Inf, detected per report (a divergence at once). Onset: the
//     lowest step seen with it. Clears at a later final step with a finite loss and no non-finite one.
//   - loss_spike: a final step's job-level loss > T that starts a run of such steps. A one-step outlier:
//     recorded, no action. Onset: that step.
//   - loss_divergence: the run reaches divergence_steps consecutive final steps above T. Onset: the first
//     step of the run (with divergence_steps <= 1 every run is a divergence and no loss_spike is raised).
//     Both clear at the next final step whose job-level loss is finite and <= T.
//   - grad_norm_spike: some rank's grad norm at a final step is non-finite or > kGradSpikeFactor × the
//     rolling max, while that step's loss is normal (finite, <= T) and no loss incident is open. A signal
//     of SDC. Clears at a later final step with a normal grad norm.
// A new baseline: a step whose learning rate (the `lr` ranks report, the largest) is more than
// kLrRiseFactor × the previous final step's (an SGDR warm restart, a schedule's next phase) is expected to
// raise the loss for a while. The loss and grad-norm windows start again from that step, an open run,
// spike or divergence is closed, and judging resumes after kMinHistory final steps: a loss that then
// diverges from the new level is still found. Non-finite losses are judged throughout.
// An incident that opened and closed between two Evaluates is still reported once (see `pending`).
// Values above T (or spiking grad norms) never enter the windows. Judging by final step makes the result
// independent of arrival timing: the same reports in one burst judge as they do paced.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/time.h"
#include "health/step_history.h"

namespace shepherd {

struct LossIncident {
  bool open = false;
  bool reported = false;  // a finding was emitted for this opening
  // Opened since the last JobMonitor::Evaluate and not yet reported, even if it closed again in between
  // (a burst of reports): reopening it before then merges into it (the earliest onset is kept).
  bool pending = false;
  int64_t onset_step = 0;
  int64_t last_step = 0;  // latest step showing the anomaly
  Time detected_at{};
  Time onset_at{};  // when the onset step was first reported (daemon clock)
  double value = 0;        // the anomalous value first seen (job-level loss, or grad norm)
  double reference = 0;    // threshold T (loss) or rolling max (grad norm) at detection
  std::vector<int> ranks;  // reporting ranks, ascending, at most kMaxRanks
  static constexpr size_t kMaxRanks = 64;
};

class LossMonitor {
 public:
  static constexpr int kHistory = 32;
  static constexpr int kMinHistory = 5;
  static constexpr double kGradSpikeFactor = 10;
  static constexpr double kMadScale = 1.4826;  // MAD × this estimates σ for normal noise
  static constexpr double kMadK = 6;           // robust z-score of a spike
  static constexpr double kLrRiseFactor = 2;

  LossMonitor(double loss_spike_factor, int divergence_steps)
      : factor_(loss_spike_factor), divergence_steps_(divergence_steps) {}

  // Returns true when this report opened an incident (including by finalizing the previous step).
  // `step_time_s` is only recorded (its median per final step goes to history()); it judges nothing.
  bool OnStep(int rank, int64_t step, std::optional<double> loss, std::optional<double> grad_norm,
              std::optional<double> lr, Time now, std::optional<double> step_time_s = std::nullopt);

  const LossIncident& nonfinite() const { return nonfinite_; }
  const LossIncident& spike() const { return spike_; }
  const LossIncident& divergence() const { return divergence_; }
  const LossIncident& grad_spike() const { return grad_spike_; }
  LossIncident& mutable_nonfinite() { return nonfinite_; }
  LossIncident& mutable_spike() { return spike_; }
  LossIncident& mutable_divergence() { return divergence_; }
  LossIncident& mutable_grad_spike() { return grad_spike_; }

  std::optional<double> last_loss() const { return last_loss_; }  // job-level loss of the last final step
  std::optional<double> rolling_median() const;  // of final steps' losses; nullopt before kMinHistory
  std::optional<double> rolling_mad() const;
  std::optional<double> threshold() const;  // T; nullopt before kMinHistory or when m <= 0
  std::optional<double> rolling_grad_max() const;
  int64_t last_final_step() const { return last_final_step_; }
  int run_steps() const { return run_len_; }                  // consecutive final steps above T, up to now
  std::optional<double> last_lr() const { return last_lr_; }  // of the last final step that had one
  int64_t baseline_since_step() const { return baseline_since_; }  // the last LR rise's step; -1: none
  // The last StepHistory::kCapacity final steps: job-level loss, median step time, when final.
  const StepHistory& history() const { return history_; }
  // Step times kept per open step for its median; a larger world's further ones are not sampled.
  static constexpr size_t kMaxStepTimeSamples = 4096;

 private:
  struct Window {
    std::array<double, kHistory> v{};
    int count = 0, head = 0;
    void Push(double x);
  };
  struct OpenStep {
    int64_t step = -1;
    double loss_sum = 0;
    int loss_count = 0;
    std::optional<double> grad_max;  // finite grad norms
    std::optional<double> lr;        // the largest reported
    std::optional<double> grad_spike_value;
    bool nonfinite = false;
    std::vector<int> ranks;       // reporting ranks, ascending, at most LossIncident::kMaxRanks
    std::vector<int> grad_ranks;  // ranks whose grad norm spiked
    std::vector<float> step_times;  // reported step_time_s, at most kMaxStepTimeSamples
    Time first_seen{};              // the step's first report
  };
  bool Finalize(Time now);
  void RestartBaseline(int64_t step);
  static bool Open(LossIncident& inc, const std::vector<int>& ranks, int64_t onset, Time onset_at,
                   int64_t step, double value, double reference, Time now);

  double factor_;
  int divergence_steps_;
  Window losses_, grads_;
  double median_ = 0, mad_ = 0, threshold_ = 0, grad_max_ = 0;  // cached at each Finalize
  OpenStep open_;
  int64_t last_final_step_ = -1;
  std::optional<double> last_loss_, last_lr_;
  int64_t baseline_since_ = -1;
  int run_len_ = 0;
  int64_t run_start_ = 0;
  Time run_start_at_{};  // when run_start_ was first reported
  std::vector<int> run_ranks_;
  double run_value_ = 0;
  LossIncident nonfinite_, spike_, divergence_, grad_spike_;
  StepHistory history_;
};

}  // namespace shepherd
