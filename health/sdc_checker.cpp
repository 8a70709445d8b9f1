#include "health/sdc_checker.h"

#include <algorithm>
#include <utility>

#include "health/text.h"

namespace shepherd {
namespace {

const uint64_t* SlotFor(const RankState& s, int64_t step) {
  for (int i = 0; i < 2; ++i)
    if (s.hash_step[i] == step) return &s.hash_digest[i];
  return nullptr;
}

}  // namespace

using health_text::RankList;

uint64_t HashDigest(const std::string& hex) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : hex) {
    h ^= static_cast<unsigned char>(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
    h *= 1099511628211ull;
  }
  return h;
}

void SdcChecker::OnHash(std::vector<RankState>& ranks, int rank, int64_t step, uint64_t digest, Time now) {
  if (!enabled()) return;
  if (last_resolved_ && step <= *last_resolved_) {
    bool open =
        std::any_of(open_.begin(), open_.end(), [step](const OpenCheck& c) { return c.step == step; });
    if (!open) {
      ++late_;
      return;
    }
  }
  RankState& s = ranks[rank];
  for (int i = 0; i < 2; ++i)
    if (s.hash_step[i] == step) {  // a repeated report: the newest hash wins, counted once
      s.hash_digest[i] = digest;
      return;
    }
  int slot = s.hash_step[0] <= s.hash_step[1] ? 0 : 1;
  const auto by_step = [](const OpenCheck& c, int64_t v) { return c.step < v; };
  // The overwritten hash no longer counts for its check; a check no rank holds a hash for is dropped, so a
  // rank reporting ever-new steps keeps at most two checks open.
  if (const int64_t old = s.hash_step[slot]; old >= 0) {
    auto was = std::lower_bound(open_.begin(), open_.end(), old, by_step);
    if (was != open_.end() && was->step == old && --was->received <= 0) open_.erase(was);
  }
  s.hash_step[slot] = step;
  s.hash_digest[slot] = digest;
  auto it = std::lower_bound(open_.begin(), open_.end(), step, by_step);
  if (it == open_.end() || it->step != step) it = open_.insert(it, {step, now, 0});
  ++it->received;
}

size_t SdcChecker::DistinctNodes(std::vector<int> ranks) const {
  for (int& r : ranks) r = layout_.node_index(r);
  std::sort(ranks.begin(), ranks.end());
  return static_cast<size_t>(std::unique(ranks.begin(), ranks.end()) - ranks.begin());
}

std::vector<SdcCheckResult> SdcChecker::Resolve(std::vector<RankState>& ranks, Time now) {
  std::vector<SdcCheckResult> out;
  const int world = layout_.world_size();
  for (size_t i = 0; i < open_.size();) {
    const OpenCheck& c = open_[i];
    if (c.received < world && ToSeconds(now - c.first_seen) < deadline_s_) {
      ++i;
      continue;
    }
    out.push_back(Compare(ranks, c));
    if (!last_resolved_ || c.step > *last_resolved_) last_resolved_ = c.step;
    if (out.back().all_agreed && (!last_agreed_ || c.step > *last_agreed_)) last_agreed_ = c.step;
    open_.erase(open_.begin() + i);
  }
  return out;
}

