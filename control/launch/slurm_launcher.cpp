#include "control/launch/slurm_launcher.h"

#include <algorithm>
#include <unordered_set>

#include "scheduler/spares.h"

namespace shepherd {

bool PlacedWithin(const Placement& p, const std::vector<std::string>& nodes) {
  return std::all_of(p.ranks.begin(), p.ranks.end(), [&](const RankSlot& r) {
    return std::find(nodes.begin(), nodes.end(), r.node) != nodes.end();
  });
}

std::vector<std::string> NodesInRankOrder(const Placement& p) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const RankSlot& r : p.ranks)
    if (seen.insert(r.node).second) out.push_back(r.node);
  return out;
}

Status SlurmLauncher::Admit(bool daemon_slurm) const {
  if (daemon_slurm) return Status::Ok();
  return InvalidContent("this daemon does not launch through Slurm",
                        {{"launcher", "\"slurm\" needs shepherdd started with --slurm (docs/slurm.md)"}});
}

LaunchGates SlurmLauncher::GatesFor(int) const {
  return {};
}

SlurmLauncher::AllocationChange SlurmLauncher::AllocationFor(const Job& job, const Placement& p,
                                                             const SlurmAllocationRecord* held,
                                                             const Cluster& cluster,
                                                             const std::set<std::string>& taken) const {
  AllocationChange c;
  if (held && !held->adopted && !PlacedWithin(p, held->nodes)) {
    c.release = true;
    held = nullptr;
  }
  if (held) return c;
  c.want = true;
  c.nodes = NodesInRankOrder(p);
  if (job.spec.slurm.allocation.empty()) {
    std::vector<std::string> spares =
        ChooseAllocationSpares(cluster, p, job.spec.resources.spare_nodes, taken);
    c.spares_missing = std::max(0, job.spec.resources.spare_nodes - static_cast<int>(spares.size()));
    c.nodes.insert(c.nodes.end(), spares.begin(), spares.end());
  }
  // A site's own --comment (accounting, tags) is left as it is: that request goes unnamed.
  const std::vector<std::string>& args = job.spec.slurm.sbatch_args;
  c.named = std::none_of(args.begin(), args.end(),
                         [](const std::string& a) { return a.rfind("--comment", 0) == 0; });
  return c;
}

}  // namespace shepherd
