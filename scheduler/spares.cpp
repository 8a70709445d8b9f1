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

}  // namespace shepherd
