// What a JobMonitor learned that bears on checkpoint validity. JobMonitor::TakeEvidence() hands these to
// the job's CheckpointLedger (the controller forwards them; health/ keeps no cross-object pointers).
#pragma once

#include <cstdint>
#include <string>

namespace shepherd {

struct HealthEvidence {
  enum class Kind {
    kHashAgreed,      // every replica set agreed on the parameters at `step` (complete check)
    kHashMismatch,    // some replica set disagreed at `step`
    kAnomaly,         // an anomaly that warrants recovery (nonfinite_loss, loss_divergence,
                      // grad_norm_spike) with onset `step`; a one-step loss_spike is not one
    kHealthyThrough,  // every rank passed `step`, before any open anomaly's onset (SDC: the last agreement)
  };
  Kind kind = Kind::kHealthyThrough;
  int attempt = 0;
  int64_t step = 0;
  std::string what;  // finding kind for anomalies, for the checkpoint's reason
};

}  // namespace shepherd
