// ReplaceNode: see placement.h for the contract.
#include <algorithm>
#include <bit>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "scheduler/placement.h"

namespace shepherd {
namespace {

// The TP group of a rank: (pp, cp, dp), each < 2^21.
int64_t GroupKey(const RankSlot& r) {
  return (((int64_t{r.pp} << 21) | r.cp) << 21) | r.dp;
}

}  // namespace

Result<Replacement> ReplaceNode(const Cluster& c, const Placement& placement, const std::string& failed_node,
                                const ReplaceOptions& o) {
  const int fi = c.IndexOf(failed_node);
  if (fi < 0) return NotFound("node " + failed_node + " not found");
  std::vector<int> moved;  // indexes into placement.ranks
  std::unordered_set<int64_t> moved_groups;
  std::unordered_map<int, uint64_t> used;  // GPUs the placement itself uses, per node index
  for (size_t r = 0; r < placement.ranks.size(); ++r) {
    const RankSlot& s = placement.ranks[r];
    if (s.gpu >= 0 && s.gpu < kMaxGpusPerNode)
      if (const int i = c.IndexOf(s.node); i >= 0) used[i] |= uint64_t{1} << s.gpu;
    if (s.node == failed_node) {
      moved.push_back(static_cast<int>(r));
      moved_groups.insert(GroupKey(s));
    }
  }
  if (moved.empty()) return InvalidArgument("node " + failed_node + " hosts no rank of the placement");
  bool spans = false;  // a TP group on the failed node also has ranks elsewhere: stay in the domain
  for (const RankSlot& s : placement.ranks) {
    if (s.node != failed_node && moved_groups.count(GroupKey(s)) != 0) spans = true;
  }

  const int levels = static_cast<int>(c.levels().size());
  const int need = static_cast<int>(moved.size());
  // Locality score: 0 same domain, 1 + (finest - k) same level-k group, levels + 1 any. Lower is better.
  auto score_of = [&](int i) {
    if (c.domain(i) == c.domain(fi)) return 0;
    for (int k = levels - 1; k >= 0; --k) {
      if (c.group(i, k) == c.group(fi, k)) return levels - k;
    }
    return levels + 1;
  };
  std::unordered_map<int, uint64_t> released;  // node -> GPUs of o.release_job there
  for (const auto& [i, mask] : c.HeldBy(o.release_job)) released[i] = mask;
  std::unordered_set<int> excluded;  // node indexes: one lookup per candidate, no string compares
  for (const std::string& id : o.exclude_nodes)
    if (const int i = c.IndexOf(id); i >= 0) excluded.insert(i);
  // Free for the replacement: free in the cluster (or the released job's), and unused by the placement.
  auto free_of = [&](int i) {
    auto r = released.find(i);
    auto u = used.find(i);
    return (c.free_mask(i) | (r == released.end() ? 0 : r->second)) & ~(u == used.end() ? 0 : u->second);
  };
  // Nodes whose free GPUs for the replacement differ from the cluster's (the placement's and the released
  // job's): looked at one by one; every other node through the Cluster's ready index.
  std::unordered_set<int> special;
  for (const auto& [i, mask] : used) special.insert(i);
  for (const auto& [i, mask] : released) special.insert(i);
  // The best candidate by (score, node id): the failed node's domain and the special nodes one by one,
  // then per group of the failed node from the finest level, then the whole cluster, the smallest id
  // among the ready nodes with enough free GPUs. A group's nodes of a lower score lie in the finer groups
  // already searched, so the search stops at the first level that cannot beat the best so far.
  auto pick = [&](bool spare_pass) {
    int best = -1, best_score = 0;
    auto consider = [&](int i) {
      const Node& n = c.node(i);
      if (i == fi || n.spare != spare_pass || !n.schedulable || n.failed) return;
      if (excluded.count(i) != 0) return;
      if (spans && c.domain(i) != c.domain(fi)) return;
      if (std::popcount(free_of(i)) < need) return;
      const int s = score_of(i);
      if (best < 0 || s < best_score || (s == best_score && n.id < c.node(best).id)) best = i, best_score = s;
    };
    // The smallest id of the ready index `by_free` with at least `need` free GPUs, skipping the failed,
    // excluded and special nodes (at most that many skipped per free count).
    auto first_ready = [&](const Cluster::ReadyByFree& by_free) {
      for (auto it = by_free.lower_bound(need); it != by_free.end(); ++it) {
        for (const std::string& id : it->second) {
          const int i = c.IndexOf(id);
          if (i == fi || excluded.count(i) != 0 || special.count(i) != 0) continue;
          consider(i);
          break;
        }
      }
    };
    for (int i : c.domain_members(c.domain(fi))) consider(i);
    for (int i : special) consider(i);
    if (spans) return best;
    for (int k = levels - 1; k >= 0; --k) {
      if (best >= 0 && best_score < levels - k) return best;
      first_ready(c.ready_nodes(spare_pass, k, c.group(fi, k)));
    }
    if (best < 0) first_ready(c.ready_nodes(spare_pass, levels, 0));
    return best;
  };

  Replacement out;
  int chosen = o.use_spares ? pick(true) : -1;
  if (chosen < 0 && o.replace_without_spare) {
    chosen = pick(false);
    out.from_spare_pool = false;
  }
  if (chosen < 0) {
    std::string why = o.use_spares ? "no spare" : "spares are disabled and no node";
    if (o.replace_without_spare) why = "no spare or free node";
    return Status(Code::kResourceExhausted, why + " with " + std::to_string(need) +
                                                " free GPUs can replace " + failed_node +
                                                (spans ? " inside its NVLink domain" : ""));
  }
  const int s = score_of(chosen);
  out.locality = s == 0 ? "nvlink_domain" : s <= levels ? c.levels()[levels - s] : "any";
  out.spare = c.node(chosen).id;

  out.placement = placement;
  uint64_t free = free_of(chosen);
  std::sort(moved.begin(), moved.end(),
            [&](int a, int b) { return placement.ranks[a].gpu < placement.ranks[b].gpu; });
  std::vector<int> later;
  for (int r : moved) {  // keep the local GPU index where it is free ...
    RankSlot& slot = out.placement.ranks[r];
    slot.node = out.spare;
    const int g = slot.gpu;
    if (g >= 0 && g < kMaxGpusPerNode && (free >> g & 1) != 0) {
      free &= ~(uint64_t{1} << g);
    } else {
      later.push_back(r);
    }
  }
  for (int r : later) {  // ... else take the lowest free one
    out.placement.ranks[r].gpu = std::countr_zero(free);
    free &= free - 1;
  }
  return out;
}

}  // namespace shepherd
