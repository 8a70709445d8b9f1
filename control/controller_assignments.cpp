// Controller::DesiredRanks: what each node's agent must run, with the environment every rank gets
// (docs/agent-protocol.md). AgentBoard asks for it and withholds jobs whose launch gate is closed.
#include "control/controller.h"

namespace shepherd {
namespace {

int MasterPort(int64_t job_seq, int attempt, uint32_t salt) {
  // Fresh per attempt, so a restarted rendezvous never meets the old one's sockets; the daemon's salt keeps
  // two daemons (or a restarted one's fresh database) from handing out the same ports for job-000001.
  return 20000 + static_cast<int>((job_seq * 7919 + attempt * 104729 + salt) % 20000);
}

}  // namespace

std::vector<RankAssignment> Controller::DesiredRanks(const std::string& node) const {
  std::vector<RankAssignment> out;
  for (const std::string& job_id : inventory_.cluster().JobsOn(node)) {
    const JobEntry* e = jobs_.Find(job_id);
    if (!e || !e->attempt || !IsActive(e->job.state) || e->job.spec.command.empty()) continue;
    const Placement& p = e->attempt->placement;
    std::vector<const RankSlot*> local;
    for (const RankSlot& r : p.ranks)
      if (r.node == node) local.push_back(&r);
    const Node* master = inventory_.Find(p.ranks.at(0).node);
    std::string resume;
    if (auto h = health_.find(job_id); h != health_.end() && !e->attempt->resume_checkpoint.empty())
      if (auto c = h->second->ledger().Find(e->attempt->resume_checkpoint)) resume = c->path;
    const Policy& policy = e->job.spec.policy;
    for (size_t i = 0; i < local.size(); ++i) {
      const RankSlot& r = *local[i];
      std::map<std::string, std::string> env = e->job.spec.env;
      env["RANK"] = std::to_string(r.rank);
      env["WORLD_SIZE"] = std::to_string(p.ranks.size());
      env["LOCAL_RANK"] = std::to_string(i);
      env["LOCAL_WORLD_SIZE"] = std::to_string(local.size());
      env["MASTER_ADDR"] = master ? master->hostname : "127.0.0.1";
      env["MASTER_PORT"] =
          std::to_string(MasterPort(e->job.seq, e->attempt->number, options_.master_port_salt));
      env["CUDA_VISIBLE_DEVICES"] = std::to_string(r.gpu);
      env["SHEPHERD_URL"] = options_.advertise_url;
      env["SHEPHERD_JOB"] = e->job.id;
      env["SHEPHERD_ATTEMPT"] = std::to_string(e->attempt->number);
      env["SHEPHERD_RANK_COORDS"] =
          std::to_string(r.tp) + "," + std::to_string(r.pp) + "," + std::to_string(r.dp);
      env["SHEPHERD_RESUME_CHECKPOINT"] = resume;
      env["SHEPHERD_RESUME_STEP"] = std::to_string(e->attempt->resume_step);
      env["SHEPHERD_TOKEN"] = options_.rank_token;
      env["SHEPHERD_HEARTBEAT_INTERVAL"] = std::to_string(policy.heartbeat_interval_s);
      env["SHEPHERD_SDC_EVERY"] = std::to_string(policy.sdc_check_every_steps);
      env["SHEPHERD_CHECKPOINT_DIR"] = e->job.spec.checkpoint.dir;
      env["SHEPHERD_CHECKPOINT_EVERY"] = std::to_string(e->job.spec.checkpoint.every_steps);
      out.push_back({{e->job.id, e->attempt->number, r.rank}, r.gpu, e->job.spec.command, std::move(env)});
    }
  }
  return out;
}

}  // namespace shepherd
