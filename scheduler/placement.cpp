// Place: see placement.h for the algorithm.
#include "scheduler/placement.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace shepherd {
namespace {

struct Child {
  int id;
  int64_t cap;
};

// Best-fit greedy (placement.h, step 2). REQUIRES: sum of caps >= need.
std::vector<std::pair<int, int64_t>> Select(std::vector<Child> cands, int64_t need) {
  std::sort(cands.begin(), cands.end(),
            [](const Child& a, const Child& b) { return a.cap != b.cap ? a.cap < b.cap : a.id > b.id; });
  std::vector<std::pair<int, int64_t>> out;
  while (need > 0 && !cands.empty()) {
    auto fit = std::lower_bound(cands.begin(), cands.end(), need,
                                [](const Child& c, int64_t n) { return c.cap < n; });
    if (fit != cands.end()) {
      // Among equal caps the sort put larger ids first; take the smallest id of the tightest cap.
      auto last = fit;
      while (last + 1 != cands.end() && (last + 1)->cap == fit->cap) ++last;
      out.emplace_back(last->id, need);
      return out;
    }
    out.emplace_back(cands.back().id, cands.back().cap);
    need -= cands.back().cap;
    cands.pop_back();
  }
  return out;
}

// Position of TP group (p, d) in the blocked order with block width w (placement.h, step 3).
inline int64_t Pos(int p, int d, int w, int pp, int dp) {
  const int block = d / w;
  const int width = std::min(w, dp - block * w);
  return int64_t{block} * w * pp + int64_t{p} * width + d % w;
}

// Cross-coarsest and cross-finest bytes of the blocked order w on the slot sequence.
std::pair<double, double> Score(int w, const Plan& plan, const std::vector<int>& fine,
                                const std::vector<int>& coarse, double dp_b, double pp_b) {
  double spine = 0, leaf = 0;
  auto edge = [&](int64_t a, int64_t b, double bytes) {
    if (coarse[a] != coarse[b]) spine += bytes;
    if (fine[a] != fine[b]) leaf += bytes;
  };
  for (int p = 0; p < plan.pp; ++p) {
    for (int d = 0; d < plan.dp; ++d) {
      const int64_t me = Pos(p, d, w, plan.pp, plan.dp);
      if (d + 1 < plan.dp) edge(me, Pos(p, d + 1, w, plan.pp, plan.dp), dp_b);
      if (d + 1 == plan.dp && plan.dp > 2) edge(me, Pos(p, 0, w, plan.pp, plan.dp), dp_b);
      if (p + 1 < plan.pp) edge(me, Pos(p + 1, d, w, plan.pp, plan.dp), pp_b);
    }
  }
  return {spine, leaf};
}

}  // namespace

