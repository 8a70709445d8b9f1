// The wrapper's side of the launch-order fence (slurm/step_order.h, docs/slurm.md "One step per attempt"):
// asks the control plane, through every endpoint of SHEPHERD_URL and following leadership (307 to the
// leader, the next endpoint on 503 or a transport error), whether the step's launch order is still the
// attempt's current one, until a leader answers or the question's timeout passes.
// Blocking; run by `shepherd-slurm-rank` on its only thread before it execs the rank's command.
#pragma once

#include <string>

#include "slurm/step_order.h"

namespace shepherd::slurm {

struct FenceOutcome {
  OrderVerdict verdict = OrderVerdict::kRetry;  // kRetry here: the timeout passed without an answer
  std::string detail;                           // for the wrapper's message on stderr
};
FenceOutcome AskOrder(const OrderQuestion& q);

}  // namespace shepherd::slurm
