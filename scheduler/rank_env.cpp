#include "scheduler/rank_env.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace shepherd {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void Default(EnvMap& env, const std::string& key, std::string value) {
  env.try_emplace(key, std::move(value));  // the job's own value wins
}

}  // namespace

double DefaultProcessGroupTimeoutS(const Policy& policy) {
  return std::max(3 * policy.hang_timeout_s, policy.hang_timeout_s + 300);
}

PlacementNodes IndexPlacementNodes(const Placement& placement) {
  PlacementNodes out;
  for (size_t i = 0; i < placement.ranks.size(); ++i) {
    auto [it, fresh] = out.by_node.try_emplace(placement.ranks[i].node);
    if (fresh) it->second.group_rank = static_cast<int>(out.by_node.size()) - 1;
    it->second.ranks.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<LocalRankEnv> ComposeRankEnv(const RankEnvInput& in, const RankEnvOptions& options) {
  const JobSpec& spec = *in.spec;
  const std::vector<RankSlot>& all = in.placement->ranks;

  std::vector<const RankSlot*> local;
  int group_rank = 0;
  size_t group_world_size = 0;
  if (in.nodes) {
    group_world_size = in.nodes->by_node.size();
    if (auto it = in.nodes->by_node.find(in.node); it != in.nodes->by_node.end()) {
      group_rank = it->second.group_rank;
      for (int i : it->second.ranks) local.push_back(&all[static_cast<size_t>(i)]);
    } else {
      group_rank = static_cast<int>(group_world_size);
    }
  } else {
    for (const RankSlot& r : all)
      if (r.node == in.node) local.push_back(&r);
    // GROUP_RANK: nodes in the order of their lowest rank (rank 0's node is group 0).
    std::vector<std::string> nodes;
    std::set<std::string> seen;
    for (const RankSlot& r : all)
      if (seen.insert(r.node).second) nodes.push_back(r.node);
    group_rank = static_cast<int>(std::find(nodes.begin(), nodes.end(), in.node) - nodes.begin());
    group_world_size = nodes.size();
  }
  // torchrun's LOCAL_RANK indexes CUDA_VISIBLE_DEVICES: order local ranks by their GPU.
  std::sort(local.begin(), local.end(), [](const RankSlot* a, const RankSlot* b) {
    return a->gpu != b->gpu ? a->gpu < b->gpu : a->rank < b->rank;
  });
  std::string visible;
  for (const RankSlot* r : local) visible += (visible.empty() ? "" : ",") + std::to_string(r->gpu);

  const Policy& policy = spec.policy;
  std::vector<LocalRankEnv> out;
  for (size_t i = 0; i < local.size(); ++i) {
    const RankSlot& r = *local[i];
    EnvMap env = spec.env;
    // NCCL alignment: defaults only.
    Default(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
    Default(env, "NCCL_ASYNC_ERROR_HANDLING", "1");  // the name before PyTorch 2.2
    Default(env, "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000");
    Default(env, "TORCH_NCCL_DUMP_ON_TIMEOUT", "1");
    Default(env, "SHEPHERD_PG_TIMEOUT_S", Num(DefaultProcessGroupTimeoutS(policy)));
    Default(env, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", Num(DefaultProcessGroupTimeoutS(policy)));

    env["RANK"] = std::to_string(r.rank);
    env["WORLD_SIZE"] = std::to_string(all.size());
    env["LOCAL_RANK"] = std::to_string(i);
    env["LOCAL_WORLD_SIZE"] = std::to_string(local.size());
    env["GROUP_RANK"] = std::to_string(group_rank);
    env["GROUP_WORLD_SIZE"] = std::to_string(group_world_size);
    env["ROLE_NAME"] = "default";
    env["ROLE_RANK"] = std::to_string(r.rank);
    env["ROLE_WORLD_SIZE"] = std::to_string(all.size());
    env["MASTER_ADDR"] = in.master_addr.empty() ? "127.0.0.1" : in.master_addr;
    env["MASTER_PORT"] = std::to_string(in.master_port);
    env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(std::max(0, in.attempt - 1));
    env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(policy.max_restarts);
    env["TORCHELASTIC_RUN_ID"] = in.job_id;
    env["CUDA_VISIBLE_DEVICES"] =
        spec.gpu_binding == GpuBinding::kPerProcess ? std::to_string(r.gpu) : visible;

    env["SHEPHERD_URL"] = options.advertise_url;
    env["SHEPHERD_JOB"] = in.job_id;
    env["SHEPHERD_ATTEMPT"] = std::to_string(in.attempt);
    const bool cp = in.plan.cp > 1;  // a fourth value only then: "tp,pp,dp" stays what it was
    env["SHEPHERD_RANK_COORDS"] = std::to_string(r.tp) + "," + std::to_string(r.pp) + "," +
                                  std::to_string(r.dp) + (cp ? "," + std::to_string(r.cp) : "");
    env["SHEPHERD_PARALLELISM"] = std::to_string(in.plan.tp) + "," + std::to_string(in.plan.pp) + "," +
                                  std::to_string(in.plan.dp) + (cp ? "," + std::to_string(in.plan.cp) : "");
    env["SHEPHERD_RESUME_CHECKPOINT"] = in.resume_path;
    env["SHEPHERD_RESUME_STEP"] = std::to_string(in.resume_step);
    // Checked against the checkpoint's markers by the client before it is resumed (docs/integration.md).
    if (in.resume_attempt > 0) env["SHEPHERD_RESUME_ATTEMPT"] = std::to_string(in.resume_attempt);
    env["SHEPHERD_TOKEN"] = options.rank_token;
    env["SHEPHERD_HEARTBEAT_INTERVAL"] = std::to_string(policy.heartbeat_interval_s);
    env["SHEPHERD_HANG_TIMEOUT"] = std::to_string(policy.hang_timeout_s);
    env["SHEPHERD_SDC_EVERY"] = std::to_string(policy.sdc_check_every_steps);
    env["SHEPHERD_CHECKPOINT_DIR"] = spec.checkpoint.dir;
    env["SHEPHERD_CHECKPOINT_EVERY"] = std::to_string(spec.checkpoint.every_steps);
    out.push_back({r.rank, r.gpu, std::move(env)});
  }
  return out;
}

}  // namespace shepherd
