// Controller::DesiredRanks: what each node's agent must run, with the environment every rank gets
// (docs/agent-protocol.md). AgentBoard asks for it and withholds jobs whose launch gate is closed.
#include "control/controller.h"
#include "control/launch/launcher.h"
#include "scheduler/rank_env.h"

namespace shepherd {
namespace {

constexpr int kMasterPortFirst = 20000, kMasterPorts = 12000;  // 20000-31999

int MasterPort(int64_t job_seq, int attempt, uint32_t salt) {
  // Fresh per attempt, so a restarted rendezvous never meets the old one's sockets; the daemon's salt keeps
  // two daemons (or a restarted one's fresh database) from handing out the same ports for job-000001.
  // Below Linux's default ephemeral range (32768-60999): a port in it can be taken by any outgoing
  // connection on the node, and rank 0 then fails to bind its store (seen in the e2e suite under load).
  return kMasterPortFirst + static_cast<int>((job_seq * 7919 + attempt * 104729 + salt) % kMasterPorts);
}

}  // namespace

RankEnvInput Controller::RankEnvFor(const JobEntry& e, const std::string& node) const {
  const Placement& p = e.attempt->placement;
  const Node* master = inventory_.Find(p.ranks.at(0).node);
  RankEnvInput in;
  in.job_id = e.job.id;
  in.spec = &e.job.spec;
  in.plan = e.job.plan;
  in.attempt = e.attempt->number;
  in.placement = &p;
  in.node = node;
  in.master_addr = master ? master->hostname : "127.0.0.1";
  in.master_port = MasterPort(e.job.seq, e.attempt->number, options_.master_port_salt);
  if (auto h = health_.find(e.job.id); h != health_.end() && !e.attempt->resume_checkpoint.empty())
    if (auto c = h->second->ledger().Find(e.attempt->resume_checkpoint)) {
      in.resume_path = c->path;
      in.resume_attempt = c->attempt;
    }
  in.resume_step = e.attempt->resume_step;
  return in;
}

std::shared_ptr<const PlacementNodes> Controller::NodeIndexOf(const JobEntry& e) const {
  const Placement& p = e.attempt->placement;
  std::lock_guard lock(node_index_mu_);
  auto it = node_index_.find(e.job.id);
  if (it != node_index_.end() && it->second.attempt == e.attempt->number &&
      it->second.data == p.ranks.data() && it->second.size == p.ranks.size())
    return it->second.nodes;
  if (node_index_.size() > 256) node_index_.clear();  // ended jobs' entries: dropped now and then
  NodeIndexEntry& c = node_index_[e.job.id];
  c = {e.attempt->number, p.ranks.data(), p.ranks.size(),
       std::make_shared<const PlacementNodes>(IndexPlacementNodes(p))};
  return c.nodes;
}

std::vector<LocalRankEnv> Controller::RankEnvsOn(const JobEntry& e, const std::string& node) const {
  std::shared_ptr<const PlacementNodes> index = NodeIndexOf(e);
  RankEnvInput in = RankEnvFor(e, node);
  in.nodes = index.get();
  std::vector<LocalRankEnv> ranks = ComposeRankEnv(in, {options_.advertise_url, ""});
  // Each rank its own credential (control/rank_tokens.h): one rank cannot report for another. A Slurm
  // step's tasks all see the step's tables, so its ranks share the attempt's "any rank" credential.
  const bool shared = LauncherFor(e.job).Credential() == RankCredential::kPerStep;
  for (LocalRankEnv& r : ranks)
    r.env["SHEPHERD_TOKEN"] =
        rank_tokens_.RankTokenFor(e.job.id, e.attempt->number, shared ? std::nullopt : std::optional(r.rank))
            .value_or("");
  return ranks;
}

std::vector<RankAssignment> Controller::DesiredRanks(const std::string& node) const {
  std::vector<RankAssignment> out;
  for (const std::string& job_id : inventory_.cluster().JobsOn(node)) {
    const JobEntry* e = jobs_.Find(job_id);
    if (!e || !e->attempt || !IsActive(e->job.state) || !LauncherFor(e->job).AgentsStartRanks()) continue;
    auto user = options_.run_as.find(e->job.spec.owner);
    if (user == options_.run_as.end()) user = options_.run_as.find("*");
    const std::string run_as = user == options_.run_as.end() ? "" : user->second;
    for (LocalRankEnv& r : RankEnvsOn(*e, node))
      out.push_back(
          {{e->job.id, e->attempt->number, r.rank}, r.gpu, e->job.spec.command, std::move(r.env), run_as});
  }
  return out;
}

}  // namespace shepherd
