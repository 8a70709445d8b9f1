// The Controller's read-only facts for /metrics (control/controller.h).
#include "control/controller.h"

namespace shepherd {

void Controller::VisitJobMetrics(Time ended_since,
                                 const std::function<void(const JobMetrics&)>& visit) const {
  for (const auto& [id, e] : jobs_.all()) {
    if (IsTerminal(e.job.state) && e.job.updated_at < ended_since) continue;
    JobMetrics m;
    m.job = &e.job;
    if (auto h = health_.find(id); h != health_.end()) {
      m.last_step = h->second->LatestStep();
      m.step_time_s = h->second->StepTimeSeconds();
    }
    if (auto r = restart_causes_.find(id); r != restart_causes_.end()) m.restarts = &r->second;
    visit(m);
  }
}

Controller::FleetFacts Controller::Fleet() const {
  FleetFacts f;
  f.by_state = inventory_.by_state();
  const Cluster& c = inventory_.cluster();
  for (int i = 0; i < c.size(); ++i)
    if (c.node(i).spare) ++f.spare_nodes;
  return f;
}

}  // namespace shepherd
