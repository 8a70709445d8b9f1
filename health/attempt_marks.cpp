#include "health/attempt_marks.h"

#include <algorithm>

namespace shepherd {
namespace {

bool IsCheckpointPhase(Phase p) {
  return p == Phase::kCheckpointSave || p == Phase::kCheckpointLoad;
}

}  // namespace

void Coverage::Add(Time start, Time end) {
  if (end <= start) return;
  if (any_ && start <= block_end_ && end >= block_start_) {  // overlaps (or touches) the latest block
    const Time s = std::min(start, block_start_), e = std::max(end, block_end_);
    seconds_ += ToSeconds((e - s) - (block_end_ - block_start_));
    block_start_ = s;
    block_end_ = e;
    return;
  }
  seconds_ += ToSeconds(end - start);
  if (!any_ || start > block_end_) {  // a later block; an earlier one leaves the latest in place
    block_start_ = start;
    block_end_ = end;
    any_ = true;
  }
}

AttemptMarks::AttemptMarks(int world_size, double max_report_lag_s, const Attempt* restored)
    : world_size_(world_size), max_lag_s_(max_report_lag_s) {
  if (!restored) return;
  first_step_at_ = restored->first_step_at;
  last_step_at_ = restored->last_step_at;
  last_step_ = restored->last_step;
  restored_load_s_ = restored->load_s;
  restored_save_s_ = restored->save_s;
}

void AttemptMarks::Count(Phase phase, Time start, Time end, Coverage* load, Coverage* save) const {
  if (phase == Phase::kCheckpointSave) {
    save->Add(start, end);
  } else if (!first_step_at_ || start < *first_step_at_) {
    load->Add(start, end);  // loads after the first step are not the attempt's start-up
  }
}

void AttemptMarks::Close(RankPhase& p, Time end_rank, Time now) {
  double length = std::max(0.0, ToSeconds(end_rank - p.since_rank));
  length = std::min(length, std::max(0.0, ToSeconds(now - p.since_daemon)) + max_lag_s_);
  Count(p.phase, p.since_daemon, p.since_daemon + Seconds(length), &load_, &save_);
  p.since_daemon = Time{};
  p.phase = Phase::kUnspecified;
}

void AttemptMarks::OnReport(const Report& r, Time now) {
  if (r.kind == ReportKind::kStep && r.step) {
    if (!first_step_at_) first_step_at_ = now;
    if (!last_step_at_ || *r.step >= last_step_) {
      last_step_at_ = now;
      last_step_ = *r.step;
    }
  }
  if (r.rank < 0 || r.rank >= world_size_) return;
  const bool heartbeat = r.kind == ReportKind::kHeartbeat || r.kind == ReportKind::kSummary;  // a summary is one too
  if (phases_.empty()) {
    if (!heartbeat || !IsCheckpointPhase(r.phase)) return;  // nothing open anywhere, nothing opens
    phases_.resize(world_size_);
  }
  RankPhase& p = phases_[r.rank];
  // Which phase this report says the rank is in: a heartbeat says it (none: training); a step or `finished`
  // says training; other kinds say nothing.
  std::optional<Phase> says;
  if (heartbeat)
    says = r.phase;
  else if (r.kind == ReportKind::kStep || r.kind == ReportKind::kFinished)
    says = Phase::kTrain;
  const bool open = p.since_daemon != Time{};
  if (open) p.last_seen = now;
  if (r.time < p.last_rank) return;  // stale: sent before the rank's newest phase change, delivered after
  if (!says || (open && *says == p.phase)) return;
  if (open) Close(p, r.time, now);
  if (IsCheckpointPhase(*says)) {
    p.phase = *says;
    p.since_daemon = p.last_seen = now;
    p.since_rank = r.time;
  }
  p.last_rank = std::max(p.last_rank, r.time);
}

MarksSnapshot AttemptMarks::Quick() const {
  return {first_step_at_, last_step_at_, last_step_, restored_load_s_ + load_.seconds(),
          restored_save_s_ + save_.seconds()};
}

MarksSnapshot AttemptMarks::Snapshot() const {
  Coverage load = load_, save = save_;  // open phases close at each rank's last report
  for (const RankPhase& p : phases_)
    if (p.since_daemon != Time{})
      Count(p.phase, p.since_daemon, std::max(p.since_daemon, p.last_seen), &load, &save);
  return {first_step_at_, last_step_at_, last_step_, restored_load_s_ + load.seconds(),
          restored_save_s_ + save.seconds()};
}

void AttemptMarks::Apply(const MarksSnapshot& m, Attempt* a) {
  a->first_step_at = m.first_step_at;
  a->last_step_at = m.last_step_at;
  a->last_step = m.last_step;
  a->load_s = m.load_s;
  a->save_s = m.save_s;
}

}  // namespace shepherd
