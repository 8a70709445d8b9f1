#include "control/agent_board.h"

#include <spdlog/spdlog.h>

namespace shepherd {

AgentBoard::HeartbeatOutcome AgentBoard::OnHeartbeat(const std::string& node, const AgentHeartbeat& hb,
                                                     Time now, const KnowsAttempt& knows,
                                                     std::optional<Time> cordoned_at) {
  HeartbeatOutcome out;
  const bool first = !Heard(node);
  Agent& agent = agents_[node];
  agent.last_heartbeat = now;
  agent.lease_until = now + Seconds(lease_s_);
  std::vector<UnknownProcess> unknown = TrackUnknown(agent.unknown, hb.processes, knows, now);
  for (size_t i = agent.unknown.size(); i < unknown.size(); ++i)
    spdlog::warn(
        "node {} runs {}/a{}/r{} (pid {}), of which the daemon has no record: kept until an operator "
        "decides or {} s pass (0: no timeout)",
        node, unknown[i].rank.job, unknown[i].rank.attempt, unknown[i].rank.rank, unknown[i].pid,
        unknown_timeout_s_);
  const bool keep_changed = KeepList(unknown) != KeepList(agent.unknown);
  agent.unknown = std::move(unknown);
  out.back = agent.lost;
  if (agent.lost) spdlog::info("agent of node {} is back", node);
  agent.lost = false;
  agent.running_unknown = false;
  agent.running.clear();
  for (const ProcessStatus& p : hb.processes) {
    if (p.running)
      agent.running.emplace_back(p.rank.job, p.rank.attempt);
    else
      out.exits.push_back(p);
  }
  for (const GpuFault& g : hb.gpu_faults)
    if (agent.faults_seen.insert(std::to_string(g.gpu) + ":" + g.kind).second) out.new_faults.push_back(g);
  if (agent.checks_since != cordoned_at) {
    agent.checks_since = cordoned_at;
    agent.check_passes = 0;
  }
  if (hb.health_check && hb.health_check->seq != agent.check_seq) {
    agent.check_seq = hb.health_check->seq;
    agent.check_passes = hb.health_check->ok ? agent.check_passes + 1 : 0;
  }
  out.health_check_passes = agent.check_passes;
  if (first || keep_changed) Bump(node);
  return out;
}

std::vector<std::pair<std::string, Duration>> AgentBoard::CheckLiveness(Time now, Time listening_since) {
  std::vector<std::pair<std::string, Duration>> lost;
  for (auto& [node, agent] : agents_) {
    if (agent.lost || now - std::max(agent.last_heartbeat, listening_since) < Seconds(node_timeout_s_))
      continue;
    agent.lost = true;
    spdlog::warn("agent of node {} silent for {:.1f} s: node lost", node,
                 ToSeconds(now - agent.last_heartbeat));
    lost.emplace_back(node, now - agent.last_heartbeat);
  }
  return lost;
}

void AgentBoard::HoldLaunch(const std::string& job, int attempt, std::set<std::string> nodes, Time deadline) {
  gates_[job] = {attempt, std::move(nodes), deadline};
}

void AgentBoard::HoldUntilSaved(const std::string& job, int attempt, const std::set<std::string>& nodes) {
  Gate& g = gates_[job];
  if (g.attempt != attempt) g = {attempt, {}, Time{}};  // a new gate opens once saved (deadline passed)
  g.nodes.insert(nodes.begin(), nodes.end());
  g.unsaved = true;
}

void AgentBoard::Saved(const std::string& job, int attempt, Time now) {
  auto it = gates_.find(job);
  if (it == gates_.end() || it->second.attempt != attempt) return;
  it->second.unsaved = false;
  it->second.saved_at = now;
  OpenGates(now);
}

AgentBoard::OlderAttempt AgentBoard::OlderAttemptRunning(const std::string& job, int attempt) const {
  OlderAttempt out;
  for (const auto& [node, agent] : agents_) {
    bool runs = agent.running_unknown;
    for (const auto& [j, a] : agent.running) runs = runs || (j == job && a < attempt);
    if (!runs) continue;
    if (!agent.lost) {
      out.live = true;
    } else {
      out.lost = true;
      out.fenced_until = std::max(out.fenced_until, agent.lease_until);
    }
  }
  return out;
}

void AgentBoard::OnTick(Time now) {
  OpenGates(now);
  ExpireUnknown(now);
  ExpireWaiters(now);
}

void AgentBoard::ExpireUnknown(Time now) {
  for (auto& [node, agent] : agents_) {
    if (agent.unknown.empty() || !shepherd::ExpireUnknown(&agent.unknown, now, unknown_timeout_s_)) continue;
    spdlog::warn("node {}: unknown processes undecided for {} s: its agent stops them", node,
                 unknown_timeout_s_);
    Bump(node);
  }
}

const std::vector<UnknownProcess>& AgentBoard::Unknown(const std::string& node) const {
  static const std::vector<UnknownProcess> kNone;
  auto it = agents_.find(node);
  return it == agents_.end() ? kNone : it->second.unknown;
}

int AgentBoard::StopUnknownProcesses(const std::string& node) {
  auto it = agents_.find(node);
  int n = it == agents_.end() ? 0 : StopUnknown(&it->second.unknown);
  if (n > 0) {
    spdlog::warn("node {}: an operator stops its {} unknown processes", node, n);
    Bump(node);
  }
  return n;
}

Result<Assignments> AgentBoard::AnswerFor(const std::string& node, bool can_keep,
                                          const std::vector<RankAssignment>& desired) const {
  if (!Heard(node))
    return Unavailable("no heartbeat from the agent of node " + node + " since the daemon started");
  Assignments a = Current(node, desired);
  if (!can_keep && !a.keep.empty())
    return Unavailable(
        "node " + node +
        " runs processes the daemon has no record of and this agent cannot keep them (ask with "
        "keep=1); an operator decides (POST /v1/nodes/" +
        node + "/unknown-processes/stop) or they are stopped at unknown_process_timeout_s");
  return a;
}

void AgentBoard::OpenGates(Time now) {
  for (auto it = gates_.begin(); it != gates_.end();) {
    if (it->second.unsaved) {
      ++it;
      continue;
    }
    OlderAttempt old = OlderAttemptRunning(it->first, it->second.attempt);
    // Replicas: a follower renews the older attempt's leases until its view shows this attempt (durable at
    // saved_at) or the node lost, from a view at most renewal_s old (daemon/follower_lease.h).
    if (old.lost && renewal_s_ > 0)
      old.fenced_until = std::max(old.fenced_until, it->second.saved_at + Seconds(renewal_s_ + lease_s_));
    if (now < old.fenced_until || (old.live && now < it->second.deadline)) {
      ++it;
      continue;
    }
    bool old_running = old.live;
    if (old_running)
      spdlog::warn("job {}: old ranks still running after the stop timeout; starting anyway", it->first);
    std::set<std::string> nodes = std::move(it->second.nodes);
    it = gates_.erase(it);
    for (const std::string& n : nodes) Bump(n);
  }
}

void AgentBoard::ExpireWaiters(Time now) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    std::vector<Waiter> keep, due;
    for (Waiter& w : it->second) (w.deadline > now ? keep : due).push_back(std::move(w));
    if (!due.empty()) MakeDue(it->first, std::move(due));
    if (keep.empty())
      it = waiters_.erase(it);
    else
      (it++)->second = std::move(keep);
  }
}

