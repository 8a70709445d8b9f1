#include "agent/reconcile.h"

#include <set>

namespace shepherd::agent {

std::string ToString(const RankKey& k) {
  return k.job + "/a" + std::to_string(k.attempt) + "/r" + std::to_string(k.rank);
}

ReconcileActions Reconcile(const std::vector<RankAssignment>& desired,
                           const std::vector<ActualProcess>& actual, const std::vector<RankKey>& keep) {
  ReconcileActions out;
  const std::set<RankKey> kept(keep.begin(), keep.end());
  std::set<RankKey> desired_keys;
  std::set<std::pair<std::string, int>> desired_job_ranks;
  for (const RankAssignment& d : desired) {
    desired_keys.insert(d.key);
    desired_job_ranks.insert({d.key.job, d.key.rank});
  }

  std::set<RankKey> known;  // every key with a table entry, whatever its phase
  for (const ActualProcess& a : actual) {
    known.insert(a.key);
    if (a.phase != ProcessPhase::kRunning || desired_keys.count(a.key) || kept.count(a.key)) continue;
    bool stale = desired_job_ranks.count({a.key.job, a.key.rank}) > 0;
    out.stop.push_back({a.key, a.pid, stale ? "stale attempt" : "not desired"});
  }

  std::set<RankKey> handled;
  for (const RankAssignment& d : desired) {
    if (known.count(d.key) || !handled.insert(d.key).second) continue;
    bool blocked = false;
    for (const ActualProcess& a : actual) {
      if (a.phase == ProcessPhase::kExited || desired_keys.count(a.key)) continue;
      bool same_gpu = d.gpu >= 0 && a.gpu == d.gpu;
      bool same_rank = a.key.job == d.key.job && a.key.rank == d.key.rank;
      if (same_gpu || same_rank) {
        blocked = true;
        break;
      }
    }
    if (blocked) {
      out.deferred.push_back(d.key);
    } else {
      out.start.push_back(d);
    }
  }
  return out;
}

}  // namespace shepherd::agent
