// FindingLog: every finding the daemon has recorded, in detection order, with the indexes its queries need.
// Owns: the findings, their id sequence (f-000001, ...) and the counters by kind for /metrics.
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
// Not thread-safe otherwise.
// Invariants: ids are unique and increase; by_job_ holds, per job, the positions of its findings in all_
// in ascending order. Queries never scan findings of other jobs when a job is given; a `since` bound is a
// binary search while detection times are non-decreasing (always, unless a restored database holds
// findings from a clock that went backwards; then the log falls back to a scan).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/control_lock.h"
#include "core/job.h"
#include "core/time.h"

namespace shepherd {

struct FindingQuery {
  std::optional<std::string> job;
  std::optional<FindingKind> kind;
  std::optional<Time> since;  // detected_at >= since
  // Paging: findings after the one with id `after` (exclusive; "" from the start), at most `limit`.
  std::string after;
  size_t limit = SIZE_MAX;
};

// How long findings are kept (findings_retention_days; docs/operations.md, "Retention"). A finding may go
// once `resolved` (its job ended, or is gone, and no node's cordon names it) and detected more than
// max_age_s ago; the controller erases at most prune_batch of them per pass, a pass per minute at most,
// through its normal write path. max_age_s 0: findings are kept forever.
struct FindingRetention {
  double max_age_s = 30 * 86400;
  std::size_t prune_batch = 1000;
  double pass_interval_s = 60;
};

class FindingLog {
 public:
  // The id the next Add takes.
  std::string NextId() REQUIRES(kControl);
  // Appends `f` (its id from NextId, or a stored id at recovery) and counts it.
  void Add(Finding f) REQUIRES(kControl);

  // Matching findings, oldest first (id order); `*more` tells whether more match after the last one.
  std::vector<Finding> Query(const FindingQuery& q, bool* more = nullptr) const REQUIRES_SHARED(kControl);
  // The job's newest `limit` findings, oldest first: the window recovery judges recurrence against.
  std::vector<Finding> Recent(const std::string& job, size_t limit) const REQUIRES_SHARED(kControl);
  // The finding with this id; nullptr when none (searches newest first).
  const Finding* Find(const std::string& id) const REQUIRES_SHARED(kControl);

  // The job's finding with this id, or nullptr; O(log of the job's findings) (ids increase with their
  // sequence). Valid until the next Add.
  const Finding* Find(const std::string& job, const std::string& id) const REQUIRES_SHARED(kControl);
  // The job's finding with this id, or nullptr. Valid until the next Add; a caller that changes it
  // persists it.
  Finding* Mutable(const std::string& job, const std::string& id) REQUIRES(kControl);
  // The job's newest finding of `kind` for `attempt`, or nullptr. The pointer is valid until the next Add;
  // a caller that changes the finding persists it.
  Finding* Latest(const std::string& job, int attempt, FindingKind kind) REQUIRES(kControl);

  // Ids of at most `limit` findings detected before `before` for which `resolved` holds, oldest first.
  std::vector<std::string> Expired(Time before, const std::function<bool(const Finding&)>& resolved,
                                   size_t limit) const REQUIRES_SHARED(kControl);
  // Removes the findings with these ids (the indexes are rebuilt: O(size)). The counts by kind stay: they
  // count findings recorded, not findings kept. Ids are never reused (NextId keeps increasing).
  void Erase(const std::set<std::string>& ids) REQUIRES(kControl);

  const std::map<FindingKind, uint64_t>& counts() const REQUIRES_SHARED(kControl) { return counts_; }
  size_t size() const REQUIRES_SHARED(kControl) { return all_.size(); }

 private:
  std::vector<Finding> all_;
  std::map<std::string, std::vector<size_t>> by_job_;
  std::map<FindingKind, uint64_t> counts_;
  int64_t next_seq_ = 1;
  bool time_ordered_ = true;
};

}  // namespace shepherd
