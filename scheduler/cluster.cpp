#include "scheduler/cluster.h"

#include <algorithm>
#include <bit>

#include "core/gpu_names.h"

namespace shepherd {
namespace {

uint64_t AllGpus(int gpus) {
  return gpus >= 64 ? ~uint64_t{0} : (uint64_t{1} << gpus) - 1;
}

// Counts how many times each key occurs; a key whose count drops to 0 is erased.
template <typename K>
void Bump(std::map<K, int>& counts, K key, int by) {
  auto it = counts.try_emplace(key, 0).first;
  if ((it->second += by) == 0) counts.erase(it);
}

}  // namespace

Cluster::Cluster(TopologyLevels levels)
    : levels_(std::move(levels)),
      group_ids_(levels_.size()),
      group_labels_(levels_.size()),
      parents_(levels_.size()),
      tree_(levels_.size()) {
  for (auto& ready : ready_) {
    ready.resize(levels_.size() + 1);
    ready.back().resize(1);
  }
}

void Cluster::AccountReady(const Slot& s, int sign) {
  const int free = std::popcount(s.free);
  if (!s.node.schedulable || s.node.failed || free == 0) return;
  auto& ready = ready_[s.node.spare];
  for (size_t k = 0; k <= levels_.size(); ++k) {
    ReadyByFree& by_free = ready[k][k < levels_.size() ? s.groups[k] : 0];
    if (sign > 0) {
      by_free[free].insert(s.node.id);
    } else if (auto it = by_free.find(free); it != by_free.end()) {
      it->second.erase(s.node.id);
      if (it->second.empty()) by_free.erase(it);
    }
  }
}

void Cluster::Account(const Slot& s, int sign) {
  AccountReady(s, sign);
  if (!IsUsable(s.node)) return;
  const int free = std::popcount(s.free);
  usable_gpus_ += sign * s.node.gpus;
  free_usable_gpus_ += sign * free;
  Domain& d = domains_[s.domain];
  if (d.usable_gpus > 0) Bump(domain_gpu_counts_, d.usable_gpus, -1);
  d.usable_gpus += sign * s.node.gpus;
  if (d.usable_gpus > 0) Bump(domain_gpu_counts_, d.usable_gpus, +1);
  d.free_gpus += sign * free;
  Bump(memory_counts_, s.node.gpu_memory_gib, sign);
  Bump(model_counts_, CanonicalGpuName(s.node.gpu_model).value_or(""), sign);
}

const std::vector<std::pair<int, uint64_t>>& Cluster::HeldBy(const std::string& job_id) const {
  static const std::vector<std::pair<int, uint64_t>> kNone;
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? kNone : it->second;
}

std::optional<double> Cluster::MinUsableGpuMemory() const {
  if (memory_counts_.empty()) return std::nullopt;
  return memory_counts_.begin()->first;
}

std::optional<std::string> Cluster::UsableGpuModel() const {
  if (model_counts_.size() != 1 || model_counts_.begin()->first.empty()) return std::nullopt;
  return model_counts_.begin()->first;
}

int64_t Cluster::MaxUsableDomainGpus() const {
  return domain_gpu_counts_.empty() ? 0 : domain_gpu_counts_.rbegin()->first;
}

void Cluster::MoveMember(std::vector<int>* from, std::vector<int>& to, int i) {
  if (from) std::erase(*from, i);
  to.insert(std::upper_bound(to.begin(), to.end(), i), i);
}

void Cluster::Intern(Slot& s, int i, bool is_new) {
  const std::string& dom = s.node.nvlink_domain.empty() ? s.node.id : s.node.nvlink_domain;
  const int old_domain = s.domain;
  s.domain = domain_ids_.try_emplace(dom, static_cast<int>(domain_ids_.size())).first->second;
  if (s.domain == static_cast<int>(domains_.size())) domains_.emplace_back();
  if (is_new || old_domain != s.domain)
    MoveMember(is_new ? nullptr : &domains_[old_domain].members, domains_[s.domain].members, i);
  s.groups.assign(levels_.size(), 0);
  std::string path;
  bool alone = false;
  for (size_t k = 0; k < levels_.size(); ++k) {
    auto it = s.node.topology.find(levels_[k]);
    std::string label;
    if (it != s.node.topology.end() && !alone) {
      label = it->second;
      path += label;
    } else {
      // Missing label: the node is alone at this level and below ("\x01" never appears in a label path).
      alone = true;
      label = it != s.node.topology.end() ? it->second : "";
      path = "\x01" + s.node.id + "\x01" + std::to_string(k);
    }
    path += '\x1f';
    auto [g, added] = group_ids_[k].try_emplace(path, static_cast<int>(group_labels_[k].size()));
    if (added) {
      group_labels_[k].push_back(label);
      parents_[k].push_back(-1);
      for (auto& ready : ready_) ready[k].emplace_back();
      tree_[k].emplace_back();
    }
    s.groups[k] = g->second;
    // A group's path extends its parent's, so the parent is fixed, except for a node's own groups
    // ("alone"), which follow that node's latest labels.
    if (k > 0) parents_[k][g->second] = s.groups[k - 1];
  }
}

Status Cluster::UpsertNode(const Node& n) {
  if (n.id.empty()) return InvalidArgument("node id is empty");
  if (n.gpus < 1 || n.gpus > kMaxGpusPerNode) {
    return InvalidArgument("node " + n.id + ": gpus must be in 1.." + std::to_string(kMaxGpusPerNode));
  }
  auto it = index_.find(n.id);
  if (it == index_.end()) {
    Slot s;
    s.node = n;
    s.free = AllGpus(n.gpus);
    Intern(s, size(), true);
    Account(s, +1);
    const int d = s.domain;
    index_.emplace(n.id, static_cast<int>(nodes_.size()));
    nodes_.push_back(std::move(s));
    RefreshDomain(d);
    return Status::Ok();
  }
  Slot& s = nodes_[it->second];
  const uint64_t held = AllGpus(s.node.gpus) & ~s.free;
  if ((held & ~AllGpus(n.gpus)) != 0) {
    return Conflict("node " + n.id + ": a job holds a GPU beyond the new GPU count");
  }
  Account(s, -1);
  const int old_domain = s.domain;
  s.node = n;
  s.free = AllGpus(n.gpus) & ~held;
  Intern(s, it->second, false);
  Account(s, +1);
  RefreshDomain(old_domain);
  RefreshDomain(s.domain);
  return Status::Ok();
}

Status Cluster::RemoveNode(const std::string& id) {
  const int i = IndexOf(id);
  if (i < 0) return NotFound("node " + id + " not found");
  if (!nodes_[i].holders.empty()) return Conflict("node " + id + " has GPUs held by a job");
  Account(nodes_[i], -1);
  const int removed_domain = nodes_[i].domain;
  index_.erase(id);
  nodes_.erase(nodes_.begin() + i);
  for (int j = i; j < size(); ++j) index_[nodes_[j].node.id] = j;
  auto renumber = [i](std::vector<int>& members) {
    std::erase(members, i);
    for (int& m : members) m -= m > i;
  };
  for (Domain& d : domains_) renumber(d.members);
  RefreshDomain(removed_domain);  // the only domain whose members changed
  for (auto& [job, held] : jobs_) {
    for (auto& [node, mask] : held) {
      if (node > i) --node;
    }
  }
  return Status::Ok();
}

int Cluster::IndexOf(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

const Node* Cluster::Find(const std::string& id) const {
  const int i = IndexOf(id);
  return i < 0 ? nullptr : &nodes_[i].node;
}

std::vector<const Node*> Cluster::nodes() const {
  std::vector<const Node*> out;
  out.reserve(nodes_.size());
  for (const Slot& s : nodes_) out.push_back(&s.node);
  return out;
}

int Cluster::AllocatedGpus(const std::string& id) const {
  const int i = IndexOf(id);
  return i < 0 ? 0 : std::popcount(AllGpus(nodes_[i].node.gpus) & ~nodes_[i].free);
}

uint64_t Cluster::FreeGpuMask(const std::string& id) const {
  const int i = IndexOf(id);
  return i < 0 ? 0 : nodes_[i].free;
}

std::vector<std::string> Cluster::JobsOn(const std::string& id) const {
  std::vector<std::string> out;
  const int i = IndexOf(id);
  if (i < 0) return out;
  for (const auto& h : nodes_[i].holders) out.push_back(h.first);
  std::sort(out.begin(), out.end());
  return out;
}

Status Cluster::Allocate(const std::string& job_id, const Placement& placement) {
  if (jobs_.count(job_id) != 0) return Conflict("job " + job_id + " already holds GPUs");
  std::unordered_map<int, uint64_t> want;
  for (const RankSlot& r : placement.ranks) {
    const int i = IndexOf(r.node);
    if (i < 0) return NotFound("node " + r.node + " not found");
    if (r.gpu < 0 || r.gpu >= nodes_[i].node.gpus) {
      return InvalidArgument("node " + r.node + " has no GPU " + std::to_string(r.gpu));
    }
    const uint64_t bit = uint64_t{1} << r.gpu;
    uint64_t& mask = want[i];
    if ((mask & bit) != 0 || (nodes_[i].free & bit) == 0) {
      return Conflict("GPU " + std::to_string(r.gpu) + " of node " + r.node + " is not free");
    }
    mask |= bit;
  }
  std::vector<std::pair<int, uint64_t>> held(want.begin(), want.end());
  std::sort(held.begin(), held.end());
  for (const auto& [i, mask] : held) {
    Slot& s = nodes_[i];
    Account(s, -1);
    s.free &= ~mask;
    s.holders.emplace_back(job_id, mask);
    Account(s, +1);
    RefreshDomain(s.domain);
  }
  jobs_.emplace(job_id, std::move(held));
  return Status::Ok();
}

Status Cluster::Release(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return NotFound("job " + job_id + " holds no GPUs");
  for (const auto& [i, mask] : it->second) {
    Slot& s = nodes_[i];
    Account(s, -1);
    s.free |= mask;
    std::erase_if(s.holders, [&](const auto& h) { return h.first == job_id; });
    Account(s, +1);
    RefreshDomain(s.domain);
  }
  jobs_.erase(it);
  return Status::Ok();
}

}  // namespace shepherd
