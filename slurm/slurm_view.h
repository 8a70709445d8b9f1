// Reading Slurm's view of the inventory in one call: the nodes and the switch tree mapped onto Shepherd's
// topology levels, ready for Reconcile (slurm/node_reconcile.h).
#pragma once

#include <vector>

#include "core/status.h"
#include "slurm/cli.h"
#include "slurm/nodes.h"
#include "slurm/topology.h"

namespace shepherd::slurm {

struct SlurmView {
  std::vector<SlurmNode> nodes;
  TopologyMapping topology;
};

// `scontrol show nodes` and `scontrol show topology`, parsed and mapped (MapTopology with `levels`; empty:
// names by depth). Errors of either command or of the mapping are returned as they are. Blocks at most
// 2 × the CLI timeout; thread-safe like SlurmCli.
Result<SlurmView> ReadSlurmView(const SlurmCli& cli, const TopologyLevels& levels = {});

}  // namespace shepherd::slurm
