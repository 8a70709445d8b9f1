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

  // 1. Capacity, in TP groups, from the Cluster's histograms of domains by free and usable GPUs, corrected
  // for the domains the options change (`changed`): excluded nodes' free GPUs are withheld (their GPUs
  // still count towards the usable total); out-of-service nodes count nowhere; the released job's GPUs on
  // offered nodes are free. No pass over the domains.
  struct Changed {
    int64_t free, total;
    int leaf;
  };
  std::unordered_map<int, Changed> changed;
  auto change = [&](int i) -> Changed& {
    const int d = c.domain(i);
    return changed.try_emplace(d, Changed{c.domain_free_gpus(d), c.domain_usable_gpus(d), c.domain_leaf(d)})
        .first->second;
  };
  std::unordered_set<int> excluded, unusable;
  std::unordered_map<int, uint64_t> released;  // node -> GPUs of o.release_job there
  for (const auto& [i, mask] : c.HeldBy(o.release_job)) released[i] = mask;
  for (const std::string& id : o.out_of_service) {
    const int i = c.IndexOf(id);
    if (i < 0 || !IsUsable(c.node(i)) || !unusable.insert(i).second) continue;
    Changed& ch = change(i);
    ch.free -= std::popcount(c.free_mask(i));
    ch.total -= c.node(i).gpus;
  }
  for (const std::string& id : o.exclude_nodes) {
    const int i = c.IndexOf(id);
    if (i < 0 || !IsUsable(c.node(i)) || unusable.count(i) != 0 || !excluded.insert(i).second) continue;
    change(i).free -= std::popcount(c.free_mask(i));
  }
  auto offered = [&](int i) {
    return IsUsable(c.node(i)) && excluded.count(i) == 0 && unusable.count(i) == 0;
  };
  for (const auto& [i, mask] : released)
    if (offered(i)) change(i).free += std::popcount(mask);
  for (auto& [d, ch] : changed) {  // the finest-level group of the domain's first usable member
    ch.leaf = -1;
    for (int i : c.domain_members(d)) {
      if (IsUsable(c.node(i)) && unusable.count(i) == 0) {
        ch.leaf = c.group(i, finest);
        break;
      }
    }
    if (ch.leaf < 0) ch.free = 0;
  }
  auto slots = [tp](int64_t gpus) { return gpus / tp; };
  auto slots_of = [&](const Cluster::FreeHistogram& h) {
    int64_t n = 0;
    for (const auto& [gpus, domains] : h) n += slots(gpus) * domains;
    return n;
  };
  int64_t cap_total = slots_of(c.usable_domains()), cap_free = slots_of(c.free_domains());
  // Per group, the change in free TP groups from `changed`; and the groups a changed domain now counts in.
  std::vector<std::unordered_map<int, int64_t>> delta(levels);
  std::vector<std::vector<std::pair<int, int>>> added(levels + 1);  // per level: (parent or -1, child)
  auto chain_add = [&](int leaf, int64_t n) {
    for (int k = finest, g = leaf; k >= 0; g = k > 0 ? c.parent_group(k, g) : -1, --k) delta[k][g] += n;
  };
  for (const auto& [d, ch] : changed) {
    const int64_t before = c.domain_leaf(d) >= 0 ? slots(c.domain_free_gpus(d)) : 0;
    cap_total += slots(ch.total) - slots(c.domain_usable_gpus(d));
    cap_free += slots(ch.free) - before;
    if (before > 0) chain_add(c.domain_leaf(d), -before);
    if (slots(ch.free) == 0) continue;
    chain_add(ch.leaf, slots(ch.free));
    added[levels].emplace_back(ch.leaf, d);
    for (int k = finest, g = ch.leaf; k >= 0; g = k > 0 ? c.parent_group(k, g) : -1, --k)
      added[k].emplace_back(k > 0 ? c.parent_group(k, g) : -1, g);
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

  // 2. Best-fit selection, coarsest level first, down to domains; only children with free GPUs are looked
  // at (level k < levels: groups; k == levels: domains of the leaf `parent`).
  auto free_slots = [&](int k, int id) {
    if (k == levels) {
      auto it = changed.find(id);
      return it == changed.end() ? slots(c.domain_free_gpus(id)) : slots(it->second.free);
    }
    auto it = delta[k].find(id);
    return slots_of(c.group_free_domains(k, id)) + (it == delta[k].end() ? 0 : it->second);
  };
  auto children = [&](int k, int parent) {
    std::vector<Child> out;
    auto offer = [&](int id) {
      if (k == levels) {  // a changed domain is a child of its new leaf only
        auto it = changed.find(id);
        if (it != changed.end() && it->second.leaf != parent) return;
      }
      if (const int64_t n = free_slots(k, id); n > 0) out.push_back({id, n});
    };
    for (int id : k == 0 ? c.free_roots() : c.free_children(k - 1, parent)) offer(id);
    for (const auto& entry : added[k]) {
      // Named copies, not a structured binding: the lambda below captures `id` (clang 14 cannot).
      const int p = entry.first, id = entry.second;
      if (p != parent) continue;
      const bool listed =
          k == 0 ? c.free_roots().count(id) != 0 : c.free_children(k - 1, parent).count(id) != 0;
      if (!listed && std::none_of(out.begin(), out.end(), [&](const Child& x) { return x.id == id; }))
        offer(id);
    }
    return out;
  };
  std::vector<int> slot_dom, slot_fine, slot_coarse;
  slot_dom.reserve(groups);
  std::vector<int> path(levels, 0);
  std::function<void(int, int, int64_t)> descend = [&](int k, int parent, int64_t need) {
    for (const auto& [id, take] : Select(children(k, parent), need)) {
      if (k < levels) {
        path[k] = id;
        descend(k + 1, id, take);
        continue;
      }
      for (int64_t t = 0; t < take; ++t) {
        slot_dom.push_back(id);
        slot_fine.push_back(path[finest]);
        slot_coarse.push_back(path[0]);
      }
    }
  };
  descend(0, -1, groups);

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
    const int p = unit_at[s].first, dpi = unit_at[s].second;  // captured below: no structured binding
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
  if (!o.avoid_nodes.empty()) {
    PlaceOptions without = o;
    without.exclude_nodes.insert(o.avoid_nodes.begin(), o.avoid_nodes.end());
    without.avoid_nodes.clear();
    if (Result<Placement> p = Place(c, plan, without); p.ok()) return p;
    without = o;
    without.avoid_nodes.clear();
    return Place(c, plan, without);
  }
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
