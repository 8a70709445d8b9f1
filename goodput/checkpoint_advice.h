// Checkpoint cadence advice: the interval between checkpoints that loses the least time to saves and
// redone work, from the save cost δ and the mean time between interruptions M of a job's size.
// Pure functions; docs/goodput.md gives the formulas and their sources.
//
// Daly's higher-order optimum (J. T. Daly, "A higher order estimate of the optimum checkpoint interval
// for restart dumps", FGCS 22, 2006), for δ < 2M:
//     τ_opt = sqrt(2 δ M) · [1 + (1/3)·sqrt(δ / (2M)) + (1/9)·(δ / (2M))] − δ
// and τ_opt = M when δ ≥ 2M. Young's first-order form is sqrt(2 δ M).
// Expected ETTR at interval τ (compute time between saves), restart cost R (detection + recovery + load),
// exponential interruptions with mean M (Daly's expected wall time for a solve of length T_s):
//     T_w = M · e^{R/M} · (e^{(τ+δ)/M} − 1) · T_s / τ,   ETTR = T_s / T_w
#pragma once

#include <optional>

namespace shepherd {

// Llama 3 405B's published interruption rate (Dubey et al., "The Llama 3 Herd of Models", 2024, §3.3.4):
// 419 unexpected interruptions in 54 days on 16,384 GPUs (2,048 nodes of 8): per node-hour.
inline constexpr double kLlama3InterruptionsPerNodeHour = 419.0 / (2048.0 * 54.0 * 24.0);

struct AdviceInput {
  double save_s = 0;                  // δ: seconds training waits on one checkpoint save (> 0)
  double restart_s = 0;               // R: seconds from a fault to training again, less reloading (>= 0)
  double load_s = 0;                  // seconds to load a checkpoint on restart (>= 0), added to R
  double nodes = 0;                   // nodes the job holds (> 0)
  double interruptions_per_node_hour = kLlama3InterruptionsPerNodeHour;  // (> 0)
  std::optional<double> current_interval_s;  // the job's cadence now (seconds of training between saves)
};

struct CheckpointAdvice {
  double interval_s = 0;   // Daly's optimum τ
  double young_interval_s = 0;
  std::optional<double> current_interval_s;
  std::optional<double> ettr_now;  // at current_interval_s
  double ettr_advised = 0;         // at interval_s
  double mtbf_s = 0;               // M = 3600 / (nodes · rate)
  AdviceInput inputs;
};

// Daly's optimum interval; REQUIRES save_s > 0, mtbf_s > 0.
double DalyInterval(double save_s, double mtbf_s);
// Expected ETTR of periodic checkpointing at interval_s (Daly's model above); REQUIRES all > 0 but restart.
double ExpectedEttr(double interval_s, double save_s, double restart_s, double mtbf_s);
// REQUIRES the AdviceInput bounds above (the API edge checks them).
CheckpointAdvice AdviseCheckpoints(const AdviceInput& in);

}  // namespace shepherd
