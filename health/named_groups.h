// Named groups: the process groups a job's ranks call by a name other than tp, pp, dp, cp or world (torch's
// new_group: Megatron's model-parallel and embedding groups, HSDP's shard and replicate groups, a script's
// own), learnt from the `members` their collective reports carry (API.md), so the hang watchdog can follow
// a wait through them. One name may stand for several disjoint groups (every expert-parallel group called
// "ep"): a rank's group of that name is the one that lists it.
//
// Owned by one JobMonitor: written by Ingest, read by the hang analysis, on the monitor's thread.
// Memory is bounded: at most kEntriesPerRank member entries per rank of the job in all; a group learnt
// beyond that stays unknown (a wait in it is not followed, as for a group whose members were never sent).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace shepherd {

class NamedGroups {
 public:
  static constexpr int kEntriesPerRank = 64;

  explicit NamedGroups(int world_size);

  // The group named `name` that lists `rank`, learnt from `members` (ascending, unique, each below the
  // world size, `rank` among them: the caller checks) when not known yet; 0 when the table is full.
  // kInvalidContent ("members: ...") when a rank in `members` is already in another group of that name, or
  // `rank`'s group of that name is known with other members.
  Result<uint32_t> Learn(std::string_view name, int rank, const std::vector<int>& members);
  // What Learn would refuse, without learning anything: ok, or its kInvalidContent.
  Status Check(std::string_view name, int rank, const std::vector<int>& members) const;
  // The group named `name` that lists `rank`; 0: unknown (its members were never sent).
  uint32_t Find(std::string_view name, int rank) const;

  // REQUIRES: id is a group Learn or Find returned (not 0).
  const std::vector<int>& Members(uint32_t id) const { return groups_[id - 1].members; }
  const std::string& Name(uint32_t id) const { return names_[groups_[id - 1].name]; }
  // The highest seq of group `id` that member `rank` entered; -1 before any (or for a non-member).
  int64_t EnteredSeq(uint32_t id, int rank) const;
  void Entered(uint32_t id, int rank, int64_t seq);
  // The highest seq of group `id` that member `rank` said it completed (summaries); -1 before any.
  int64_t CompletedSeq(uint32_t id, int rank) const;
  void Completed(uint32_t id, int rank, int64_t seq);

 private:
  struct Group {
    uint32_t name = 0;             // index in names_
    std::vector<int> members;      // ascending
    std::vector<int64_t> entered;  // by position in members
    std::vector<int64_t> completed;  // by position in members (summaries only)
  };
  int64_t* Slot(std::vector<int64_t> Group::*field, uint32_t id, int rank);
  static uint64_t Key(uint32_t name, int rank) { return uint64_t{name} << 32 | static_cast<uint32_t>(rank); }

  struct NameHash {  // lookups by string_view without a copy
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> name_ids_;
  std::vector<std::string> names_;
  std::vector<Group> groups_;                         // group id - 1
  std::unordered_map<uint64_t, uint32_t> by_member_;  // Key(name, rank) -> group id
  size_t max_entries_;
};

}  // namespace shepherd
