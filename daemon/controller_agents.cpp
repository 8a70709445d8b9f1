// Controller: node agents (docs/agent-protocol.md): heartbeats, rank exits, GPU faults, node liveness and
// the long-polled desired rank set of each node.
#include <spdlog/spdlog.h>

#include "daemon/controller.h"
#include "scheduler/rank_env.h"

namespace shepherd {
namespace {

int MasterPort(int64_t job_seq, int attempt) {
  // Fresh per attempt, so a restarted rendezvous never meets the old one's sockets.
  return 20000 + static_cast<int>((job_seq * 7919 + attempt * 104729) % 20000);
}

Finding NodeFinding(const std::string& job, int attempt, const char* kind, const std::string& node, Time now,
                    std::string detail) {
  Finding f;
  f.job = job;
  f.attempt = attempt;
  f.kind = kind;
  f.nodes = {node};
  f.detected_at = now;
  f.detail = std::move(detail);
  return f;
}

}  // namespace

Json Controller::AssignmentsJson(const std::string& node) const {
  Json ranks = Json::array();
  for (const std::string& job_id : cluster_.JobsOn(node)) {
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) continue;
    const JobEntry& e = it->second;
    if (!e.attempt || !e.launched || e.job.state != JobState::kRunning || e.job.spec.command.empty())
      continue;
    const Placement& p = e.attempt->placement;
    const Node* master = cluster_.Find(p.ranks.at(0).node);
    RankEnvInput in;
    in.job_id = e.job.id;
    in.spec = &e.job.spec;
    in.plan = e.job.plan;
    in.attempt = e.attempt->number;
    in.placement = &p;
    in.node = node;
    in.master_addr = master ? master->hostname : "127.0.0.1";
    in.master_port = MasterPort(e.job.seq, e.attempt->number);
    if (e.ledger && !e.attempt->resume_checkpoint.empty())
      if (auto c = e.ledger->Find(e.attempt->resume_checkpoint)) in.resume_path = c->path;
    in.resume_step = e.attempt->resume_step;
    for (LocalRankEnv& r : ComposeRankEnv(in, {options_.advertise_url, options_.rank_token})) {
      Json env = std::move(r.env);
      ranks.push_back({{"job", e.job.id},
                       {"attempt", e.attempt->number},
                       {"rank", r.rank},
                       {"gpu", r.gpu},
                       {"command", e.job.spec.command},
                       {"env", std::move(env)}});
    }
  }
  auto v = assignment_versions_.find(node);
  return {{"version", v == assignment_versions_.end() ? 0 : v->second}, {"ranks", std::move(ranks)}};
}

void Controller::BumpAssignments(const std::string& node) {
  ++assignment_versions_[node];
  auto it = waiters_.find(node);
  if (it == waiters_.end()) return;
  std::vector<Waiter> ws = std::move(it->second);
  waiters_.erase(it);
  Json answer = AssignmentsJson(node);
  for (Waiter& w : ws) w.done(answer);
}

void Controller::BumpAssignments(const Placement& placement) {
  std::set<std::string> nodes;
  for (const RankSlot& r : placement.ranks) nodes.insert(r.node);
  for (const std::string& n : nodes) BumpAssignments(n);
}

void Controller::ReleaseWaiters() {
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& [node, ws] : waiters) {
    Json answer = AssignmentsJson(node);
    for (Waiter& w : ws) w.done(answer);
  }
}

void Controller::WatchAssignments(const std::string& node, int64_t known, Time deadline, Done<Json> done) {
  if (!ready()) return done(Unavailable("the daemon is not ready"));
  if (!cluster_.Find(node)) return done(NotFound("no node " + node));
  auto v = assignment_versions_.find(node);
  int64_t version = v == assignment_versions_.end() ? 0 : v->second;
  if (version != known || deadline <= clock_->Now()) return done(AssignmentsJson(node));
  waiters_[node].push_back({known, deadline, std::move(done)});
}

