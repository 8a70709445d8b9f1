// SlurmLauncher: jobs launched through Slurm (LaunchMode::kSlurm, "launcher": "slurm", docs/slurm.md): each
// attempt is one srun step inside the job's own allocation. What this mode keeps (allocations, steps, the
// orders for the daemon's worker, which runs sbatch and srun: daemon/slurm_launch_worker.h) is the Slurm
// owner's, control/launch/slurm_owner.h, which the Controller holds.
// Stateless and immutable (control/launch/launcher.h): shared by every thread.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "control/launch/launcher.h"
#include "control/launch/slurm_allocations.h"
#include "scheduler/cluster.h"

namespace shepherd {

// Whether every rank of `p` is on one of `nodes`.
bool PlacedWithin(const Placement& p, const std::vector<std::string>& nodes);
// The placement's nodes in the order of their first rank. Linear: a step may hold 131,072 ranks.
std::vector<std::string> NodesInRankOrder(const Placement& p);

class SlurmLauncher final : public Launcher {
 public:
  LaunchMode mode() const override { return LaunchMode::kSlurm; }
  // Only a daemon started with --slurm launches through Slurm (422 naming `launcher`).
  Status Admit(bool daemon_slurm) const override;
  // No agent gates: the step starts only once the attempt is durable (SlurmOwner::Orders), and
  // Slurm, not an agent, runs the older attempt's step.
  LaunchGates GatesFor(int attempt) const override;
  bool HoldsAllocation() const override { return true; }
  // A step's tasks all see the step's rank tables: they share the attempt's token.
  RankCredential Credential() const override { return RankCredential::kPerStep; }
  // Armed once the step's ranks are known started, as the agents' are.
  JobHealth::Launch Arming() const override { return JobHealth::Launch::kByAgents; }

  // The allocation an attempt of `job` placed at `p`, just started, runs in. `held`: the job's allocation
  // record, if any; `taken`: nodes other jobs' allocations hold (SlurmAllocations::HeldNodes). An allocation that
  // cannot host the placement (a manual restart onto other nodes, a requeued job placed again) is given
  // back for a new one; an adopted one is kept (the job is re-placed inside it once its nodes are known).
  struct AllocationChange {
    bool release = false;            // give the held allocation back
    bool want = false;               // want a new one (or adopt job.spec.slurm.allocation)
    std::vector<std::string> nodes;  // the placement's nodes in rank order, then the spares found
    bool named = false;              // name the request (sbatch --comment); not when the site sets one
    int spares_missing = 0;          // spare nodes asked for that no free node could be
  };
  AllocationChange AllocationFor(const Job& job, const Placement& p, const SlurmAllocationRecord* held,
                                 const Cluster& cluster, const std::set<std::string>& taken) const;
};

}  // namespace shepherd