SdcCheckResult SdcChecker::Compare(std::vector<RankState>& ranks, const OpenCheck& c) {
  SdcCheckResult res;
  res.step = c.step;
  res.first_seen = c.first_seen;
  std::vector<std::pair<uint64_t, int>> present;  // (digest, rank)
  for (int set = 0; set < layout_.replica_set_count(); ++set) {
    present.clear();
    const auto members = layout_.ReplicaSet(set);
    for (int r : members) {
      if (const uint64_t* d = SlotFor(ranks[r], c.step)) {
        present.push_back({*d, r});
      } else {
        if (res.missing.size() < 64) res.missing.push_back(r);
        ++res.missing_count;
      }
    }
    if (present.size() < 2) continue;
    std::sort(present.begin(), present.end());
    // Largest run of equal digests.
    size_t best_begin = 0, best_len = 0;
    for (size_t b = 0; b < present.size();) {
      size_t e = b;
      while (e < present.size() && present[e].first == present[b].first) ++e;
      if (e - b > best_len) best_begin = b, best_len = e - b;
      b = e;
    }
    if (best_len == present.size()) {
      for (auto& [d, r] : present) ranks[r].set(RankState::kSdcSuspected, false);
      continue;
    }
    // A majority of the whole set: replicas whose hash is missing at the deadline could side either way. And
    // of its nodes: the ranks of one node can corrupt alike (a bad driver, firmware, a shared fault), and two
    // of them must not outvote a healthy node (a probe's node corrupting two ranks identically had the one
    // healthy node named).
    std::vector<int> best_ranks;
    for (size_t k = best_begin; k < best_begin + best_len; ++k) best_ranks.push_back(present[k].second);
    const bool majority = present.size() >= 3 && 2 * best_len > members.size() &&
                          2 * DistinctNodes(best_ranks) > DistinctNodes({members.begin(), members.end()});
    // Fewer replicas than the set holds, disagreeing without a majority: the missing ones would decide, so
    // no verdict (a tester's 3-replica job was replayed, then a node cordoned, on 2 of its 3 hashes).
    if (!majority && present.size() < members.size() && members.size() >= 3) continue;
    SdcMismatch v;
    v.replica_set = set;
    for (size_t k = 0; k < present.size(); ++k) {
      int r = present[k].second;
      bool in_majority = majority && k >= best_begin && k < best_begin + best_len;
      if (in_majority) {
        v.majority.push_back(r);
        ranks[r].set(RankState::kSdcSuspected, false);
      } else {
        v.suspects.push_back(r);
        if (!ranks[r].has(RankState::kSdcSuspected)) v.newly_suspected.push_back(r);
        ranks[r].set(RankState::kSdcSuspected, true);
      }
    }
    std::sort(v.suspects.begin(), v.suspects.end());
    std::sort(v.newly_suspected.begin(), v.newly_suspected.end());
    std::sort(v.majority.begin(), v.majority.end());
    v.no_agreement = present.size() >= 3 && best_len == 1;
    v.needs_replay = !majority && !v.no_agreement;
    const int r0 = present.front().second;
    std::string where = "replica set (pp=" + std::to_string(layout_.pp(r0)) +
                        ", tp=" + std::to_string(layout_.tp(r0)) + ") of " + std::to_string(present.size()) +
                        " reporting ranks at step " + std::to_string(c.step);
    if (majority) {
      v.detail = "param_hash mismatch in " + where + ": rank(s) " + RankList(v.suspects) +
                 " differ from the majority hash held by ranks " + RankList(v.majority);
    } else if (v.no_agreement) {
      v.detail = "param_hash mismatch in " + where + ": no two replicas agree (ranks " +
                 RankList(v.suspects) +
                 "); one corrupt node would leave the others agreeing, so the hashed state is not replicated "
                 "(a sharded optimizer or model averaging hashed as replicas): recorded, nothing done";
    } else if (present.size() == 2) {
      v.detail = "param_hash mismatch in " + where + ": ranks " + RankList(v.suspects) +
                 " disagree and two replicas cannot say which is corrupt; needs_replay=true (restart from "
                 "last-known-good and recompute; a recurrence on the same node makes it persistent)";
    } else {
      v.detail = "param_hash mismatch in " + where + " with no majority hash: ranks " + RankList(v.suspects) +
                 " all suspected; needs_replay=true";
    }
    res.mismatches.push_back(std::move(v));
  }
  res.complete = c.received >= layout_.world_size() && res.missing_count == 0;
  res.all_agreed = res.complete && res.mismatches.empty();
  return res;
}

}  // namespace shepherd
