// Keeping Shepherd's node inventory in step with Slurm's: what changes, decided from both views. Pure; the
// caller (the controller) applies the changes, issues the Slurm commands, and remembers which drains it
// made in Slurm.
//
// Reason conventions (the contract with the controller):
//  - A node Shepherd cordons or fails because Slurm says so carries the reason "slurm: <Slurm's reason>".
//  - A node Shepherd cordons or fails on its own evidence carries any other reason (e.g.
//    "f-000123 sdc_suspected"); Shepherd drains it in Slurm with DrainReasonFor(reason), "shepherd <reason>".
//  - Shepherd never resumes in Slurm a node it did not drain itself: only a node in `drained_by_shepherd`
//    whose Slurm reason still starts with "shepherd " is ever resumed, and only after an operator returned
//    it to service in Shepherd.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/node.h"
#include "slurm/nodes.h"
#include "slurm/topology.h"

namespace shepherd::slurm {

inline constexpr const char* kSlurmReasonPrefix = "slurm: ";
inline constexpr const char* kShepherdDrainPrefix = "shepherd ";

// "shepherd " + reason, unless the reason already starts with it. An empty reason → "shepherd".
std::string DrainReasonFor(const std::string& shepherd_reason);
bool IsShepherdDrainReason(const std::string& slurm_reason);

enum class NodeChangeKind {
  kAdd,            // a node Slurm has and Shepherd does not: `record` is the new node
  kUpdate,         // GPUs, hostname, GPU model or topology changed: `record` is the node to store
  kCordon,         // Slurm drained it: cordon with `reason` ("slurm: ...")
  kFail,           // Slurm says it is down or not responding: fail it with `reason` ("slurm: ...")
  kRelease,        // Slurm returned it to service: clear Shepherd's cordon/failure (and drained_by_shepherd)
  kDrainInSlurm,   // Shepherd blames it and Slurm does not know yet: drain in Slurm with `reason`
  kResumeInSlurm,  // an operator returned a node Shepherd had drained to service in Shepherd: resume it in
                   // Slurm
  kHeldInSlurm,    // Shepherd blames it and Slurm already holds it (someone else's drain): no command; it
                   // joins drained_by_shepherd, so that Slurm returning it to service returns it in Shepherd
  kMissing,        // Shepherd has it, Slurm no longer does
  kSkipped,        // Slurm has it but it cannot be a Shepherd node (no GPUs in its Gres): `reason` says why
};
const char* ToString(NodeChangeKind k);

struct NodeChange {
  NodeChangeKind kind = NodeChangeKind::kAdd;
  std::string node;
  std::string reason;
  Node record;  // kAdd and kUpdate only
};

struct ReconcileInput {
  std::vector<SlurmNode> slurm;
  TopologyMapping topology;  // labels by node (MapTopology)
  std::vector<Node> shepherd;
  std::set<std::string> drained_by_shepherd;  // nodes Shepherd has drained in Slurm and not resumed
  // Properties Slurm does not know, for new nodes (from the daemon's configuration).
  double gpu_memory_gib = 80;
  std::string gpu_model = "H100";  // used when the Gres has no type
};

// The node a Slurm record describes, as Shepherd would first store it: id = name, hostname = NodeAddr,
// GPUs and model from the Gres, topology labels from `topology`, nvlink_domain empty (the node itself),
// schedulable/failed and reason from the Slurm state (ShepherdStateOf; reason "slurm: ...").
Node NodeFromSlurm(const SlurmNode& s, const TopologyMapping& topology, double gpu_memory_gib,
                   const std::string& default_gpu_model);

// The changes that bring Shepherd in line with Slurm, and Slurm in line with Shepherd's own drains, sorted
// by node name (within a node: kUpdate before state changes). Rules per node, Slurm's state S:
//  - only in Slurm → kAdd (or kSkipped without GPUs); only in Shepherd → kMissing.
//  - capacity, hostname or topology differ → kUpdate (Shepherd's flags and reason kept).
//  - S failed (ShepherdStateOf == kFailed) and Shepherd's node not failed → kFail; failed on Shepherd's own
//    evidence and not in drained_by_shepherd: kDrainInSlurm, or kHeldInSlurm when Slurm already drains it.
//  - S drained: with a "shepherd " reason, the node in drained_by_shepherd and schedulable in Shepherd →
//    kResumeInSlurm; else if Shepherd's node is schedulable and not failed → kCordon; held on Shepherd's
//    own evidence and not in drained_by_shepherd → kHeldInSlurm.
//  - S usable: Shepherd's cordon/failure came from Slurm ("slurm: ") → kRelease; it is Shepherd's own and
//    the node is in drained_by_shepherd (someone resumed it in Slurm) → kRelease; it is Shepherd's own and
//    not yet drained → kDrainInSlurm.
std::vector<NodeChange> Reconcile(const ReconcileInput& in);

}  // namespace shepherd::slurm
