// Silent-data-corruption vote over parameter hashes. Ranks report a hash of their parameters at check
// steps; ranks of one replica set (RankLayout::ReplicaSet) must agree.
//
// A check for step s opens with its first hash and resolves at the first Resolve() after every rank
// reported s, or once `deadline_s` passed since that first hash. Missing hashes at the deadline are
// evidence (SdcCheckResult::missing), never an SDC; the present members are still compared. Hashes that
// arrive after their check resolved are counted as late and ignored.
// Vote per replica set: all equal → agree. Otherwise with ≥ 3 present members and a strict majority, of
// the set's ranks and of their nodes (ranks of one node may corrupt alike), the minority is suspected; with 2
// members, or no strict majority, every present member is suspected and a replay is needed (restart from
// last-known-good and recompute; a recurrence on the same node makes it persistent).
//
// Each rank keeps two hash slots in RankState, so at most two checks can be open per rank; a third
// overwrites the older slot (that rank then counts as missing for the old check; a check no rank holds a
// hash for any more is dropped). So open checks are at most two per rank, whatever steps a rank reports.
// Updates RankState::kSdcSuspected: set when a rank is suspected, cleared when a later check agrees on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "health/rank_layout.h"
#include "health/rank_state.h"

namespace shepherd {

// 64-bit digest of a hex hash string, case-insensitive (equal digests stand for equal hashes).
uint64_t HashDigest(const std::string& hex);

// One replica set whose members disagree at a check.
struct SdcMismatch {
  int replica_set = 0;
  std::vector<int> suspects;         // ascending
  std::vector<int> newly_suspected;  // suspects whose incident was not already open
  std::vector<int> majority;         // ranks holding the majority hash; empty without a majority
  bool needs_replay = false;
  bool no_agreement = false;  // 3+ replicas, every hash different: not replicated state (SdcVerdict)
  std::string detail;
};

struct SdcCheckResult {
  int64_t step = 0;
  Time first_seen{};        // when the check's first hash arrived (a finding's onset_at)
  bool complete = false;    // every rank's hash arrived before the deadline
  bool all_agreed = false;  // complete, and every replica set agreed
  int missing_count = 0;
  std::vector<int> missing;  // first ranks without a hash (at most 64)
  std::vector<SdcMismatch> mismatches;
};

class SdcChecker {
 public:
  SdcChecker(const RankLayout& layout, double deadline_s) : layout_(layout), deadline_s_(deadline_s) {}

  bool enabled() const { return layout_.replica_set_count() > 0; }
  // REQUIRES: 0 <= rank < world size.
  void OnHash(std::vector<RankState>& ranks, int rank, int64_t step, uint64_t digest, Time now);
  // Resolves every check that is complete or past its deadline, oldest first.
  std::vector<SdcCheckResult> Resolve(std::vector<RankState>& ranks, Time now);

  std::optional<int64_t> last_agreed_step() const { return last_agreed_; }
  int open_checks() const { return static_cast<int>(open_.size()); }
  uint64_t late_hashes() const { return late_; }
  // Some rank has reported a parameter hash.
  bool any_hash() const { return last_resolved_.has_value() || !open_.empty() || late_ > 0; }

 private:
  struct OpenCheck {
    int64_t step;
    Time first_seen;
    int received;
  };
  SdcCheckResult Compare(std::vector<RankState>& ranks, const OpenCheck& c);
  size_t DistinctNodes(std::vector<int> ranks) const;

  const RankLayout& layout_;
  double deadline_s_;
  std::vector<OpenCheck> open_;  // few: one per check step in flight
  std::optional<int64_t> last_agreed_;
  std::optional<int64_t> last_resolved_;  // hashes for steps at or below it are late
  uint64_t late_ = 0;
};

}  // namespace shepherd
