#include "scheduler/inventory_gen.h"

#include <cstdio>

namespace shepherd {
namespace {

constexpr int kNvl72NodesPerRack = 18;
constexpr int kNvl72GpusPerNode = 4;

std::string Format(const char* fmt, int a, int b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

}  // namespace

std::vector<Node> GenerateInventory(const InventoryShape& shape) {
  std::vector<Node> out;
  out.reserve(static_cast<size_t>(shape.spines) * shape.leaves_per_spine * shape.nodes_per_leaf);
  int n = 0;
  for (int s = 0; s < shape.spines; ++s) {
    const std::string spine = Format("s%d", s);
    for (int l = 0; l < shape.leaves_per_spine; ++l) {
      const std::string leaf = Format("s%d-l%02d", s, l);
      for (int k = 0; k < shape.nodes_per_leaf; ++k) {
        ++n;
        Node node;
        node.id = Format("node-%05d", n);
        node.hostname = Format("node%d", n);
        node.gpus = shape.nvl72 ? kNvl72GpusPerNode : shape.gpus_per_node;
        node.gpu_memory_gib = shape.gpu_memory_gib;
        node.gpu_model = shape.gpu_model;
        node.topology = {{shape.spine_level, spine}, {shape.leaf_level, leaf}};
        node.nvlink_domain = shape.nvl72 ? leaf + Format("-r%d", k / kNvl72NodesPerRack) : node.id;
        node.spare = k >= shape.nodes_per_leaf - shape.spares_per_leaf;
        out.push_back(std::move(node));
      }
    }
  }
  return out;
}

}  // namespace shepherd
