// Topology-aware placement of a job's ranks, its quality metric, and node replacement. Pure functions of
// a Cluster snapshot: they never modify it (the caller commits a result with Cluster::Allocate).
//
// Rank order (Megatron default, core/job.h): rank = tp + TP·(cp + CP·(dp + DP·pp)). A TP group is the TP
// consecutive ranks of one (pp, dp); it is the unit of placement and always lands inside one NVLink
// domain (one 8-GPU node, or e.g. two 4-GPU nodes of an NVL72 rack). Context parallelism (CP > 1): the
// TP·CP consecutive ranks of one (pp, dp) are placed as one unit inside one NVLink domain when the job can
// be placed that way now (ring attention exchanges K/V chunks every layer); otherwise CP is laid out like an
// inner data- parallel axis (DP' = CP·DP, rank = tp + TP·dp'), whose consecutive replicas the blocked order
// below keeps in one leaf where it can.
//
// Place, step by step:
//  1. Capacity. A domain offers floor(free GPUs of its usable, non-excluded nodes / TP) group slots. If the
//     whole usable inventory (ignoring allocations) cannot hold the job: kInvalidContent. If the free slots
//     cannot: kResourceExhausted. Nothing is taken in either case (gang: all or nothing).
//  2. Selection, best fit, top-down. At each topology level (coarsest first) and then among the domains of
//     a chosen finest-level group: if one child can hold everything still needed, take the child with
//     the fewest free slots that can (tightest fit: partially used leaves before empty ones, so large empty
//     groups and domains stay whole); otherwise take the child with the most slots (fewest children in
//     total) and repeat for the rest. Children are then listed in selection order, which yields a
//     sequence of G = PP·DP slots where one finest-level group's slots are contiguous, and so are a
//     coarsest-level group's.
//  3. Order. The TP groups are laid on that sequence in "blocked" order: blocks of w consecutive DP
//     replicas, each block stage-major: (dp / w, pp, dp % w). w = DP is plain stage-major order (a stage's
//     DP group contiguous); w = 1 keeps each pipeline contiguous; in between, a leaf holds a compact
//     tile of (stages × replicas), which keeps both DP ring edges and PP edges inside it. Every w among the
//     divisors of DP and the powers of two below DP is scored on the selected sequence (O(G) each) and the
//     one with the fewest cross-coarsest-level bytes, then cross-finest-level bytes, wins (smallest w on
//     ties).
//  4. GPUs. Within a domain, a group takes the node with the fewest free GPUs that still holds it whole
//     (lowest GPU indices), or, when none can (NVL72), the nodes with the most free GPUs first.
// Cost: O(ranks + G · candidates + the groups and domains with free GPUs under the groups it descends
// into), from the Cluster's per-group histograms: no pass over every node or domain.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "core/job.h"
#include "core/status.h"
#include "scheduler/cluster.h"

namespace shepherd {

struct PlaceOptions {
  int attempt = 0;                      // copied into the Placement
  std::set<std::string> exclude_nodes;  // never used (e.g. suspects); treated as busy, not as missing
  // Used only when the job cannot be placed without them (nodes whose agent is not heard: a job placed
  // there waits for its launch timeout).
  std::set<std::string> avoid_nodes;
  // What-if without copying the Cluster: the GPUs this job holds count as free (its next attempt), and
  // these nodes count as not usable at all (cordoned or failed by the same decision).
  std::string release_job;
  std::set<std::string> out_of_service;
  // Relative traffic of one DP ring edge and one PP edge per step; used only to choose the rank layout.
  double dp_edge_bytes = 1.0;
  double pp_edge_bytes = 1.0;
};

// kInvalidArgument: tp, cp, pp or dp < 1. kInvalidContent: the job is larger than the usable inventory (or
// TP exceeds every NVLink domain). kResourceExhausted: not enough free GPUs now.
// On success, ranks[r].rank == r and every rank has its own free GPU on a usable node.
Result<Placement> Place(const Cluster& cluster, const Plan& plan, const PlaceOptions& options = {});

// The CP layouts above as cp = 1 plans with the same rank order: TP·CP ranks as one tp-wide unit
// (unit index tp + TP·cp), or CP folded into DP (index cp + CP·dp).
Plan ModelParallelUnit(const Plan& plan);
Plan ContextAsDataParallel(const Plan& plan);

// Communication locality of a placement. Edges are DP ring edges (per (tp, pp): dp -> dp+1, plus the wrap
// DP-1 -> 0 when DP > 2; DP = 2 is one edge) and PP edges (per (tp, dp): pp -> pp+1). An edge whose ends lie
// in different finest-level groups ("leaf") is cross-leaf; in different coarsest-level groups ("spine") it
// is cross-spine and also cross-leaf. With one level, both name that level. Bytes weight each edge by
// dp_edge_bytes or pp_edge_bytes. A rank on an unknown node, or missing, is in a group of its own.
struct PlacementQuality {
  int tp_groups_split = 0;  // TP groups not inside one NVLink domain (CP peers count as DP ring edges)
  int64_t cross_leaf_edges = 0;
  int64_t cross_spine_edges = 0;
  double cross_leaf_bytes_per_step = 0;
  double cross_spine_bytes_per_step = 0;
};

// REQUIRES: placement.ranks is indexed by rank (ranks[r].rank == r) for the ranks it holds.
PlacementQuality EvaluatePlacement(const Cluster& cluster, const Plan& plan, const Placement& placement,
                                   double dp_edge_bytes = 1.0, double pp_edge_bytes = 1.0);

struct ReplaceOptions {
  bool use_spares = true;  // the job's policy.use_spares
  // Fallback: when no spare fits (or use_spares is false), accept a usable non-spare node with enough
  // free GPUs, chosen by the same locality rule.
  bool replace_without_spare = false;
  std::set<std::string> exclude_nodes;  // never chosen (e.g. other suspects)
  std::string release_job;              // the GPUs this job holds count as free (see PlaceOptions)
};

struct Replacement {
  Placement placement;          // the input with exactly the failed node's ranks moved
  std::string spare;            // the node that took them
  bool from_spare_pool = true;  // false: replace_without_spare picked a non-spare node
  // Finest locality kept with the failed node: "nvlink_domain", a level name ("leaf", "spine"), or "any".
  std::string locality;
};

// Picks the replacement node: schedulable, not failed, not the failed node, not excluded, with as many
// free GPUs (free in the cluster and unused by `placement`) as the failed node hosted ranks. Prefers the
// same NVLink domain, then the same group from the finest level to the coarsest, then any; ties go to the
// smallest node id. Ranks keep their local GPU indices when those are free, else take the lowest free ones
// in the same order. A TP group that spans the failed node and another node may only move inside its
// NVLink domain. kInvalidArgument: the failed node hosts no rank. kNotFound: it is not in the cluster.
// kResourceExhausted: no node qualifies.
Result<Replacement> ReplaceNode(const Cluster& cluster, const Placement& placement,
                                const std::string& failed_node, const ReplaceOptions& options = {});

}  // namespace shepherd
