// Durable records of the control layer's domain values (storage/store.h collections; bodies are the JSON
// of core/json.h). One definition per record kind, shared by every owner that persists.
#pragma once

#include <optional>
#include <string>

#include "core/job.h"
#include "core/json.h"
#include "core/node.h"
#include "planner/planner.h"
#include "storage/store.h"

namespace shepherd {

inline Record NodeRecord(const Node& n) {
  return {Collection::kNodes, n.id, "", ToJson(n).dump()};
}
// `plan_explanation`: the planner's answer at submission (an auto search's candidates), which evaluating
// the stored plan again on restore cannot give; `planned_for`: the inventory-derived hardware it was
// evaluated for (GPU memory, NVLink domain), so the restored estimate is the one answered, whatever the
// inventory has become (or has been read of so far).
inline Record JobRecord(const Job& j, const PlanEstimate& estimate) {
  Json body = ToJson(j);
  body["plan_explanation"] = estimate.explanation;
  body["planned_for"] = {{"gpu_memory_bytes", estimate.gpu_memory_bytes},
                         {"nvlink_domain_gpus", estimate.nvlink_domain_gpus}};
  return {Collection::kJobs, j.id, j.id, body.dump()};
}
inline Record AttemptRecord(const Attempt& a) {
  return {Collection::kAttempts, a.job + "/" + std::to_string(a.number), a.job, ToJson(a).dump()};
}
inline Record CheckpointRecord(const Checkpoint& c) {
  return {Collection::kCheckpoints, c.id, c.job, ToJson(c).dump()};
}
// A rank's part of a pending checkpoint (CheckpointTransition::part), kept until the checkpoint leaves
// pending, so a restart knows which ranks reported.
struct CheckpointPart {
  std::string job;
  int attempt = 0;
  int64_t step = 0;
  int rank = 0;
};
inline std::string CheckpointPartKey(const std::string& checkpoint_id, int rank) {
  return "checkpoint_part/" + checkpoint_id + "/" + std::to_string(rank);
}
inline Record CheckpointPartRecord(const Checkpoint& c, int rank) {
  return {Collection::kMeta, CheckpointPartKey(c.id, rank), c.job,
          Json{{"job", c.job}, {"attempt", c.attempt}, {"step", c.step}, {"rank", rank}}.dump()};
}
// nullopt: not a part record; an error: a part record that does not decode.
inline std::optional<Result<CheckpointPart>> DecodeCheckpointPart(const Record& r) {
  if (r.collection != Collection::kMeta || r.key.rfind("checkpoint_part/", 0) != 0) return std::nullopt;
  Json j = Json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("job") || !j["job"].is_string() || !j.contains("attempt") ||
      !j["attempt"].is_number_integer() || !j.contains("step") || !j["step"].is_number_integer() ||
      !j.contains("rank") || !j["rank"].is_number_integer())
    return Result<CheckpointPart>(InvalidArgument("a checkpoint part needs job, attempt, step and rank"));
  return Result<CheckpointPart>(CheckpointPart{j["job"].get<std::string>(), j["attempt"].get<int>(),
                                               j["step"].get<int64_t>(), j["rank"].get<int>()});
}
inline Record FindingRecord(const Finding& f) {
  return {Collection::kFindings, f.id, f.job, ToJson(f).dump()};
}
// The daemon's start count on this database: assignment versions derive from it (AgentBoard::SetEpoch).
// The daemon's start count, and the agent lease it grants (a later start honours the longer of its own lease
// and this one for agents it has not heard yet: a lease lowered across a restart).
inline Record EpochRecord(int64_t epoch, double agent_lease_s) {
  return {Collection::kMeta, "epoch", "", Json{{"epoch", epoch}, {"agent_lease_s", agent_lease_s}}.dump()};
}

}  // namespace shepherd
