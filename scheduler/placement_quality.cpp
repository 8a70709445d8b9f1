// EvaluatePlacement: see placement.h for what is counted.
#include <unordered_map>
#include <vector>

#include "scheduler/placement.h"

namespace shepherd {

PlacementQuality EvaluatePlacement(const Cluster& c, const Plan& plan, const Placement& placement,
                                   double dp_edge_bytes, double pp_edge_bytes) {
  PlacementQuality q;
  if (plan.tp < 1 || plan.cp < 1 || plan.pp < 1 || plan.dp < 1) return q;
  if (plan.cp > 1) {
    return EvaluatePlacement(c, ContextAsDataParallel(plan), placement, dp_edge_bytes, pp_edge_bytes);
  }
  const int64_t world = int64_t{plan.tp} * plan.pp * plan.dp;
  const int finest = static_cast<int>(c.levels().size()) - 1;
  // Per rank: domain, finest and coarsest group. Unknown or missing ranks get unique negative ids.
  struct Where {
    int64_t domain, fine, coarse;
  };
  std::vector<Where> at(world);
  std::unordered_map<std::string, int> index;
  for (int64_t r = 0; r < world; ++r) {
    const int64_t alone = -1 - r;
    at[r] = {alone, alone, alone};
    if (r >= static_cast<int64_t>(placement.ranks.size())) continue;
    const std::string& id = placement.ranks[r].node;
    auto it = index.find(id);
    if (it == index.end()) it = index.emplace(id, c.IndexOf(id)).first;
    if (it->second < 0) continue;
    at[r] = {c.domain(it->second), c.group(it->second, finest), c.group(it->second, 0)};
  }
  auto rank = [&](int t, int d, int p) { return t + int64_t{plan.tp} * (d + int64_t{plan.dp} * p); };
  auto edge = [&](int64_t a, int64_t b, double bytes) {
    if (at[a].coarse != at[b].coarse) {
      ++q.cross_spine_edges;
      q.cross_spine_bytes_per_step += bytes;
    }
    if (at[a].fine != at[b].fine || at[a].coarse != at[b].coarse) {
      ++q.cross_leaf_edges;
      q.cross_leaf_bytes_per_step += bytes;
    }
  };
  for (int p = 0; p < plan.pp; ++p) {
    for (int d = 0; d < plan.dp; ++d) {
      const int64_t first = rank(0, d, p);
      for (int t = 1; t < plan.tp; ++t) {
        if (at[first + t].domain != at[first].domain) {
          ++q.tp_groups_split;
          break;
        }
      }
      for (int t = 0; t < plan.tp; ++t) {
        const int64_t me = rank(t, d, p);
        if (d + 1 < plan.dp) edge(me, rank(t, d + 1, p), dp_edge_bytes);
        if (d + 1 == plan.dp && plan.dp > 2) edge(me, rank(t, 0, p), dp_edge_bytes);
        if (p + 1 < plan.pp) edge(me, rank(t, d, p + 1), pp_edge_bytes);
      }
    }
  }
  return q;
}

}  // namespace shepherd
