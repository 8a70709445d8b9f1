// Synthetic inventories for tests, benchmarks and demos: a regular spine/leaf fabric.
#pragma once

#include <string>
#include <vector>

#include "core/node.h"

namespace shepherd {

struct InventoryShape {
  int spines = 1;
  int leaves_per_spine = 1;
  int nodes_per_leaf = 1;
  int gpus_per_node = 8;
  double gpu_memory_gib = 80;
  std::string gpu_model = "H100-80GB";
  int spares_per_leaf = 1;  // the last spares_per_leaf nodes of each leaf are spares
  // NVL72-style racks: nodes of 4 GPUs (gpus_per_node is ignored), each run of 18 consecutive nodes of a
  // leaf shares one nvlink_domain (the last rack of a leaf may be smaller).
  bool nvl72 = false;
  std::string spine_level = "spine";  // topology level names, coarse to fine
  std::string leaf_level = "leaf";
};

// Nodes in order spine, leaf, node. Node n (1-based, global) has id "node-%05d" ("node-00001") and hostname
// "node<n>" ("node1", not zero-padded, so lexicographic and numeric orders differ). Spine labels "s0",
// "s1", ...; leaf labels "s<spine>-l<leaf, 2 digits>" ("s0-l00"), unique across spines. nvlink_domain is
// the node id, or "<leaf label>-r<rack>" with nvl72. Every node is schedulable and not failed.
std::vector<Node> GenerateInventory(const InventoryShape& shape);

}  // namespace shepherd
