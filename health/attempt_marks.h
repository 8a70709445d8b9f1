// AttemptMarks: the goodput evidence of one attempt (core/job.h Attempt marks), gathered from its ranks'
// reports: when the first and the newest step report arrived, the newest step, and how long the job spent
// loading a checkpoint before its first step and waiting on checkpoint saves.
//
// Steps: any `step` report of the attempt (daemon clock of receipt).
// Phases: a rank is in a checkpoint phase from a heartbeat saying phase checkpoint_save / checkpoint_load
// until its next report saying otherwise (a heartbeat of another phase or without one, a step, `finished`).
// The phase's length is timed on the rank's own clock (`time` of the two reports: both ends share it, so
// skew cancels, and two phase changes delivered in one batch still count), bounded by the daemon's elapsed
// time between the two receipts plus one heartbeat timeout (a report later than that would have made the
// rank lost); it is placed on the daemon clock at the receipt of its start. A heartbeat older (rank clock)
// than the rank's newest phase change is stale (a helper's heartbeat overtaken) and changes no phase.
// save_s is the wall time during which any rank was saving (the union over ranks, not a sum); load_s the
// same for loads that began before the first step. A phase still open when the attempt ends counts up to
// the rank's last report.
//
// Cost: O(1) per report; Snapshot is O(world size) (open phases), called at an attempt's end and at most
// once a minute. Memory: 40 bytes per rank, allocated at the first checkpoint phase. Not thread-safe: one
// owner (JobHealth). Pure: no clock reads, no I/O.
#pragma once

#include <optional>
#include <vector>

#include "core/job.h"
#include "core/time.h"
#include "health/report.h"

namespace shepherd {

// Wall time covered by a set of intervals, added one at a time: overlapping ones count once. Intervals
// that overlap the latest merged block are merged into it; one entirely before it counts whole (reports
// arrive roughly in time order, so only a block already closed could be double counted).
class Coverage {
 public:
  void Add(Time start, Time end);
  double seconds() const { return seconds_; }

 private:
  double seconds_ = 0;
  Time block_start_{}, block_end_{};
  bool any_ = false;
};

struct MarksSnapshot {
  std::optional<Time> first_step_at;
  std::optional<Time> last_step_at;
  int64_t last_step = 0;
  double load_s = 0;
  double save_s = 0;
};

class AttemptMarks {
 public:
  // `max_report_lag_s`: the job's heartbeat timeout (bounds a phase's rank-clock length, see above).
  // `restored`: an attempt recorded by an earlier run of the daemon: its marks are continued from.
  AttemptMarks(int world_size, double max_report_lag_s, const Attempt* restored = nullptr);

  // A report of this attempt that the monitor accepted (rank within the world). `now`: receipt.
  void OnReport(const Report& r, Time now);
  // The marks so far, open phases counted to their rank's last report.
  MarksSnapshot Snapshot() const;
  // Closed phases and steps only: O(1), for keeping the in-memory attempt current after each batch.
  MarksSnapshot Quick() const;
  // Every snapshot field into the attempt (first_step_at, last_step_at, last_step, load_s, save_s).
  static void Apply(const MarksSnapshot& m, Attempt* a);

 private:
  struct RankPhase {
    Time since_daemon{};  // receipt of the report that opened the phase; epoch: none open
    Time since_rank{};    // its `time`
    Time last_rank{};     // `time` of the rank's newest phase change (stale heartbeats are older)
    Time last_seen{};     // receipt of the rank's last report while a phase was open
    Phase phase = Phase::kUnspecified;
  };
  void Close(RankPhase& p, Time end_rank, Time now);
  void Count(Phase phase, Time start, Time end, Coverage* load, Coverage* save) const;

  int world_size_;
  double max_lag_s_;
  std::vector<RankPhase> phases_;  // by rank, allocated at the first checkpoint phase
  std::optional<Time> first_step_at_, last_step_at_;
  int64_t last_step_ = 0;
  double restored_load_s_ = 0, restored_save_s_ = 0;
  Coverage load_, save_;
};

}  // namespace shepherd
