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
  std::unordered_map<std::string, uint64_t> used;  // GPUs the placement itself uses, per node
  for (size_t r = 0; r < placement.ranks.size(); ++r) {
    const RankSlot& s = placement.ranks[r];
    if (s.gpu >= 0 && s.gpu < kMaxGpusPerNode) used[s.node] |= uint64_t{1} << s.gpu;
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
  auto free_of = [&](int i) {
    auto r = released.find(i);
    return c.free_mask(i) | (r == released.end() ? 0 : r->second);
  };
  auto pick = [&](bool spare_pass) {
    int best = -1, best_score = 0;
    for (int i = 0; i < c.size(); ++i) {
      const Node& n = c.node(i);
      if (i == fi || n.spare != spare_pass || !n.schedulable || n.failed) continue;
      if (o.exclude_nodes.count(n.id) != 0) continue;
      if (spans && c.domain(i) != c.domain(fi)) continue;
      auto u = used.find(n.id);
      const uint64_t free = free_of(i) & ~(u == used.end() ? 0 : u->second);
      if (std::popcount(free) < need) continue;
      const int s = score_of(i);
      if (best < 0 || s < best_score || (s == best_score && n.id < c.node(best).id)) best = i, best_score = s;
    }
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
  auto u = used.find(out.spare);
  uint64_t free = free_of(chosen) & ~(u == used.end() ? 0 : u->second);
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
