// The control view's records for goodput accounting (control/control_view.h): the job, its attempts (earlier
// ones kept without their ranks), its checkpoints and the findings its attempts' ends name.
#include "control/control_view.h"

namespace shepherd {
namespace {

// Fills `out` from `e` (out's vectors are reused).
void Fill(const JobEntry& e, const FindingLog& findings, const JobHealth* health, bool with_checkpoints,
          ControlView::GoodputRecords* out) REQUIRES_SHARED(kControl) {
  out->job = &e.job;
  out->attempts.clear();
  out->sizes.clear();
  out->checkpoints.clear();
  out->findings.clear();
  for (const PastAttempt& p : e.earlier) {
    out->attempts.push_back(p.attempt);
    out->sizes.push_back(p.size);
  }
  if (e.attempt) {
    // The current attempt without its ranks: only their count matters here, and it is in attempt_size.
    Attempt a;
    a.job = e.attempt->job;
    a.number = e.attempt->number;
    a.started_at = e.attempt->started_at;
    a.ended_at = e.attempt->ended_at;
    a.resume_checkpoint = e.attempt->resume_checkpoint;
    a.resume_step = e.attempt->resume_step;
    a.first_step_at = e.attempt->first_step_at;
    a.last_step_at = e.attempt->last_step_at;
    a.last_step = e.attempt->last_step;
    a.load_s = e.attempt->load_s;
    a.save_s = e.attempt->save_s;
    a.not_before = e.attempt->not_before;
    a.ended_by = e.attempt->ended_by;
    out->attempts.push_back(std::move(a));
    out->sizes.push_back(e.attempt_size);
  }
  for (const Attempt& a : out->attempts) {
    const Finding* f = findings.Find(e.job.id, a.ended_by);
    if (!f) continue;
    auto known = [&](const std::string& id) {
      for (const Finding& x : out->findings)
        if (x.id == id) return true;
      return false;
    };
    if (!known(f->id)) out->findings.push_back(*f);
    if (!f->incident.empty() && f->incident != f->id && !known(f->incident))
      if (const Finding* root = findings.Find(e.job.id, f->incident)) out->findings.push_back(*root);
  }
  if (with_checkpoints && health) out->checkpoints = health->ledger().All();
}

}  // namespace

Result<ControlView::GoodputRecords> ControlView::GetGoodputRecords(const std::string& id) const {
  const JobEntry* e = jobs().Find(id);
  if (!e) return NotFound("no job " + id);
  GoodputRecords out;
  Fill(*e, findings(), HealthOf(id), true, &out);
  return out;
}

void ControlView::VisitGoodputRecords(Time ended_since, bool with_checkpoints,
                                      const std::function<void(const GoodputRecords&)>& visit) const {
  GoodputRecords r;
  for (const auto& [id, e] : jobs().all()) {
    if (IsTerminal(e.job.state) && e.job.updated_at < ended_since) continue;
    Fill(e, findings(), HealthOf(id), with_checkpoints, &r);
    visit(r);
  }
}

}  // namespace shepherd
