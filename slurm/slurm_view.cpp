#include "slurm/slurm_view.h"

namespace shepherd::slurm {

Result<SlurmView> ReadSlurmView(const SlurmCli& cli, const TopologyLevels& levels) {
  auto nodes = cli.ShowNodes();
  if (!nodes.ok()) return nodes.status();
  auto switches = cli.ShowTopology();
  if (!switches.ok()) return switches.status();
  auto topology = MapTopology(*switches, levels);
  if (!topology.ok()) return topology.status();
  return SlurmView{std::move(*nodes), std::move(*topology)};
}

}  // namespace shepherd::slurm
