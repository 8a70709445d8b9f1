#include "scheduler/spares.h"

#include <algorithm>
#include <bit>

namespace shepherd {
namespace {

void CheckLevel(const Cluster& c, int level, int want, std::vector<SpareDeficit>& out) {
  std::vector<int> have(c.group_count(level), -1);  // -1: group holds no node
  for (int i = 0; i < c.size(); ++i) {
    const Node& n = c.node(i);
    const int g = c.group(i, level);
    if (have[g] < 0) have[g] = 0;
    if (n.spare && n.schedulable && !n.failed && std::popcount(c.free_mask(i)) == n.gpus) ++have[g];
  }
  const size_t first = out.size();
  for (int g = 0; g < c.group_count(level); ++g) {
    if (have[g] >= 0 && have[g] < want)
      out.push_back({c.levels()[level], c.group_label(level, g), have[g], want});
  }
  std::sort(out.begin() + first, out.end(),
            [](const SpareDeficit& a, const SpareDeficit& b) { return a.label < b.label; });
}

}  // namespace

SpareReport CheckSpareReserve(const Cluster& c, int min_per_leaf, int min_per_spine) {
  SpareReport r;
  const int finest = static_cast<int>(c.levels().size()) - 1;
  if (finest == 0) {
    CheckLevel(c, 0, std::max(min_per_leaf, min_per_spine), r.deficits);
    return r;
  }
  CheckLevel(c, finest, min_per_leaf, r.deficits);
  CheckLevel(c, 0, min_per_spine, r.deficits);
  return r;
}

std::vector<std::string> ChooseAllocationSpares(const Cluster& c, const Placement& placement, int count,
                                                const std::set<std::string>& exclude) {
  const int levels = static_cast<int>(c.levels().size());
  std::set<int> placed;
  for (const RankSlot& r : placement.ranks)
    if (int i = c.IndexOf(r.node); i >= 0) placed.insert(i);
  // near[k][g]: placement nodes in group g of level k.
  std::vector<std::vector<int>> near(levels);
  for (int k = 0; k < levels; ++k) near[k].assign(c.group_count(k), 0);
  for (int i : placed)
    for (int k = 0; k < levels; ++k) ++near[k][c.group(i, k)];
  struct Candidate {
    std::vector<int> closeness;  // finest level first
    int index = 0;
  };
  std::vector<Candidate> candidates;
  for (int i = 0; i < c.size(); ++i) {
    const Node& n = c.node(i);
    const uint64_t all = n.gpus >= 64 ? ~uint64_t{0} : (uint64_t{1} << n.gpus) - 1;
    if (placed.count(i) || exclude.count(n.id) || !n.schedulable || n.failed || c.free_mask(i) != all)
      continue;
    Candidate cand{{}, i};
    for (int k = levels - 1; k >= 0; --k) cand.closeness.push_back(near[k][c.group(i, k)]);
    candidates.push_back(std::move(cand));
  }
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    if (a.closeness != b.closeness) return a.closeness > b.closeness;
    return c.node(a.index).id < c.node(b.index).id;
  });
  std::vector<std::string> out;
  for (const Candidate& cand : candidates) {
    if (static_cast<int>(out.size()) == count) break;
    out.push_back(c.node(cand.index).id);
  }
  return out;
}

}  // namespace shepherd