// Places the units of `plan` (tp consecutive ranks per (pp, dp)); RankSlot::tp is the index in the unit.
static Result<Placement> PlaceUnits(const Cluster& c, const Plan& plan, const PlaceOptions& o) {
  const int tp = plan.tp;
  const int64_t groups = int64_t{plan.pp} * plan.dp;
  const int levels = static_cast<int>(c.levels().size());
  const int finest = levels - 1;
  const int ndom = c.domain_count();

  // 1. Capacity per domain, in TP groups, from the Cluster's per-domain counts (O(domains), no node walk).
  // Excluded nodes' free GPUs are withheld (their GPUs still count towards the usable total); out-of-service
  // nodes count nowhere; the released job's GPUs on offered nodes are free.
  std::unordered_set<int> excluded, unusable;
  std::unordered_map<int, uint64_t> released;  // node -> GPUs of o.release_job there
  for (const auto& [i, mask] : c.HeldBy(o.release_job)) released[i] = mask;
  std::vector<int64_t> dom_free(ndom), dom_total(ndom);
  for (int d = 0; d < ndom; ++d) {
    dom_free[d] = c.domain_free_gpus(d);
    dom_total[d] = c.domain_usable_gpus(d);
  }
  std::unordered_set<int> reshaped;  // domains whose first usable member may have changed
  for (const std::string& id : o.out_of_service) {
    const int i = c.IndexOf(id);
    if (i < 0 || !IsUsable(c.node(i)) || !unusable.insert(i).second) continue;
    dom_free[c.domain(i)] -= std::popcount(c.free_mask(i));
    dom_total[c.domain(i)] -= c.node(i).gpus;
    reshaped.insert(c.domain(i));
  }
  for (const std::string& id : o.exclude_nodes) {
    const int i = c.IndexOf(id);
    if (i < 0 || !IsUsable(c.node(i)) || unusable.count(i) != 0 || !excluded.insert(i).second) continue;
    dom_free[c.domain(i)] -= std::popcount(c.free_mask(i));
  }
  auto offered = [&](int i) {
    return IsUsable(c.node(i)) && excluded.count(i) == 0 && unusable.count(i) == 0;
  };
  for (const auto& [i, mask] : released)
    if (offered(i)) dom_free[c.domain(i)] += std::popcount(mask);
  auto leaf_of = [&](int d) {  // the finest-level group of the domain's first usable member
    if (reshaped.count(d) == 0) return c.domain_leaf(d);
    for (int i : c.domain_members(d))
      if (IsUsable(c.node(i)) && unusable.count(i) == 0) return c.group(i, finest);
    return -1;
  };
  // GPUs / tp by table: these loops run once per domain, and a division each dominated them.
  std::vector<int64_t> per(c.MaxUsableDomainGpus() + 1);
  for (size_t f = 0; f < per.size(); ++f) per[f] = static_cast<int64_t>(f) / tp;
  auto slots = [&](int64_t gpus) { return gpus < static_cast<int64_t>(per.size()) ? per[gpus] : gpus / tp; };
  int64_t cap_total = 0, cap_free = 0;
  for (int d = 0; d < ndom; ++d) {
    cap_total += slots(dom_total[d]);
    cap_free += slots(dom_free[d]);
  }
  if (cap_total < groups) {
    return InvalidContent("job of " + std::to_string(groups * tp) +
                              " GPUs is larger than the usable inventory (room for " +
                              std::to_string(cap_total) + " TP groups of " + std::to_string(tp) + ")",
                          {{"parallelism", "larger than the usable inventory"}});
  }
  if (cap_free < groups) {
    return Status(Code::kResourceExhausted, "not enough free GPUs now: room for " + std::to_string(cap_free) +
                                                " of " + std::to_string(groups) + " TP groups");
  }

  // 2. Best-fit selection, coarsest level first, down to domains.
  std::vector<std::vector<int64_t>> cap(levels);
  std::vector<std::vector<std::vector<int>>> kids(levels);  // kids[k][g]: children of level-k group g
  for (int k = 0; k < levels; ++k) {
    cap[k].assign(c.group_count(k), 0);
    kids[k].resize(c.group_count(k));
  }
  for (int d = 0; d < ndom; ++d) {
    const int64_t n = slots(dom_free[d]);
    if (n == 0) continue;
    const int leaf = leaf_of(d);
    kids[finest][leaf].push_back(d);
    cap[finest][leaf] += n;
  }
  for (int k = finest; k >= 1; --k) {
    for (int g = 0; g < c.group_count(k); ++g) {
      if (cap[k][g] == 0) continue;
      kids[k - 1][c.parent_group(k, g)].push_back(g);
      cap[k - 1][c.parent_group(k, g)] += cap[k][g];
    }
  }
  std::vector<int> slot_dom, slot_fine, slot_coarse;
  slot_dom.reserve(groups);
  std::vector<int> path(levels, 0);
  std::function<void(int, const std::vector<int>&, int64_t)> descend = [&](int k, const std::vector<int>& ids,
                                                                           int64_t need) {
    std::vector<Child> cands;
    for (int id : ids) cands.push_back({id, k < levels ? cap[k][id] : slots(dom_free[id])});
    for (const auto& [id, take] : Select(std::move(cands), need)) {
      if (k < levels) {
        path[k] = id;
        descend(k + 1, kids[k][id], take);
        continue;
      }
      for (int64_t t = 0; t < take; ++t) {
        slot_dom.push_back(id);
        slot_fine.push_back(path[finest]);
        slot_coarse.push_back(path[0]);
      }
    }
  };
  std::vector<int> roots;
  for (int g = 0; g < c.group_count(0); ++g) {
    if (cap[0][g] > 0) roots.push_back(g);
  }
  descend(0, roots, groups);

  // 3. Choose the block width w.
  std::vector<int> widths;
  for (int w = 1; w <= plan.dp; ++w) {
    if (plan.dp % w == 0 || std::has_single_bit(static_cast<unsigned>(w))) widths.push_back(w);
  }
  int best_w = plan.dp;
  std::pair<double, double> best_score =
      Score(best_w, plan, slot_fine, slot_coarse, o.dp_edge_bytes, o.pp_edge_bytes);
  for (int w : widths) {
    auto s = Score(w, plan, slot_fine, slot_coarse, o.dp_edge_bytes, o.pp_edge_bytes);
    if (s < best_score || (s == best_score && w < best_w)) best_score = s, best_w = w;
  }

  // 4. GPUs. Free masks as this placement takes them, for the nodes it touched.
  std::unordered_map<int, uint64_t> taken;
  auto free_of = [&](int i) -> uint64_t& {
    auto [it, added] = taken.try_emplace(i, c.free_mask(i));
    if (added)
      if (auto r = released.find(i); r != released.end()) it->second |= r->second;
    return it->second;
  };
  std::vector<std::pair<int, int>> unit_at(groups);  // slot -> (pp, dp)
  for (int p = 0; p < plan.pp; ++p) {
    for (int d = 0; d < plan.dp; ++d) unit_at[Pos(p, d, best_w, plan.pp, plan.dp)] = {p, d};
  }
  Placement out;
  out.attempt = o.attempt;
  out.ranks.resize(groups * tp);
  for (int64_t s = 0; s < groups; ++s) {
    const int d = slot_dom[s];
    const auto [p, dpi] = unit_at[s];
    int t = 0;
    auto take = [&](int i, int count) {
      uint64_t& free = free_of(i);
      for (; count > 0; --count, ++t) {
        const int gpu = std::countr_zero(free);
        free &= free - 1;
        const int rank = t + tp * (dpi + plan.dp * p);
        out.ranks[rank] = RankSlot{rank, c.node(i).id, gpu, t, p, dpi};
      }
    };
    int best = -1, best_free = 0;
    for (int i : c.domain_members(d)) {
      if (!offered(i)) continue;
      const int f = std::popcount(free_of(i));
      if (f >= tp && (best < 0 || f < best_free)) best = i, best_free = f;
    }
    if (best >= 0) {
      take(best, tp);
      continue;
    }
    while (t < tp) {  // spans nodes of the domain: most free first
      int most = -1, most_free = 0;
      for (int i : c.domain_members(d)) {
        if (!offered(i)) continue;
        const int f = std::popcount(free_of(i));
        if (most < 0 || f > most_free) most = i, most_free = f;
      }
      take(most, std::min(tp - t, most_free));
    }
  }
  return out;
}

