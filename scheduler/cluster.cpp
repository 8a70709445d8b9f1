#include "scheduler/cluster.h"

#include <algorithm>
#include <bit>

namespace shepherd {
namespace {

uint64_t AllGpus(int gpus) {
  return gpus >= 64 ? ~uint64_t{0} : (uint64_t{1} << gpus) - 1;
}

}  // namespace

Cluster::Cluster(TopologyLevels levels)
    : levels_(std::move(levels)), group_ids_(levels_.size()), group_labels_(levels_.size()) {}

void Cluster::Account(const Slot& s, int sign) {
  if (!IsUsable(s.node)) return;
  usable_gpus_ += sign * s.node.gpus;
  free_usable_gpus_ += sign * std::popcount(s.free);
}

void Cluster::Intern(Slot& s) {
  const std::string& dom = s.node.nvlink_domain.empty() ? s.node.id : s.node.nvlink_domain;
  s.domain = domain_ids_.try_emplace(dom, static_cast<int>(domain_ids_.size())).first->second;
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
    if (added) group_labels_[k].push_back(label);
    s.groups[k] = g->second;
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
    Intern(s);
    Account(s, +1);
    index_.emplace(n.id, static_cast<int>(nodes_.size()));
    nodes_.push_back(std::move(s));
    return Status::Ok();
  }
  Slot& s = nodes_[it->second];
  const uint64_t held = AllGpus(s.node.gpus) & ~s.free;
  if ((held & ~AllGpus(n.gpus)) != 0) {
    return Conflict("node " + n.id + ": a job holds a GPU beyond the new GPU count");
  }
  Account(s, -1);
  s.node = n;
  s.free = AllGpus(n.gpus) & ~held;
  Intern(s);
  Account(s, +1);
  return Status::Ok();
}

Status Cluster::RemoveNode(const std::string& id) {
  const int i = IndexOf(id);
  if (i < 0) return NotFound("node " + id + " not found");
  if (!nodes_[i].holders.empty()) return Conflict("node " + id + " has GPUs held by a job");
  Account(nodes_[i], -1);
  index_.erase(id);
  nodes_.erase(nodes_.begin() + i);
  for (int j = i; j < size(); ++j) index_[nodes_[j].node.id] = j;
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
  }
  jobs_.erase(it);
  return Status::Ok();
}

}  // namespace shepherd