void Controller::NodeHeartbeat(const std::string& node_id, const Json& body, Done<Json> done) {
  if (Status s = CheckWritable(); !s.ok()) return done(s);
  const Node* node = cluster_.Find(node_id);
  if (!node) return done(NotFound("no node " + node_id + "; register it first"));
  Time now = clock_->Now();
  WriteBatch batch;
  AgentState& agent = agents_[node_id];
  agent.last_heartbeat = now;
  if (agent.lost) spdlog::info("agent of node {} is back", node_id);
  agent.lost = false;
  if (!node->agent_attached) {
    Node n = *node;
    n.agent_attached = true;
    n.updated_at = now;
    (void)cluster_.UpsertNode(n);
    batch.Put(NodeRecord(n));
  }
  Json acks = Json::array();
  agent.running.clear();
  const Json* procs =
      body.contains("processes") && body["processes"].is_array() ? &body["processes"] : nullptr;
  for (const Json& p : procs ? *procs : Json::array()) {
    std::string job = p["job"];
    int attempt = p["attempt"], rank = p["rank"];
    if (p.value("state", "running") == "running") {
      agent.running.emplace_back(job, attempt);
      continue;
    }
    acks.push_back({{"job", job}, {"attempt", attempt}, {"rank", rank}});
    auto it = jobs_.find(job);
    if (it == jobs_.end() || !it->second.attempt || it->second.attempt->number != attempt ||
        it->second.job.state != JobState::kRunning)
      continue;  // an old attempt's rank, stopped on purpose
    JobEntry& e = it->second;
    bool ok = p.contains("exit_code") && p["exit_code"].is_number_integer() && p["exit_code"] == 0;
    if (ok) {
      e.exited_ok[rank] = true;
      if (static_cast<int>(e.exited_ok.size()) == e.job.plan.world_size()) {
        e.job.state = JobState::kSucceeded;
        e.job.reason = "every rank exited 0";
        sdc_history_.Forget(e.job.id);
        e.job.updated_at = now;
        EndAttempt(e, now, &batch);
        batch.Put(JobRecord(e.job));
        ScheduleQueued(&batch);
        spdlog::info("job {} succeeded", e.job.id);
      }
      continue;
    }
    std::string how = p.contains("signal") && p["signal"].is_number_integer()
                          ? "killed by signal " + std::to_string(p["signal"].get<int>())
                      : p.contains("exit_code") && p["exit_code"].is_number_integer()
                          ? "exited with code " + std::to_string(p["exit_code"].get<int>())
                          : "exited (code unknown)";
    Finding f = NodeFinding(job, attempt, "process_exit", node_id, now,
                            "rank " + std::to_string(rank) + " on " + node_id + " " + how);
    f.ranks = {rank};
    if (p.contains("error") && p["error"].is_string()) f.detail += ": " + p["error"].get<std::string>();
    if (p.contains("flight_recorder") && p["flight_recorder"].is_array())  // docs/agent-protocol.md
      for (const Json& d : p["flight_recorder"])
        if (d.is_object() && d.contains("path") && d["path"].is_string())
          f.detail += "; flight recorder dump " + d["path"].get<std::string>() + " (" +
                      (d.contains("size") && d["size"].is_number_unsigned() ? d["size"].dump() : "?") +
                      " bytes)";
    RecordFinding(std::move(f), &batch);
  }
  if (body.contains("gpu_faults") && body["gpu_faults"].is_array()) {
    for (const Json& g : body["gpu_faults"]) {
      std::string key = std::to_string(g.value("gpu", -1)) + ":" + g.value("kind", std::string("unknown"));
      if (!agent.faults_seen.insert(key).second) continue;
      for (const std::string& job : cluster_.JobsOn(node_id)) {
        RecordFinding(
            NodeFinding(job, jobs_[job].job.attempt, "gpu_fault", node_id, now,
                        "agent of " + node_id + " reports GPU " + std::to_string(g.value("gpu", -1)) + " " +
                            g.value("kind", std::string("fault")) + ": " + g.value("detail", std::string())),
            &batch);
      }
    }
  }
  CheckAgents(now, &batch);
  Json out = {
      {"ack_exits", std::move(acks)},
      {"assignments_version", assignment_versions_.count(node_id) ? assignment_versions_[node_id] : 0}};
  Commit(std::move(batch), [out = std::move(out), done = std::move(done)](Status s) mutable {
    if (!s.ok()) return done(s);
    done(std::move(out));
  });
}

void Controller::CheckAgents(Time now, WriteBatch* batch) {
  // Silent agents: their nodes are lost, with every rank on them.
  for (auto& [node_id, agent] : agents_) {
    if (agent.lost || now - agent.last_heartbeat < Seconds(options_.node_heartbeat_timeout_s)) continue;
    agent.lost = true;
    agent.running.clear();
    spdlog::warn("agent of node {} silent for {:.1f} s: node lost", node_id,
                 ToSeconds(now - agent.last_heartbeat));
    for (const std::string& job : cluster_.JobsOn(node_id)) {
      Finding f =
          NodeFinding(job, jobs_[job].job.attempt, "node_lost", node_id, now,
                      "no agent heartbeat from " + node_id + " for " +
                          std::to_string(static_cast<int>(ToSeconds(now - agent.last_heartbeat))) + " s");
      if (auto it = jobs_.find(job); it != jobs_.end() && it->second.attempt)
        for (const RankSlot& r : it->second.attempt->placement.ranks)
          if (r.node == node_id) f.ranks.push_back(r.rank);
      RecordFinding(std::move(f), batch);
    }
  }
  // Launch gates: a new attempt starts once no live agent runs an older attempt of its job.
  for (auto& [job_id, e] : jobs_) {
    if (e.launched || !e.attempt) continue;
    bool old_running = false;
    for (const auto& [node_id, agent] : agents_)
      for (const auto& [j, a] : agent.running)
        old_running = old_running || (!agent.lost && j == job_id && a < e.attempt->number);
    if (old_running && now < e.launch_deadline) continue;
    if (old_running)
      spdlog::warn("job {}: old ranks still running after the stop timeout; starting anyway", job_id);
    e.launched = true;
    BumpAssignments(e.attempt->placement);
  }
  // Long polls past their deadline.
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    std::vector<Waiter> keep;
    Json answer;
    for (Waiter& w : it->second) {
      if (w.deadline > now) {
        keep.push_back(std::move(w));
        continue;
      }
      if (answer.is_null()) answer = AssignmentsJson(it->first);
      w.done(answer);
    }
    if (keep.empty())
      it = waiters_.erase(it);
    else
      (it++)->second = std::move(keep);
  }
}

}  // namespace shepherd
