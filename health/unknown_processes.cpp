#include "health/unknown_processes.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace shepherd {

std::vector<UnknownProcess> TrackUnknown(const std::vector<UnknownProcess>& tracked,
                                         const std::vector<ProcessStatus>& processes,
                                         const KnowsAttempt& knows, Time now) {
  // O((n + m) log n): a node's heartbeat may list thousands of processes.
  auto key = [](const RankRef& r) { return std::tie(r.job, r.attempt, r.rank); };
  using Key = decltype(key(std::declval<const RankRef&>()));
  std::set<Key> running;
  for (const ProcessStatus& p : processes)
    if (p.running) running.insert(key(p.rank));
  std::vector<UnknownProcess> out;
  std::set<Key> in_out;
  for (const UnknownProcess& u : tracked)
    if (running.count(key(u.rank)) != 0 && in_out.insert(key(u.rank)).second) out.push_back(u);
  for (const ProcessStatus& p : processes)
    if (p.running && in_out.count(key(p.rank)) == 0 && !knows(p.rank)) {
      in_out.insert(key(p.rank));
      out.push_back({p.rank, p.pid, now, false});
    }
  return out;
}

bool ExpireUnknown(std::vector<UnknownProcess>* tracked, Time now, double timeout_s) {
  if (timeout_s <= 0) return false;
  bool changed = false;
  for (UnknownProcess& u : *tracked) {
    if (u.stopping || now - u.first_seen < Seconds(timeout_s)) continue;
    u.stopping = true;
    changed = true;
  }
  return changed;
}

int StopUnknown(std::vector<UnknownProcess>* tracked) {
  int n = 0;
  for (UnknownProcess& u : *tracked) {
    n += u.stopping ? 0 : 1;
    u.stopping = true;
  }
  return n;
}

std::vector<RankRef> KeepList(const std::vector<UnknownProcess>& tracked) {
  std::vector<RankRef> out;
  for (const UnknownProcess& u : tracked)
    if (!u.stopping) out.push_back(u.rank);
  return out;
}

}  // namespace shepherd
