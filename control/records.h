// Durable records of the control layer's domain values (storage/store.h collections; bodies are the JSON
// of core/json.h). One definition per record kind, shared by every owner that persists.
#pragma once

#include "core/job.h"
#include "core/json.h"
#include "core/node.h"
#include "storage/store.h"

namespace shepherd {

inline Record NodeRecord(const Node& n) {
  return {Collection::kNodes, n.id, "", ToJson(n).dump()};
}
// `plan_explanation`: the planner's answer at submission (an auto search's candidates), which evaluating
// the stored plan again on restore cannot give.
inline Record JobRecord(const Job& j, const std::string& plan_explanation) {
  Json body = ToJson(j);
  body["plan_explanation"] = plan_explanation;
  return {Collection::kJobs, j.id, j.id, body.dump()};
}
inline Record AttemptRecord(const Attempt& a) {
  return {Collection::kAttempts, a.job + "/" + std::to_string(a.number), a.job, ToJson(a).dump()};
}
inline Record CheckpointRecord(const Checkpoint& c) {
  return {Collection::kCheckpoints, c.id, c.job, ToJson(c).dump()};
}
inline Record FindingRecord(const Finding& f) {
  return {Collection::kFindings, f.id, f.job, ToJson(f).dump()};
}
// The daemon's start count on this database: assignment versions derive from it (AgentBoard::SetEpoch).
inline Record EpochRecord(int64_t epoch) {
  return {Collection::kMeta, "epoch", "", Json{{"epoch", epoch}}.dump()};
}

}  // namespace shepherd
