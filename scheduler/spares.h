// The hot-spare reserve: does every leaf and spine keep enough spares for fast replacement?
// Pure function of a Cluster snapshot.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "scheduler/cluster.h"

namespace shepherd {

struct SpareDeficit {
  std::string level;  // a topology level name, e.g. "leaf" or "spine"
  std::string label;  // the group's label at that level, e.g. "s0-l03"
  int have = 0;
  int want = 0;
  bool operator==(const SpareDeficit&) const = default;
};

struct SpareReport {
  std::vector<SpareDeficit> deficits;  // finest level first, then coarsest; each sorted by label
  bool ok() const { return deficits.empty(); }
};

// A spare counts when it is ready to take ranks: spare, schedulable, not failed and no GPU held. Every group
// that holds at least one node is checked: finest-level groups ("leaf") against min_per_leaf, coarsest
// ("spine") against min_per_spine. With a single level it is checked once against the larger minimum.
SpareReport CheckSpareReserve(const Cluster& cluster, int min_per_leaf, int min_per_spine);

// The nodes a job's own allocation holds back as its hot spares (launcher "slurm", docs/slurm.md): up to
// `count` nodes outside the placement and `exclude`, schedulable, not failed and with every GPU free
// (spare-pool nodes included), closest to the placement first: most of the placement's nodes in the same
// group at the finest level, then at each coarser level; ties by id. Fewer when fewer qualify.
std::vector<std::string> ChooseAllocationSpares(const Cluster& cluster, const Placement& placement, int count,
                                                const std::set<std::string>& exclude);

}  // namespace shepherd