Plan ModelParallelUnit(const Plan& plan) {
  Plan unit = plan;
  unit.tp = plan.tp * plan.cp;
  unit.cp = 1;
  return unit;
}

Plan ContextAsDataParallel(const Plan& plan) {
  Plan folded = plan;
  folded.dp = plan.dp * plan.cp;
  folded.cp = 1;
  return folded;
}

Result<Placement> Place(const Cluster& c, const Plan& plan, const PlaceOptions& o) {
  if (plan.tp < 1 || plan.cp < 1 || plan.pp < 1 || plan.dp < 1)
    return InvalidArgument("tp, cp, pp and dp must be >= 1");
  if (plan.cp == 1) return PlaceUnits(c, plan, o);
  Result<Placement> placed = PlaceUnits(c, ModelParallelUnit(plan), o);
  if (placed.ok()) {
    for (RankSlot& r : placed->ranks) {  // unit index u = tp + TP·cp
      r.cp = r.tp / plan.tp;
      r.tp %= plan.tp;
    }
    return placed;
  }
  // TP·CP exceeds the NVLink domains, or no domain has that much free now: TP groups stay whole, CP peers
  // are consecutive "replicas" and land in the same leaf where they can (the blocked order keeps
  // consecutive replicas together).
  placed = PlaceUnits(c, ContextAsDataParallel(plan), o);
  if (placed.ok()) {
    for (RankSlot& r : placed->ranks) {  // folded index dp' = cp + CP·dp
      r.cp = r.dp % plan.cp;
      r.dp /= plan.cp;
    }
  }
  return placed;
}

}  // namespace shepherd
