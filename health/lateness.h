// Lateness: whether the daemon itself was listening (its own lateness). A silence is evidence against a rank
// or a node only for the time the daemon could have heard it; the daemon's own stalls (a long fsync, a swap
// storm, SIGSTOP, a starved control thread) are never the ranks' fault (docs/recovery.md, "The daemon's own
// lateness").
//
// Facts in, all measured by the caller on the control thread:
//   OnTurn      the control thread ran an operation at `now`. A gap since the previous turn longer than
//               `late_after_s` means the thread did not run at all (the daemon was stopped). Only callers
//               that turn at least every tick enable it (late_after_s > 0).
//   OnTickLag   the periodic tick fired `lag` after it was due.
//   OnQueueAge  work posted to the control thread waited `age` before it ran.
//   OnReports   a batch of rank reports was processed.
//   OnRefusals  the HTTP server refused `count` requests itself (503: connection caps, body budget) since the
//               previous call: whoever was refused may have been speaking, so the daemon was not listening.
// A stall or a lag over `late_after_s` makes the daemon late at that moment: `listening_since` moves to
// `now`. Verdicts based on silence (heartbeat_lost, node_lost, no progress) count silence from
// max(last seen, listening_since), so after a stall every rank and node gets a full window of
// demonstrated listening before it can be called lost; a rank silent while the daemon was healthy is found
// exactly as before. Start-up (Restart) counts as a stall: no verdict until a full window after recovery.
//
// Pure: no clock reads, no threads. One owner (the Controller, control thread).
#pragma once

#include <cstdint>

#include "core/time.h"

namespace shepherd {

class Lateness {
 public:
  // late_after_s: a lag, queue age or gap between turns above this is lateness. <= 0: OnTurn gaps are not
  // judged (callers whose clock jumps between operations, e.g. unit tests); lags still are, over 1 s.
  explicit Lateness(double late_after_s, Time start) : late_after_s_(late_after_s) { Restart(start); }

  // The daemon (re)started at `now` with recovered state: nothing was heard before.
  void Restart(Time now) { listening_since_ = last_turn_ = late_at_ = now; }
  void OnTurn(Time now);
  void OnTickLag(Duration lag, Time now);
  void OnQueueAge(Duration age, Time now);
  void OnReports(Time now) { last_reports_ = now; }
  void OnRefusals(uint64_t count, Time now) {
    if (count > 0) Late(0, now);
  }

  // Start of the current run of healthy time.
  Time listening_since() const { return listening_since_; }

  struct Facts {
    double tick_lag_s = 0;        // the latest tick's lag
    double queue_age_s = 0;       // the latest measured control-queue age
    double since_reports_s = -1;  // since the last batch of reports was processed; -1: none yet
    double listening_for_s = 0;   // since listening_since
    bool late = false;            // the latest lag or queue age is over the threshold
    uint64_t stalls = 0;          // lateness episodes seen since start-up
    double longest_stall_s = 0;   // longest gap between turns, or lag, seen
  };
  Facts facts(Time now) const;

 private:
  double threshold_s() const { return late_after_s_ > 0 ? late_after_s_ : 1.0; }
  // The daemon was late for `how_long` ending at `now`.
  void Late(double how_long_s, Time now);

  double late_after_s_;
  Time listening_since_{};
  Time last_turn_{};
  Time late_at_{};  // the latest late moment
  Time last_reports_{};
  double tick_lag_s_ = 0;
  double queue_age_s_ = 0;
  uint64_t stalls_ = 0;
  double longest_stall_s_ = 0;
};

}  // namespace shepherd
