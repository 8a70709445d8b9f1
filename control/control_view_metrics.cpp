// The control view's read-only facts for /metrics (control/control_view.h).
#include "control/control_view.h"

namespace shepherd {

void ControlView::VisitJobMetrics(Time ended_since,
                                  const std::function<void(const JobMetrics&)>& visit) const {
  for (const auto& [id, e] : jobs().all()) {
    if (IsTerminal(e.job.state) && e.job.updated_at < ended_since) continue;
    JobMetrics m;
    m.job = &e.job;
    if (const JobHealth* h = HealthOf(id)) {
      m.last_step = h->LatestStep();
      m.step_time_s = h->StepTimeSeconds();
    }
    if (auto r = s_.restart_causes->find(id); r != s_.restart_causes->end()) m.restarts = &r->second;
    visit(m);
  }
}

ControlView::FleetFacts ControlView::Fleet() const {
  FleetFacts f;
  f.by_state = inventory().by_state();
  const Cluster& c = inventory().cluster();
  for (int i = 0; i < c.size(); ++i)
    if (c.node(i).spare) ++f.spare_nodes;
  return f;
}

}  // namespace shepherd
