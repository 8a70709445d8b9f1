// The GPU inventory as the scheduler sees it: nodes, their topology and which GPUs each job holds.
//
// Ownership and threading: a Cluster is a plain value owned by the daemon's single control thread. It is
// not thread-safe; copies are independent (what-if placement may work on a copy).
//
// Topology: levels are named coarse to fine (default {"spine", "leaf"}); the code never assumes their names
// or count (1..n levels). A node's group at level k is identified by the path of its labels at levels
// 0..k, so a leaf label that repeats under two spines names two different leaves. A node without a label
// at some level is alone in its own group at that level and every finer one. NVLink domains are separate
// from the levels: `nvlink_domain` (empty means the node id) names a set of GPUs that talk at NVLink speed.
//
// Ids, labels and domains are interned to small ints, and per-node state lives in dense vectors, so the
// placement code runs on integers; an inventory of 16,896 nodes costs a few MB.
//
// Indexes kept up to date on every change (so a write never walks the inventory): per NVLink
// domain its member nodes, the GPUs and free GPUs of its usable nodes and its leaf; each group's parent;
// per group, its domains by free GPUs and its children with free GPUs (Place), and its ready nodes by free
// GPUs (ReplaceNode); the smallest GPU memory of a usable node and the smallest usable GPU count of a
// domain. Upsert, Allocate and Release cost O(levels · log nodes + GPUs); RemoveNode stays O(nodes) (it
// renumbers).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/job.h"
#include "core/node.h"
#include "core/status.h"

namespace shepherd {

// The largest GPU count of one node (free GPUs are a 64-bit mask).
inline constexpr int kMaxGpusPerNode = kMaxNodeGpus;  // a node's GPUs are one 64-bit mask

// A node that first placement may use: not spare, schedulable and not failed.
inline bool IsUsable(const Node& n) {
  return !n.spare && n.schedulable && !n.failed;
}

class Cluster {
 public:
  // REQUIRES: levels is not empty and its names are distinct.
  explicit Cluster(TopologyLevels levels = DefaultTopologyLevels());

  const TopologyLevels& levels() const { return levels_; }

  // Adds the node, or replaces the record of the node with the same id and keeps its allocation.
  // kInvalidArgument: empty id, or gpus outside 1..kMaxGpusPerNode. kConflict: the new GPU count would drop
  // a GPU that a job holds.
  Status UpsertNode(const Node& n);
  // kNotFound: unknown id. kConflict: a job holds a GPU of the node. Other nodes keep their relative order.
  Status RemoveNode(const std::string& id);

  const Node* Find(const std::string& id) const;
  // All nodes in insertion order (stable: allocation changes never reorder them).
  std::vector<const Node*> nodes() const;
  int size() const { return static_cast<int>(nodes_.size()); }

  // Per node by id; an unknown id has no GPUs, no jobs and an empty mask.
  int AllocatedGpus(const std::string& id) const;
  uint64_t FreeGpuMask(const std::string& id) const;             // bit g set: GPU g is free
  std::vector<std::string> JobsOn(const std::string& id) const;  // sorted

  // Marks the GPUs of every rank of `placement` as held by `job_id`, all or nothing.
  // REQUIRES: every GPU named is free. kConflict: a GPU is held (by anyone, including the same placement
  // twice) or job_id already holds GPUs. kNotFound: unknown node. kInvalidArgument: GPU index out of range.
  Status Allocate(const std::string& job_id, const Placement& placement);
  // Frees every GPU of job_id. kNotFound when the job holds nothing.
  Status Release(const std::string& job_id);
  bool Holds(const std::string& job_id) const { return jobs_.count(job_id) != 0; }

  // GPUs of usable nodes (see IsUsable), and those of them that no job holds. O(1).
  int64_t UsableGpus() const { return usable_gpus_; }
  int64_t FreeUsableGpus() const { return free_usable_gpus_; }

  // ---- Interned view for the placement algorithms. Indexes are valid until the next UpsertNode or
  // RemoveNode. Group ids at level k are in [0, group_count(k)); domain ids in [0, domain_count()).
  int IndexOf(const std::string& id) const;  // -1 when unknown
  const Node& node(int i) const { return nodes_[i].node; }
  uint64_t free_mask(int i) const { return nodes_[i].free; }
  int group(int i, int level) const { return nodes_[i].groups[level]; }
  int group_count(int level) const { return static_cast<int>(group_labels_[level].size()); }
  const std::string& group_label(int level, int g) const { return group_labels_[level][g]; }
  int domain(int i) const { return nodes_[i].domain; }
  int domain_count() const { return static_cast<int>(domain_ids_.size()); }
  // Nodes of domain d in index order (usable or not).
  const std::vector<int>& domain_members(int d) const { return domains_[d].members; }
  // GPUs of the usable nodes of domain d, and how many of them no job holds.
  int64_t domain_usable_gpus(int d) const { return domains_[d].usable_gpus; }
  int64_t domain_free_gpus(int d) const { return domains_[d].free_gpus; }
  // The finest-level group of domain d's first usable member; -1 when none is usable.
  int domain_leaf(int d) const { return domains_[d].leaf; }
  // The GPUs job_id holds, as (node index, mask) in node order; empty when it holds none.
  const std::vector<std::pair<int, uint64_t>>& HeldBy(const std::string& job_id) const;
  // The level-(k-1) group that level-k group g lies in (k >= 1).
  int parent_group(int level, int g) const { return parents_[level][g]; }
  // Smallest GPU memory of a usable node, and largest usable GPU count of an NVLink domain (the widest TP
  // group placement can keep whole: smaller domains just offer it no slot); nullopt / 0 when no node is
  // usable. O(1).
  std::optional<double> MinUsableGpuMemory() const;
  int64_t MaxUsableDomainGpus() const;
  // The GPU profile (core/gpu_names.h) every usable node's `gpu_model` names; nullopt when there are none,
  // or they name several, or one names none.
  std::optional<std::string> UsableGpuModel() const;

