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

namespace {

long long SeqOf(const std::string& id) {
  long long seq = 0;
  return std::sscanf(id.c_str(), "f-%lld", &seq) == 1 ? seq : 0;
}

}  // namespace

std::vector<Finding> FindingLog::Query(const FindingQuery& q, bool* more) const {
  auto matches = [&](const Finding& f) {
    return (!q.kind || f.kind == *q.kind) && (!q.since || f.detected_at >= *q.since);
  };
  // Ids increase with position (the invariant), so `after` is a binary search.
  const long long after = q.after.empty() ? 0 : SeqOf(q.after);
  std::vector<Finding> out;
  if (more) *more = false;
  auto take = [&](const Finding& f) {
    if (!matches(f)) return true;
    if (out.size() == q.limit) {
      if (more) *more = true;
      return false;
    }
    out.push_back(f);
    return true;
  };
  if (q.job) {
    auto it = by_job_.find(*q.job);
    if (it == by_job_.end()) return out;
    auto from = std::partition_point(it->second.begin(), it->second.end(),
                                     [&](size_t i) { return SeqOf(all_[i].id) <= after; });
    for (auto i = from; i != it->second.end() && take(all_[*i]); ++i) {
    }
    return out;
  }
  auto begin =
      std::partition_point(all_.begin(), all_.end(), [&](const Finding& f) { return SeqOf(f.id) <= after; });
  if (q.since && time_ordered_)
    begin = std::max(begin, std::partition_point(all_.begin(), all_.end(),
                                                 [&](const Finding& f) { return f.detected_at < *q.since; }));
  for (auto it = begin; it != all_.end() && take(*it); ++it) {
  }
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

const Finding* FindingLog::Find(const std::string& id) const {
  if (id.empty()) return nullptr;
  for (auto it = all_.rbegin(); it != all_.rend(); ++it)
    if (it->id == id) return &*it;
  return nullptr;
}

const Finding* FindingLog::Find(const std::string& job, const std::string& id) const {
  auto it = by_job_.find(job);
  if (it == by_job_.end() || id.empty()) return nullptr;
  // Ids are "f-" and a zero-padded sequence that only grows: shorter ids are older, then text order.
  auto older = [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  };
  const std::vector<size_t>& idx = it->second;
  auto pos = std::partition_point(idx.begin(), idx.end(), [&](size_t i) { return older(all_[i].id, id); });
  if (pos != idx.end() && all_[*pos].id == id) return &all_[*pos];
  for (size_t i : idx)  // ids from elsewhere (a restored database's own scheme): look at each
    if (all_[i].id == id) return &all_[i];
  return nullptr;
}

Finding* FindingLog::Mutable(const std::string& job, const std::string& id) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return nullptr;
  for (auto i = it->second.rbegin(); i != it->second.rend(); ++i)
    if (all_[*i].id == id) return &all_[*i];
  return nullptr;
}

Finding* FindingLog::Latest(const std::string& job, int attempt, FindingKind kind) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return nullptr;
  for (auto i = it->second.rbegin(); i != it->second.rend(); ++i)
    if (all_[*i].attempt == attempt && all_[*i].kind == kind) return &all_[*i];
  return nullptr;
}

std::vector<std::string> FindingLog::Expired(Time before, const std::function<bool(const Finding&)>& resolved,
                                             size_t limit) const {
  std::vector<std::string> out;
  for (const Finding& f : all_) {
    if (out.size() >= limit) break;
    if (time_ordered_ && f.detected_at >= before) break;  // the rest is newer
    if (f.detected_at < before && resolved(f)) out.push_back(f.id);
  }
  return out;
}

void FindingLog::Erase(const std::set<std::string>& ids) {
  if (ids.empty()) return;
  std::vector<Finding> kept;
  kept.reserve(all_.size());
  for (Finding& f : all_)
    if (!ids.count(f.id)) kept.push_back(std::move(f));
  all_ = std::move(kept);
  by_job_.clear();
  time_ordered_ = true;
  for (size_t i = 0; i < all_.size(); ++i) {
    by_job_[all_[i].job].push_back(i);
    if (i > 0 && all_[i].detected_at < all_[i - 1].detected_at) time_ordered_ = false;
  }
}

}  // namespace shepherd
