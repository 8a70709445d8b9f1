#include "health/named_groups.h"

#include <algorithm>

namespace shepherd {

NamedGroups::NamedGroups(int world_size)
    : max_entries_(static_cast<size_t>(std::max(world_size, 1)) * kEntriesPerRank) {}

Status NamedGroups::Check(std::string_view name, int rank, const std::vector<int>& members) const {
  if (uint32_t id = Find(name, rank)) {
    if (Members(id) == members) return Status();
    // One rank, one group of a name (for an attempt): a report naming other members contradicts the first.
    std::string msg = "rank " + std::to_string(rank) + "'s group named \"" + std::string(name) +
                      "\" has other members (" + std::to_string(Members(id).size()) + ", from " +
                      std::to_string(Members(id).front()) + " to " + std::to_string(Members(id).back()) + ")";
    return InvalidContent("members: " + msg, {{"members", msg}});
  }
  auto it = name_ids_.find(name);
  if (it == name_ids_.end()) return Status();
  for (int m : members) {
    if (by_member_.count(Key(it->second, m)) == 0) continue;
    std::string msg =
        "rank " + std::to_string(m) + " is already in another group named \"" + std::string(name) + "\"";
    return InvalidContent("members: " + msg, {{"members", msg}});
  }
  return Status();
}

Result<uint32_t> NamedGroups::Learn(std::string_view name, int rank, const std::vector<int>& members) {
  if (Status s = Check(name, rank, members); !s.ok()) return s;
  if (uint32_t id = Find(name, rank)) return id;
  auto [it, added] = name_ids_.try_emplace(std::string(name), static_cast<uint32_t>(names_.size()));
  if (added) names_.push_back(it->first);
  const uint32_t n = it->second;
  if (by_member_.size() + members.size() > max_entries_) return uint32_t{0};
  groups_.push_back({n, members, std::vector<int64_t>(members.size(), -1), {}});
  const auto id = static_cast<uint32_t>(groups_.size());
  for (int m : members) by_member_.emplace(Key(n, m), id);
  return id;
}

uint32_t NamedGroups::Find(std::string_view name, int rank) const {
  auto n = name_ids_.find(name);
  if (n == name_ids_.end()) return 0;
  auto g = by_member_.find(Key(n->second, rank));
  return g == by_member_.end() ? 0 : g->second;
}

int64_t NamedGroups::EnteredSeq(uint32_t id, int rank) const {
  const Group& g = groups_[id - 1];
  auto it = std::lower_bound(g.members.begin(), g.members.end(), rank);
  return it != g.members.end() && *it == rank ? g.entered[it - g.members.begin()] : -1;
}

void NamedGroups::Entered(uint32_t id, int rank, int64_t seq) {
  Group& g = groups_[id - 1];
  auto it = std::lower_bound(g.members.begin(), g.members.end(), rank);
  if (it == g.members.end() || *it != rank) return;
  int64_t& e = g.entered[it - g.members.begin()];
  e = std::max(e, seq);
}

int64_t* NamedGroups::Slot(std::vector<int64_t> Group::*field, uint32_t id, int rank) {
  Group& g = groups_[id - 1];
  auto it = std::lower_bound(g.members.begin(), g.members.end(), rank);
  if (it == g.members.end() || *it != rank) return nullptr;
  std::vector<int64_t>& v = g.*field;
  if (v.empty()) v.assign(g.members.size(), -1);  // allocated on first use: only summaries fill `completed`
  return &v[it - g.members.begin()];
}

int64_t NamedGroups::CompletedSeq(uint32_t id, int rank) const {
  const Group& g = groups_[id - 1];
  if (g.completed.empty()) return -1;
  auto it = std::lower_bound(g.members.begin(), g.members.end(), rank);
  return it != g.members.end() && *it == rank ? g.completed[it - g.members.begin()] : -1;
}

void NamedGroups::Completed(uint32_t id, int rank, int64_t seq) {
  if (int64_t* c = Slot(&Group::completed, id, rank)) *c = std::max(*c, seq);
}

}  // namespace shepherd