  // Ready nodes (schedulable, not failed, at least one free GPU) that are spares (`spare`) or not, by their
  // free GPU count, each count's node ids in id order: of level-k group g, or of the whole cluster
  // (level == levels().size(), g == 0). ReplaceNode goes straight to the smallest id with enough GPUs.
  using ReadyByFree = std::map<int, std::set<std::string>>;
  const ReadyByFree& ready_nodes(bool spare, int level, int g) const { return ready_[spare][level][g]; }

  // Free GPUs of domains as histograms (free GPUs > 0 -> domains), for Place's capacity without a pass
  // over the domains. A domain counts at its leaf (domain_leaf) and every group above it.
  using FreeHistogram = std::map<int64_t, int>;
  const FreeHistogram& free_domains() const { return free_domains_; }  // every domain
  const FreeHistogram& group_free_domains(int level, int g) const { return tree_[level][g].free; }
  // Usable GPUs of domains (> 0) -> domains.
  const FreeHistogram& usable_domains() const { return domain_gpu_counts_; }
  // The children with free GPUs of level-k group g: groups of level k + 1, or domains at the finest level;
  // and the level-0 groups with free GPUs. Ascending ids.
  const std::set<int>& free_children(int level, int g) const { return tree_[level][g].children; }
  const std::set<int>& free_roots() const { return free_roots_; }

 private:
  struct Slot {
    Node node;
    uint64_t free = 0;
    int domain = 0;
    std::vector<int> groups;                                // per level
    std::vector<std::pair<std::string, uint64_t>> holders;  // job id, GPUs it holds here
  };
  struct Domain {
    std::vector<int> members;  // node indexes, ascending
    int64_t usable_gpus = 0;
    int64_t free_gpus = 0;
    int leaf = -1;
    // What the free histograms hold for this domain: its free GPUs and its groups, finest last (empty:
    // nothing).
    int64_t counted_free = 0;
    std::vector<int> counted_chain;
  };
  struct TreeGroup {
    FreeHistogram free;
    std::set<int> children;
  };
  // Adds (sign +1) or removes (-1) the slot's share of every count and index derived from its flags and
  // free GPUs.
  void Account(const Slot& s, int sign);
  void AccountReady(const Slot& s, int sign);
  // Interns the slot's domain and groups (index i), moving it between domain member lists.
  void Intern(Slot& s, int i, bool is_new);
  // Recomputes domain d's leaf and moves its entries in the free histograms to its current free GPUs.
  void RefreshDomain(int d);
  void CountFree(int d, int sign);
  // Moves node i from one sorted member list (none when from is null) to another.
  static void MoveMember(std::vector<int>* from, std::vector<int>& to, int i);

  TopologyLevels levels_;
  std::vector<Slot> nodes_;
  std::unordered_map<std::string, int> index_;
  std::vector<std::unordered_map<std::string, int>> group_ids_;  // per level: label path -> id
  std::vector<std::vector<std::string>> group_labels_;           // per level: id -> label at that level
  std::vector<std::vector<int>> parents_;                        // per level: group id -> parent group id
  std::unordered_map<std::string, int> domain_ids_;
  std::vector<Domain> domains_;               // per domain id
  std::map<int64_t, int> domain_gpu_counts_;  // usable GPUs of a domain (> 0) -> domains
  std::map<std::string, int> model_counts_;   // profile name ("" for none) -> usable nodes
  std::map<double, int> memory_counts_;       // GPU memory (GiB) -> usable nodes
  std::vector<std::vector<TreeGroup>> tree_;  // per level, per group
  std::set<int> free_roots_;
  FreeHistogram free_domains_;
  std::vector<std::vector<ReadyByFree>> ready_[2];  // [spare][level, levels_.size(): all][group]
  std::unordered_map<std::string, std::vector<std::pair<int, uint64_t>>> jobs_;  // job -> (node, GPUs)
  int64_t usable_gpus_ = 0;
  int64_t free_usable_gpus_ = 0;
};

}  // namespace shepherd
