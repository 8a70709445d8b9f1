// Who is where: the rank → (tp, cp, dp, pp, node) map of one attempt, the members of each rank's
// TP/CP/DP/PP group, and the SDC replica sets. Built once per attempt from Plan + Placement; immutable
// afterwards.
//
// Memory: about 20 bytes per rank (coordinates, node index, coordinate→rank index, replica-set order)
// plus one string per distinct node. Thread-safe for concurrent reads once built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "health/report.h"

namespace shepherd {

// Along j = cp + CP·dp, the period after which ranks of one tp index hold the same routed-expert shard:
// etp·ep / gcd(tp, etp·ep) (ep when etp = tp; 1 when no expert is split over the data-parallel ranks).
int ExpertShardStride(const Plan& plan);

class RankLayout {
 public:
  // `hybrid_shard_size` (ZeRO-3 only): ranks per shard group in hybrid sharding (HSDP), i.e. the DP
  // mesh is (replica, shard) with shard = dp % hybrid_shard_size. 0 (or dp) means plain ZeRO-3.
  // Fails (kInvalidContent) when the placement does not hold exactly plan.world_size() ranks, indexed by
  // rank, with coordinates inside the plan and each coordinate triple used once.
  static Result<RankLayout> Build(const Plan& plan, const Placement& placement, int hybrid_shard_size);

  int world_size() const { return static_cast<int>(coords_.size()); }
  const Plan& plan() const { return plan_; }
  int tp(int rank) const { return coords_[rank].tp; }
  int pp(int rank) const { return coords_[rank].pp; }
  int dp(int rank) const { return coords_[rank].dp; }
  int cp(int rank) const { return coords_[rank].cp; }
  const std::string& node(int rank) const { return nodes_[node_of_[rank]]; }
  int node_index(int rank) const { return node_of_[rank]; }
  const std::string& node_name(int node_index) const { return nodes_[node_index]; }

  // Members of `rank`'s group of kind g (including rank), ascending. Empty for GroupKind::kOther.
  // tp group: same (cp, dp, pp); cp group: same (tp, dp, pp); dp group: same (tp, cp, pp); pp group: same
  // (tp, cp, dp) — Megatron's groups for rank order tp, cp, dp, pp.
  std::vector<int> GroupMembers(int rank, GroupKind g) const;

  // Replica sets for the SDC hash vote: ranks that must hold identical parameters. Context-parallel peers
  // are replicas like data-parallel ones: they hold the same parameters (gradients are reduced over dp·cp)
  // and only see different parts of each sequence, so the sets run over the dp·cp ranks of one (tp, pp),
  // indexed j = cp + CP·dp. ZeRO ≤ 2: all of them; with routed experts split over ranks those with equal
  // j % ExpertShardStride(plan) (ep when etp = tp). ZeRO-3 with hybrid sharding: equal j % shard.
  // Plain ZeRO-3, ZeRO-3 with ep > 1, a stride ≥ dp·cp or dp·cp == 1: none (replica_sets_reason() says
  // why).
  int replica_set_count() const {
    return static_cast<int>(replica_offsets_.empty() ? 0 : replica_offsets_.size() - 1);
  }
  // Members of replica set i, ascending by rank.
  std::vector<int> ReplicaSet(int i) const;
  const std::string& replica_sets_reason() const { return replica_reason_; }

  // Sorted, de-duplicated node names of `ranks`.
  std::vector<std::string> NodesOf(const std::vector<int>& ranks) const;

 private:
  struct Coord {
    int32_t tp, pp, dp, cp;
  };
  int RankAt(int tp, int pp, int dp, int cp = 0) const {
    return by_coord_[((pp * plan_.dp + dp) * plan_.cp + cp) * plan_.tp + tp];
  }

  Plan plan_;
  std::vector<Coord> coords_;             // by rank
  std::vector<int32_t> node_of_;          // by rank → index into nodes_
  std::vector<std::string> nodes_;        // distinct node names
  std::vector<int32_t> by_coord_;         // (pp, dp, cp, tp) → rank
  std::vector<int32_t> replica_ranks_;    // replica sets, concatenated
  std::vector<int32_t> replica_offsets_;  // set i is replica_ranks_[offsets[i], offsets[i+1])
  std::string replica_reason_;
};

}  // namespace shepherd