void AgentBoard::Bump(const std::string& node) {
  ++versions_[node];
  auto it = waiters_.find(node);
  if (it == waiters_.end() || !Heard(node)) return;  // unheard: they wait for the first heartbeat
  std::vector<Waiter> ws = std::move(it->second);
  waiters_.erase(it);
  MakeDue(node, std::move(ws));
}

void AgentBoard::MakeDue(const std::string& node, std::vector<Waiter> ws) {
  std::vector<Waiter>& d = due_[node];
  for (Waiter& w : ws) d.push_back(std::move(w));
}

void AgentBoard::AnswerDue(const AssignmentSource& desired) {
  while (!due_.empty()) {  // an answer's callback may make another long poll due
    auto due = std::move(due_);
    due_.clear();
    for (auto& [node, ws] : due) {
      const std::vector<RankAssignment> ranks = Heard(node) ? desired(node) : std::vector<RankAssignment>{};
      for (Waiter& w : ws) w.done(AnswerFor(node, w.can_keep, ranks));
    }
  }
}

int64_t AgentBoard::version(const std::string& node) const {
  auto it = versions_.find(node);
  return version_base_ + (it == versions_.end() ? 0 : it->second);
}

Assignments AgentBoard::Current(const std::string& node, std::vector<RankAssignment> desired) const {
  Assignments out;
  out.version = version(node);
  for (RankAssignment& r : desired)
    if (!gates_.count(r.rank.job)) out.ranks.push_back(std::move(r));
  out.keep = KeepList(Unknown(node));
  return out;
}

void AgentBoard::Watch(const std::string& node, int64_t known, Time deadline, Time now, bool can_keep,
                       Done<Assignments> done) {
  if (!Heard(node)) {
    deadline = std::max(deadline, now + Seconds(node_timeout_s_));
  } else if (version(node) != known || deadline <= now) {
    due_[node].push_back({deadline, can_keep, std::move(done)});
    return;
  }
  waiters_[node].push_back({deadline, can_keep, std::move(done)});
}

void AgentBoard::ReleaseWaiters() {
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& [node, ws] : waiters) MakeDue(node, std::move(ws));
}

}  // namespace shepherd
