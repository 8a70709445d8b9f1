// A GPU node of the inventory. Its state is derived from flags and allocation, never stored on its own.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace shepherd {

// Topology level names, coarse to fine, excluding nvlink_domain. The one definition: the daemon's
// configuration, node parsing and the Cluster all use it.
using TopologyLevels = std::vector<std::string>;
inline TopologyLevels DefaultTopologyLevels() {
  return {"spine", "leaf"};
}

// kDraining / kDrained: cordoned by an operator's drain, with ranks still running on it / with none left.
enum class NodeState { kAvailable, kAllocated, kSpare, kCordoned, kFailed, kDraining, kDrained };
const char* ToString(NodeState s);
std::optional<NodeState> NodeStateFromString(std::string_view s);

// Node ids: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (docs/api.md): they appear in URL paths, file names and
// logs, so "." and ".." (and anything starting with '.' or '-') are refused.
bool ValidNodeId(const std::string& s);

// The most GPUs one node may have (POST /v1/nodes `gpus`; a GPU fault's index is below the node's count):
// placement keeps a node's GPUs in a 64-bit mask (scheduler/cluster.h).
inline constexpr int kMaxNodeGpus = 64;
// A GPU fault's `kind` (the site probe's word) and `detail`, in bytes (docs/agent-protocol.md).
inline constexpr std::size_t kMaxGpuFaultKind = 64;
inline constexpr std::size_t kMaxGpuFaultDetail = 1024;
// A heartbeat's `processes` and each entry's `flight_recorder` dumps (docs/agent-protocol.md). A node runs
// at most one rank per GPU; the other entries are exits not yet acknowledged and ranks being stopped. A hang
// finding keeps at most 4 new dumps per rank. Small enough that the largest heartbeat the daemon accepts is
// converted in about a millisecond on its control thread; the agent sends no more than these.
inline constexpr std::size_t kMaxHeartbeatProcesses = 256;
inline constexpr std::size_t kMaxHeartbeatDumps = 8;

struct Node {
  std::string id;
  std::string hostname;
  int gpus = 8;
  double gpu_memory_gib = 80;
  std::string gpu_model = "H100";
  // Labels by topology level, coarse to fine, e.g. {"spine": "s0", "leaf": "l03"}. Level names come from
  // the daemon's configuration (default spine, leaf).
  std::map<std::string, std::string> topology;
  // GPUs of one NVLink domain talk at NVLink speed. Defaults to the node id (an 8-GPU HGX node); NVL72-style
  // racks share one name across their 18 nodes.
  std::string nvlink_domain;
  bool spare = false;       // held aside for replacement, never used for first placement
  bool schedulable = true;  // false: cordoned by an operator or by recovery
  bool failed = false;      // declared failed by health/recovery; cleared by an operator PATCH
  // An operator's drain (only with schedulable false): no new work, its running ranks run on until their
  // jobs end or move. Lifted with the cordon.
  bool drain = false;
  std::string reason;  // why cordoned or failed
  // Who cordoned or failed it: "operator", the id of the finding that did ("f-000123"), or "agent" (a GPU
  // fault its agent reported while no running job of ours used the node). Only a node
  // cordoned by a finding returns by itself (after passing its agent's health check; docs/recovery.md).
  std::string cordon_source;
  std::optional<Time> cordoned_at;
  bool agent_attached = false;
  Time created_at{};
  Time updated_at{};
};

// REQUIRES: allocated_gpus is the number of GPUs of `n` held by running attempts.
NodeState StateOf(const Node& n, int allocated_gpus);

}  // namespace shepherd
