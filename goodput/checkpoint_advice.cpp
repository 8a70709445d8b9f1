#include "goodput/checkpoint_advice.h"

#include <cmath>

namespace shepherd {

double DalyInterval(double save_s, double mtbf_s) {
  if (save_s >= 2 * mtbf_s) return mtbf_s;
  const double x = save_s / (2 * mtbf_s);
  return std::sqrt(2 * save_s * mtbf_s) * (1 + std::sqrt(x) / 3 + x / 9) - save_s;
}

double ExpectedEttr(double interval_s, double save_s, double restart_s, double mtbf_s) {
  // T_w / T_s = M · e^{R/M} · (e^{(τ+δ)/M} − 1) / τ. expm1 keeps precision when τ+δ ≪ M.
  const double wall_per_work = mtbf_s * std::exp(restart_s / mtbf_s) *
                               std::expm1((interval_s + save_s) / mtbf_s) / interval_s;
  return 1 / wall_per_work;
}

CheckpointAdvice AdviseCheckpoints(const AdviceInput& in) {
  CheckpointAdvice a;
  a.inputs = in;
  a.mtbf_s = 3600 / (in.nodes * in.interruptions_per_node_hour);
  const double restart = in.restart_s + in.load_s;
  a.interval_s = DalyInterval(in.save_s, a.mtbf_s);
  a.young_interval_s = std::sqrt(2 * in.save_s * a.mtbf_s);
  a.ettr_advised = ExpectedEttr(a.interval_s, in.save_s, restart, a.mtbf_s);
  a.current_interval_s = in.current_interval_s;
  if (in.current_interval_s && *in.current_interval_s > 0)
    a.ettr_now = ExpectedEttr(*in.current_interval_s, in.save_s, restart, a.mtbf_s);
  return a;
}

}  // namespace shepherd
