// shepherdd gen-inventory: synthetic inventories for demos, tests and benchmarks.
#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>

#include "core/json.h"
#include "daemon/commands.h"
#include "scheduler/inventory_gen.h"

namespace po = boost::program_options;

namespace shepherd {

int RunGenInventory(int argc, char** argv) {
  InventoryShape shape;
  std::string out_path;
  po::options_description opts(
      "Usage: shepherdd gen-inventory [options]\n"
      "Writes {\"nodes\": [...]} for --inventory. Default: 4 spines x 16 leaves x 33 nodes x 8 GPUs, one "
      "spare "
      "per leaf (2,112 nodes). Options");
  opts.add_options()("help,h", "show this help")("spines", po::value<int>(&shape.spines)->default_value(4),
                                                 "spines")(
      "leaves-per-spine", po::value<int>(&shape.leaves_per_spine)->default_value(16),
      "leaves under each spine")("nodes-per-leaf", po::value<int>(&shape.nodes_per_leaf)->default_value(33),
                                 "nodes under each leaf")(
      "gpus", po::value<int>(&shape.gpus_per_node)->default_value(8), "GPUs per node")(
      "gpu-memory-gib", po::value<double>(&shape.gpu_memory_gib)->default_value(80), "GiB per GPU")(
      "spares-per-leaf", po::value<int>(&shape.spares_per_leaf)->default_value(1), "spare nodes per leaf")(
      "nvl72", po::bool_switch(&shape.nvl72), "NVL72-style: 4-GPU nodes, 18 per NVLink domain")(
      "out,o", po::value<std::string>(&out_path), "output file (default stdout)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).positional({}).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "shepherdd gen-inventory: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (shape.spines < 1 || shape.leaves_per_spine < 1 || shape.nodes_per_leaf < 1 || shape.gpus_per_node < 1 ||
      shape.spares_per_leaf < 0 || shape.spares_per_leaf >= shape.nodes_per_leaf) {
    std::cerr << "shepherdd gen-inventory: counts must be positive and spares fewer than nodes per leaf\n";
    return 2;
  }
  Json nodes = Json::array();
  for (const Node& n : GenerateInventory(shape)) {
    Json j = ToJson(n);
    for (const char* k : {"failed", "reason", "agent_attached", "created_at", "updated_at"}) j.erase(k);
    nodes.push_back(std::move(j));
  }
  std::string text = Json{{"nodes", nodes}}.dump(1);
  if (out_path.empty()) {
    std::cout << text << "\n";
    return 0;
  }
  std::ofstream out(out_path);
  out << text << "\n";
  return out ? 0 : 1;
}

}  // namespace shepherd
