// Placement benchmark: topology-aware Place against two naive baselines on the same inventory.
//   (a) 16,384 ranks (TP 8, PP 16, DP 128) on 2,112 nodes (4 spines × 16 leaves × 33, 1 spare per leaf)
//   (b) 131,072 ranks (TP 8, PP 16, DP 1024) on 16,896 nodes (32 spines × 16 leaves × 33)
// Baselines fill GPUs sequentially over the usable nodes taken in hostname-lexicographic order (node1,
// node10, node100, ... as a c10d rendezvous sorts them) or in a random order (mt19937, seed 42).
// Edge weights model Llama-3-405B-like traffic per rank-to-rank edge per step:
//   DP: ring all-reduce of bf16 gradients, 2·(405e9 / (TP·PP))·2 B ≈ 12.6 GB;
//   PP: activations s·b·h·2 B / TP (sequence parallel) = 8192·1·16384·2/8 B, forward and backward,
//       16 micro-batches ≈ 1.07 GB.
// Usage: placement_bench [runs]   (default 7; wall time is the median over runs)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/inventory_gen.h"
#include "scheduler/placement.h"

namespace shepherd {
namespace {

constexpr double kDpEdgeBytes = 12.6e9;
constexpr double kPpEdgeBytes = 1.07e9;

Placement Sequential(const std::vector<const Node*>& order, const Plan& plan) {
  Placement p;
  p.ranks.reserve(plan.world_size());
  size_t n = 0;
  int gpu = 0;
  for (int r = 0; r < plan.world_size(); ++r) {
    if (gpu == order[n]->gpus) ++n, gpu = 0;
    const int tp = r % plan.tp, dp = (r / plan.tp) % plan.dp, pp = r / (plan.tp * plan.dp);
    p.ranks.push_back(RankSlot{r, order[n]->id, gpu++, tp, pp, dp});
  }
  return p;
}

void Row(const char* name, double ms, const PlacementQuality& q) {
  const std::string time = ms < 0 ? "-" : std::to_string(ms).substr(0, std::to_string(ms).find('.') + 3);
  std::printf("| %-30s | %9s | %5d | %9lld | %9lld | %14.3e | %14.3e |\n", name, time.c_str(),
              q.tp_groups_split, static_cast<long long>(q.cross_leaf_edges),
              static_cast<long long>(q.cross_spine_edges), q.cross_leaf_bytes_per_step,
              q.cross_spine_bytes_per_step);
}

void Run(const char* title, const InventoryShape& shape, const Plan& plan, int runs) {
  Cluster c;
  for (const Node& n : GenerateInventory(shape)) c.UpsertNode(n);
  PlaceOptions o;
  o.dp_edge_bytes = kDpEdgeBytes;
  o.pp_edge_bytes = kPpEdgeBytes;
  std::vector<double> ms;
  Placement placed;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = Place(c, plan, o);
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      std::printf("Place failed: %s\n", r.status().message().c_str());
      std::exit(1);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    placed = std::move(*r);
  }
  std::sort(ms.begin(), ms.end());
  const auto t0 = std::chrono::steady_clock::now();
  const PlacementQuality q = EvaluatePlacement(c, plan, placed, kDpEdgeBytes, kPpEdgeBytes);
  const double eval_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!c.Allocate("bench", placed).ok() || !c.Release("bench").ok()) {  // proves no GPU is shared
    std::printf("Place produced an invalid placement\n");
    std::exit(1);
  }

  std::vector<const Node*> usable;
  for (const Node* n : c.nodes()) {
    if (IsUsable(*n)) usable.push_back(n);
  }
  std::sort(usable.begin(), usable.end(),
            [](const Node* a, const Node* b) { return a->hostname < b->hostname; });
  const Placement lex = Sequential(usable, plan);
  std::mt19937 rng(42);
  std::shuffle(usable.begin(), usable.end(), rng);
  const Placement random = Sequential(usable, plan);

  std::printf(
      "\n%s: %d ranks (TP %d, PP %d, DP %d) on %d nodes, %lld usable GPUs; %d runs, "
      "EvaluatePlacement %.2f ms\n\n",
      title, plan.world_size(), plan.tp, plan.pp, plan.dp, c.size(), static_cast<long long>(c.UsableGpus()),
      runs, eval_ms);
  std::printf("| %-30s | %9s | %5s | %9s | %9s | %14s | %14s |\n", "placement", "median ms", "split",
              "x-leaf", "x-spine", "x-leaf B/step", "x-spine B/step");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(11, '-').c_str(),
              std::string(7, '-').c_str(), std::string(11, '-').c_str(), std::string(11, '-').c_str(),
              std::string(16, '-').c_str(), std::string(16, '-').c_str());
  Row("Place (topology-aware)", ms[ms.size() / 2], q);
  // The same Place told that DP and PP edges weigh the same: it picks the layout with the fewest edges.
  o.dp_edge_bytes = o.pp_edge_bytes = 1.0;
  auto equal = Place(c, plan, o);
  const auto t2 = std::chrono::steady_clock::now();
  (void)Place(c, plan, o);
  const double equal_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t2).count();
  Row("Place, weights 1:1 (one run)", equal_ms,
      EvaluatePlacement(c, plan, *equal, kDpEdgeBytes, kPpEdgeBytes));
  Row("hostname-lexicographic", -1, EvaluatePlacement(c, plan, lex, kDpEdgeBytes, kPpEdgeBytes));
  Row("random order (seed 42)", -1, EvaluatePlacement(c, plan, random, kDpEdgeBytes, kPpEdgeBytes));
}

}  // namespace
}  // namespace shepherd

int main(int argc, char** argv) {
  using namespace shepherd;
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  Plan a;
  a.tp = 8, a.pp = 16, a.dp = 128;
  Run("(a)", {.spines = 4, .leaves_per_spine = 16, .nodes_per_leaf = 33}, a, runs);
  Plan b = a;
  b.dp = 1024;
  Run("(b)", {.spines = 32, .leaves_per_spine = 16, .nodes_per_leaf = 33}, b, runs);
  return 0;
}
