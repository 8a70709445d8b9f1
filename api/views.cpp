#include "api/views.h"

#include <algorithm>

namespace shepherd {

Json RenderNode(const NodeView& v) {
  Json j = ToJson(v.node);
  j["state"] = ToString(v.state);
  j["allocated_gpus"] = v.allocated_gpus;
  j["jobs"] = v.jobs;
  Json unknown = Json::array();
  for (const UnknownProcess& u : v.unknown_processes) {
    Json e = {{"job", u.rank.job},
              {"attempt", u.rank.attempt},
              {"rank", u.rank.rank},
              {"first_seen", FormatRfc3339(u.first_seen)},
              {"decision", u.stopping ? "stop" : "keep"}};
    if (u.pid > 0) e["pid"] = u.pid;
    unknown.push_back(std::move(e));
  }
  j["unknown_processes"] = std::move(unknown);
  return j;
}

Json RenderNodeList(const NodeList& list) {
  Json items = Json::array();
  for (const NodeView& v : list.nodes) items.push_back(RenderNode(v));
  Json by_state = Json::object();
  for (const auto& [state, n] : list.by_state) by_state[ToString(state)] = n;
  Json deficits = Json::array();
  for (const auto& d : list.spare_deficits)
    deficits.push_back({{"level", d.level}, {"label", d.label}, {"have", d.have}, {"want", d.want}});
  return {{"nodes", std::move(items)},
          {"summary",
           {{"nodes", list.total},
            {"by_state", std::move(by_state)},
            {"usable_gpus", list.usable_gpus},
            {"free_usable_gpus", list.free_usable_gpus},
            {"spare_deficits", std::move(deficits)}}}};
}

Json RenderJob(const JobView& e) {
  Json j = ToJson(e.job);  // the stored record, plus what the API shows besides
  j.erase("seq");
  j["name"] = e.job.spec.name;
  j["estimate"] = ToJson(e.estimate);
  // The layers per stage are always listed (docs/api.md): a plan that left them to the default balance
  // shows the stages the planner counted.
  if (e.job.plan.pipeline_layers.empty())
    j["plan"]["pipeline_layers"] = j["estimate"]["plan"]["pipeline_layers"];
  if (e.attempt) {
    j["current_attempt"] = {{"number", e.attempt->number},
                            {"started_at", FormatRfc3339(e.attempt->started_at)},
                            {"reason", e.attempt->reason},
                            {"resume_checkpoint", e.attempt->resume_checkpoint},
                            {"resume_step", e.attempt->resume_step}};
    if (e.attempt->ended_at) j["current_attempt"]["ended_at"] = FormatRfc3339(*e.attempt->ended_at);
    // The goodput marks, each when known (as the attempt record has them, core/json.cpp).
    const Attempt& a = *e.attempt;
    Json& cur = j["current_attempt"];
    if (a.first_step_at) cur["first_step_at"] = FormatRfc3339(*a.first_step_at);
    if (a.last_step_at) {
      cur["last_step_at"] = FormatRfc3339(*a.last_step_at);
      cur["last_step"] = a.last_step;
    }
    if (a.load_s > 0) cur["load_s"] = a.load_s;
    if (a.save_s > 0) cur["save_s"] = a.save_s;
    if (a.not_before) cur["not_before"] = FormatRfc3339(*a.not_before);
    if (!a.ended_by.empty()) cur["ended_by"] = a.ended_by;
  }
  // `launch.mode` comes with the record; the launch's progress is added beside it.
  Json& launch = j["launch"];
  if (e.launch) {
    launch["status"] = e.launch->nodes_without_agent.empty() ? "starting" : "waiting_for_agents";
    launch["nodes_waiting"] = e.launch->nodes_waiting;
    launch["nodes_without_agent"] = e.launch->nodes_without_agent;
    launch["since"] = FormatRfc3339(e.launch->since);
  } else if (e.job.state == JobState::kRunning) {
    launch["status"] = "launched";
  }
  if (e.rank_token) j["rank_token"] = *e.rank_token;  // submit answer of another launcher's job only
  if (e.slurm_allocation) {
    const SlurmAllocationRecord& a = *e.slurm_allocation;
    Json spares = Json::array();
    for (const std::string& n : a.nodes) {
      bool placed =
          e.attempt && std::any_of(e.attempt->placement.ranks.begin(), e.attempt->placement.ranks.end(),
                                   [&](const RankSlot& r) { return r.node == n; });
      if (!placed) spares.push_back(n);
    }
    j["slurm_allocation"] = {{"id", a.id},
                             {"state", ToString(a.state)},
                             {"nodes", a.nodes},
                             {"spares", std::move(spares)},
                             {"adopted", a.adopted}};
  }
  return j;
}

std::string RenderPlacement(const PlacementView& v) {
  Json quality = nullptr;
  if (v.quality)
    quality = {{"tp_groups_split", v.quality->tp_groups_split},
               {"cross_leaf_edges", v.quality->cross_leaf_edges},
               {"cross_spine_edges", v.quality->cross_spine_edges},
               {"cross_leaf_bytes_per_step", v.quality->cross_leaf_bytes_per_step},
               {"cross_spine_bytes_per_step", v.quality->cross_spine_bytes_per_step}};
  // Node ids are validated ([A-Za-z0-9._-]) and need no escaping.
  std::string out = "{\"attempt\":" + std::to_string(v.attempt) + ",\"state\":\"" + ToString(v.state) +
                    "\",\"quality\":" + quality.dump() + ",\"ranks\":[";
  out.reserve(out.size() + v.placement->ranks.size() * 72);
  for (const RankSlot& r : v.placement->ranks) {
    if (out.back() != '[') out += ',';
    out += "{\"rank\":" + std::to_string(r.rank) + ",\"node\":\"" + r.node +
           "\",\"gpu\":" + std::to_string(r.gpu) + ",\"tp\":" + std::to_string(r.tp) +
           ",\"pp\":" + std::to_string(r.pp) + ",\"dp\":" + std::to_string(r.dp) + "}";
  }
  out += "]}";
  return out;
}

Json RenderIngest(const IngestSummary& s) {
  Json rejected = Json::array();
  for (const auto& r : s.rejected) rejected.push_back({{"index", r.index}, {"error", r.error}});
  return {{"accepted", s.accepted}, {"rejected", std::move(rejected)}, {"ignored", s.ignored}};
}

Json RenderCheckpoints(const CheckpointList& c) {
  Json items = Json::array();
  for (const Checkpoint& x : c.checkpoints) items.push_back(ToJson(x));
  return {{"checkpoints", std::move(items)},
          {"last_known_good", c.last_known_good ? Json(*c.last_known_good) : Json(nullptr)}};
}

Json RenderFailures(const std::vector<Finding>& fs) {
  Json items = Json::array();
  for (const Finding& f : fs) items.push_back(ToJson(f));
  return {{"failures", std::move(items)}};
}

Json RenderRestart(const RestartOutcome& r) {
  return {{"attempt", r.attempt},
          {"state", ToString(r.state)},
          {"checkpoint", r.checkpoint ? ToJson(*r.checkpoint) : Json(nullptr)}};
}

Json RenderAssignments(const Assignments& a) {
  Json ranks = Json::array();
  for (const RankAssignment& r : a.ranks) {
    Json rank = {{"job", r.rank.job}, {"attempt", r.rank.attempt}, {"rank", r.rank.rank},
                 {"gpu", r.gpu},      {"command", r.command},      {"env", r.env}};
    if (!r.run_as.empty()) rank["run_as"] = r.run_as;
    ranks.push_back(std::move(rank));
  }
  Json keep = Json::array();
  for (const RankRef& r : a.keep) keep.push_back({{"job", r.job}, {"attempt", r.attempt}, {"rank", r.rank}});
  return {{"version", a.version}, {"ranks", std::move(ranks)}, {"keep", std::move(keep)}};
}

Json RenderHeartbeatAck(const HeartbeatAck& a) {
  Json acks = Json::array();
  for (const RankRef& r : a.ack_exits)
    acks.push_back({{"job", r.job}, {"attempt", r.attempt}, {"rank", r.rank}});
  return {{"ack_exits", std::move(acks)},
          {"assignments_version", a.assignments_version},
          {"lease_s", a.lease_s},
          {"reports_accepted", a.reports_accepted},
          {"reports_rejected", a.reports_rejected}};
}

}  // namespace shepherd
