#include "health/unknown_processes.h"

#include <algorithm>

namespace shepherd {

std::vector<UnknownProcess> TrackUnknown(const std::vector<UnknownProcess>& tracked,
                                         const std::vector<ProcessStatus>& processes,
                                         const KnowsAttempt& knows, Time now) {
  auto running = [&](const RankRef& r) {
    return std::any_of(processes.begin(), processes.end(),
                       [&](const ProcessStatus& p) { return p.running && p.rank == r; });
  };
  auto tracked_as = [](const std::vector<UnknownProcess>& list, const RankRef& r) {
    return std::any_of(list.begin(), list.end(), [&](const UnknownProcess& u) { return u.rank == r; });
  };
  std::vector<UnknownProcess> out;
  for (const UnknownProcess& u : tracked)
    if (running(u.rank)) out.push_back(u);
  for (const ProcessStatus& p : processes)
    if (p.running && !tracked_as(out, p.rank) && !knows(p.rank)) out.push_back({p.rank, p.pid, now, false});
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
