// Inventory: the node inventory and the GPU allocations on it.
// Owns: the Cluster (nodes, their flags and which job holds which GPU) and the list index (each node's state
// in id order, counts by state), kept in step on every change so a page of List costs the page, not the
// inventory. Changed on the control thread only; const methods also run on the reader thread
// (control/controller.h, "Threading"; REQUIRES(kControl) / REQUIRES_SHARED(kControl), checked by clang).
// Invariants: every node change is added to the caller's WriteBatch in the same call that makes it; a node
// holding GPUs of a running attempt is never made a spare nor deleted; allocations change only through
// JobBook (Allocate/Release), which keeps them equal to the placements of running attempts and of restarts
// waiting for their backoff (JobBook::Hold).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/control_lock.h"
#include "core/node.h"
#include "core/status.h"
#include "core/time.h"
#include "health/unknown_processes.h"
#include "scheduler/cluster.h"
#include "scheduler/recovery.h"
#include "scheduler/spares.h"
#include "storage/store.h"

namespace shepherd {

struct NodePatch {
  std::optional<bool> schedulable;
  std::optional<bool> spare;
  std::optional<bool> failed;  // only false is accepted from users: clears a failure after repair
  bool drain = false;          // an operator's drain: cordons the node and marks it draining
  std::optional<std::string> reason;
};

struct NodeFilter {
  std::optional<NodeState> state;
  std::optional<bool> spare;
  std::map<std::string, std::string> topology;  // level (or nvlink_domain) -> label
  // Paging: matching nodes in id order after `after` (exclusive; "" from the start), at most `limit`.
  std::string after;
  std::size_t limit = SIZE_MAX;
};

// A node as the API shows it: the record plus what is derived from allocations.
struct NodeView {
  Node node;
  NodeState state = NodeState::kAvailable;
  int allocated_gpus = 0;
  std::vector<std::string> jobs;
  std::vector<UnknownProcess> unknown_processes;  // filled by the Controller from AgentBoard
};

struct NodeList {
  std::vector<NodeView> nodes;  // those matching the filter (one page of them, in id order)
  bool more = false;            // more matching nodes follow the page
  // Over the whole inventory, whatever the filter:
  std::map<NodeState, int> by_state;
  int total = 0;
  int64_t usable_gpus = 0;
  int64_t free_usable_gpus = 0;
  std::vector<SpareDeficit> spare_deficits;
};

struct SpareMinimums {
  int per_leaf = 0;
  int per_spine = 0;
};

class Inventory {
 public:
  Inventory(TopologyLevels levels, SpareMinimums spares) : cluster_(std::move(levels)), spares_(spares) {}

  // Registers or updates a node. `schedulable_given`: the request named `schedulable` (otherwise an update
  // keeps the current cordon). Health flags (failed, reason, agent_attached) survive re-registration.
  // kConflict when the change would drop GPUs a job holds or make a busy node a spare.
  Result<NodeView> Upsert(Node node, bool schedulable_given, Time now, WriteBatch* batch, bool* created)
      REQUIRES(kControl);
  Result<NodeView> Patch(const std::string& id, const NodePatch& patch, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // kConflict while ranks run on it.
  Result<NodeView> Remove(const std::string& id, WriteBatch* batch) REQUIRES(kControl);
  // Recovery's verdict on a node: cordon (suspected) or fail, with the reason and the finding that made it
  // (`source`). Unknown nodes are skipped.
  void Apply(const NodeAction& action, const std::string& source, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // A node cordoned by a finding passed its agent's health check often enough: schedulable again. False
  // (nothing changed) unless it is cordoned, not failed, and not cordoned by an operator.
  bool ReturnSuspect(const std::string& id, Time now, WriteBatch* batch) REQUIRES(kControl);
  // The node's agent attached for the first time (node liveness applies to it from now on).
  void MarkAgentAttached(const std::string& id, Time now, WriteBatch* batch) REQUIRES(kControl);
  // Recovery at start-up: a stored node, as it was.
  Status Restore(const Node& node) REQUIRES(kControl);

  Status Allocate(const std::string& job, const Placement& p) REQUIRES(kControl);
  void Release(const std::string& job) REQUIRES(kControl);

  std::optional<NodeView> View(const std::string& id) const REQUIRES_SHARED(kControl);
  NodeList List(const NodeFilter& filter) const REQUIRES_SHARED(kControl);
  std::vector<SpareDeficit> SpareDeficits() const REQUIRES_SHARED(kControl);
  const Cluster& cluster() const REQUIRES_SHARED(kControl) { return cluster_; }
  // Nodes by state, kept as they change (no zero entries).
  const std::map<NodeState, int>& by_state() const REQUIRES_SHARED(kControl) { return by_state_; }
  const Node* Find(const std::string& id) const REQUIRES_SHARED(kControl) { return cluster_.Find(id); }
  // Nodes whose state (NodeView::state) changed, or that came or went, since the last call (events).
  std::set<std::string> TakeChanged() REQUIRES(kControl) { return std::exchange(changed_, {}); }

 private:
  NodeView ViewOf(const Node& n) const REQUIRES_SHARED(kControl);
  Result<NodeView> Store(Node n, WriteBatch* batch) REQUIRES(kControl);
  // Re-derives the node's entry of the list index (drops it when the node is gone).
  void Recount(const std::string& id) REQUIRES(kControl);
  // The nodes where `job` holds GPUs, each once.
  std::vector<std::string> NodesHeldBy(const std::string& job) const REQUIRES_SHARED(kControl);

  Cluster cluster_;
  std::map<std::string, NodeState> states_;  // every node, by id
  std::map<NodeState, int> by_state_;        // counts of states_ (no zero entries)
  std::set<std::string> changed_;            // TakeChanged
  SpareMinimums spares_;
};

}  // namespace shepherd
