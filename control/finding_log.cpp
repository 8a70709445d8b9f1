#include "control/finding_log.h"

#include <algorithm>
#include <cstdio>

namespace shepherd {

std::string FindingLog::NextId() {
  char id[32];
  std::snprintf(id, sizeof id, "f-%06lld", static_cast<long long>(next_seq_));
  return id;
}

void FindingLog::Add(Finding f) {
  long long seq = 0;
  if (std::sscanf(f.id.c_str(), "f-%lld", &seq) == 1) next_seq_ = std::max<int64_t>(next_seq_, seq + 1);
  if (!all_.empty() && f.detected_at < all_.back().detected_at) time_ordered_ = false;
  ++counts_[f.kind];
  by_job_[f.job].push_back(all_.size());
  all_.push_back(std::move(f));
}

std::vector<Finding> FindingLog::Query(const FindingQuery& q) const {
  auto matches = [&](const Finding& f) {
    return (!q.kind || f.kind == *q.kind) && (!q.since || f.detected_at >= *q.since);
  };
  std::vector<Finding> out;
  if (q.job) {
    auto it = by_job_.find(*q.job);
    if (it == by_job_.end()) return out;
    for (size_t i : it->second)
      if (matches(all_[i])) out.push_back(all_[i]);
    return out;
  }
  auto begin = all_.begin();
  if (q.since && time_ordered_)
    begin = std::partition_point(all_.begin(), all_.end(),
                                 [&](const Finding& f) { return f.detected_at < *q.since; });
  for (auto it = begin; it != all_.end(); ++it)
    if (matches(*it)) out.push_back(*it);
  return out;
}

std::vector<Finding> FindingLog::Recent(const std::string& job, size_t limit) const {
  std::vector<Finding> out;
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return out;
  const std::vector<size_t>& idx = it->second;
  for (size_t k = idx.size() > limit ? idx.size() - limit : 0; k < idx.size(); ++k)
    out.push_back(all_[idx[k]]);
  return out;
}

Finding* FindingLog::Latest(const std::string& job, int attempt, FindingKind kind) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return nullptr;
  for (auto i = it->second.rbegin(); i != it->second.rend(); ++i)
    if (all_[*i].attempt == attempt && all_[*i].kind == kind) return &all_[*i];
  return nullptr;
}

}  // namespace shepherd
