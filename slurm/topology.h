// Slurm's switch hierarchy (`scontrol show topology`, topology/tree) mapped onto Shepherd's topology
// levels (core/node.h, TopologyLevels). Pure.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/node.h"
#include "core/status.h"

namespace shepherd::slurm {

struct SlurmSwitch {
  std::string name;
  int level = 0;                      // 0: a leaf switch; a parent is one more than its highest child
  std::vector<std::string> nodes;     // expanded, every node below this switch
  std::vector<std::string> switches;  // expanded child switch names
};

// Parses `scontrol show topology` (one `SwitchName=... Level=... Nodes=... Switches=...` per line). Empty
// output (topology/none) → no switches. kInvalidArgument: a bad Level or hostlist.
Result<std::vector<SlurmSwitch>> ParseTopology(std::string_view scontrol_output);

// Level names for a tree `depth` switch levels deep, coarse to fine: 0 or 1 → {"leaf"}, 2 → {"spine",
// "leaf"}, 3 → {"core", "spine", "leaf"}, more → {"level<depth-1>", ..., "level0"}.
TopologyLevels DefaultLevelNames(int depth);

struct TopologyMapping {
  TopologyLevels levels;
  // node → {level name → switch name}. A node no switch names has no entry (Cluster puts it in a group of
  // its own at every level).
  std::map<std::string, std::map<std::string, std::string>> labels;
  // Set when the tree's depth differs from the configured level names (said once by the caller).
  std::string note;
};

// The switch tree's depth is 1 + the highest Level. Each node's finest label is the lowest-level switch that
// lists it, and the labels above follow its parents (Switches=) up to a root. Where a branch is shorter
// than the tree (a leaf switch directly under a level-2 switch), a missing coarser label repeats the next
// finer one, so the node's group there holds just its branch. A node whose lowest switch is not a leaf
// switch has no labels below it (alone at those levels).
// `levels` names the levels coarse to fine; empty → DefaultLevelNames(depth). The names are matched to the
// tree from its leaf switches up: a tree deeper than the names leaves its coarsest switch levels out (they
// only group what the named levels already group), a shallower one gives the names above its top level
// the top level's switch. Either way `note` says so and names `topology_levels`; the nodes are imported
// all the same (refusing them would stop mirroring every drain and outage of the cluster).
Result<TopologyMapping> MapTopology(const std::vector<SlurmSwitch>& switches,
                                    const TopologyLevels& levels = {});

}  // namespace shepherd::slurm
