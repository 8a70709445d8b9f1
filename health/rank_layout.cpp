#include "health/rank_layout.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace shepherd {

int ExpertShardStride(const Plan& plan) {
  const int grid = plan.expert_tp() * plan.ep;
  return grid / std::gcd(plan.tp, grid);
}

Result<RankLayout> RankLayout::Build(const Plan& plan, const Placement& placement, int hybrid_shard_size) {
  RankLayout l;
  l.plan_ = plan;
  if (plan.tp < 1 || plan.cp < 1 || plan.pp < 1 || plan.dp < 1)
    return InvalidContent("plan: tp, cp, pp and dp must be >= 1",
                          {{"plan", "tp, cp, pp and dp must be >= 1"}});
  const int world = plan.world_size();
  if (static_cast<int>(placement.ranks.size()) != world)
    return InvalidContent("placement: holds " + std::to_string(placement.ranks.size()) +
                              " ranks, plan needs " + std::to_string(world),
                          {{"placement.ranks", "size differs from the plan's world size"}});
  l.coords_.resize(world);
  l.node_of_.resize(world);
  l.by_coord_.assign(world, -1);
  std::unordered_map<std::string, int32_t> node_ids;
  for (int r = 0; r < world; ++r) {
    const RankSlot& s = placement.ranks[r];
    std::string field = "placement.ranks[" + std::to_string(r) + "]";
    if (s.rank != r)
      return InvalidContent(field + ": rank differs from its index", {{field, "rank differs from index"}});
    if (s.tp < 0 || s.tp >= plan.tp || s.pp < 0 || s.pp >= plan.pp || s.dp < 0 || s.dp >= plan.dp ||
        s.cp < 0 || s.cp >= plan.cp)
      return InvalidContent(field + ": coordinates outside the plan",
                            {{field, "coordinates outside the plan"}});
    int32_t& slot = l.by_coord_[((s.pp * plan.dp + s.dp) * plan.cp + s.cp) * plan.tp + s.tp];
    if (slot != -1)
      return InvalidContent(field + ": coordinates used twice",
                            {{field, "coordinates used by another rank"}});
    slot = r;
    l.coords_[r] = {s.tp, s.pp, s.dp, s.cp};
    auto [it, inserted] = node_ids.try_emplace(s.node, static_cast<int32_t>(l.nodes_.size()));
    if (inserted) l.nodes_.push_back(s.node);
    l.node_of_[r] = it->second;
  }

  // Replica sets.
  int shard = 0;  // stride along j = cp + CP·dp (ZeRO-3 hybrid, or ep); 0 = sets span all of dp·cp
  const int replicas = plan.dp * plan.cp;
  if (replicas == 1) {
    l.replica_reason_ = "dp=1: no data-parallel replicas to compare";
    return l;
  }
  if (plan.zero_stage >= 3) {
    if (hybrid_shard_size <= 1 || hybrid_shard_size >= replicas || replicas % hybrid_shard_size != 0) {
      l.replica_reason_ =
          "ZeRO-3 without hybrid sharding: every data-parallel rank holds a different shard, so no two ranks "
          "must hold equal parameters; hash comparison skipped";
      return l;
    }
    shard = hybrid_shard_size;
    if (ExpertShardStride(plan) > 1) {
      l.replica_reason_ =
          "ZeRO-3 with expert parallelism: shards and experts both differ across data-parallel ranks; hash "
          "comparison skipped";
      return l;
    }
  } else if (ExpertShardStride(plan) > 1) {
    // The experts' grid (core/job.h, Plan): rank r = tp + TP·j holds expert shard r % (etp·ep), so ranks
    // of one tp index hold equal parameters when their j agree modulo ExpertShardStride.
    shard = ExpertShardStride(plan);
    if (replicas <= shard) {
      l.replica_reason_ =
          "expert parallelism: every data-parallel rank of a tp index holds different routed experts, so no "
          "two ranks must hold equal parameters; hash comparison skipped";
      return l;
    }
  }
  l.replica_offsets_.push_back(0);
  const int shards = shard == 0 ? 1 : shard;
  for (int pp = 0; pp < plan.pp; ++pp)
    for (int tp = 0; tp < plan.tp; ++tp)
      for (int sh = 0; sh < shards; ++sh) {
        for (int j = sh; j < replicas; j += shards)
          l.replica_ranks_.push_back(l.RankAt(tp, pp, j / plan.cp, j % plan.cp));
        std::sort(l.replica_ranks_.begin() + l.replica_offsets_.back(), l.replica_ranks_.end());
        l.replica_offsets_.push_back(static_cast<int32_t>(l.replica_ranks_.size()));
      }
  return l;
}

std::vector<int> RankLayout::GroupMembers(int rank, GroupKind g) const {
  std::vector<int> out;
  const Coord& c = coords_[rank];
  switch (g) {
    case GroupKind::kTp:
      for (int t = 0; t < plan_.tp; ++t) out.push_back(RankAt(t, c.pp, c.dp, c.cp));
      break;
    case GroupKind::kPp:
      for (int p = 0; p < plan_.pp; ++p) out.push_back(RankAt(c.tp, p, c.dp, c.cp));
      break;
    case GroupKind::kDp:
      for (int d = 0; d < plan_.dp; ++d) out.push_back(RankAt(c.tp, c.pp, d, c.cp));
      break;
    case GroupKind::kCp:
      for (int k = 0; k < plan_.cp; ++k) out.push_back(RankAt(c.tp, c.pp, c.dp, k));
      break;
    case GroupKind::kWorld:
      for (int r = 0; r < world_size(); ++r) out.push_back(r);
      break;
    case GroupKind::kOther:
      break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> RankLayout::ReplicaSet(int i) const {
  return std::vector<int>(replica_ranks_.begin() + replica_offsets_[i],
                          replica_ranks_.begin() + replica_offsets_[i + 1]);
}

std::vector<std::string> RankLayout::NodesOf(const std::vector<int>& ranks) const {
  std::vector<int32_t> ids;
  ids.reserve(ranks.size());
  for (int r : ranks) ids.push_back(node_of_[r]);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(nodes_[id]);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace shepherd
