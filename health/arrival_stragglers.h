// Stragglers named from arrival order: the rank that persistently arrives last in its TP, CP, DP (or world)
// group's collectives, found from the per-group `count` and `wait_s` of rank summaries (health/report.h
// GroupSummary). Owned by one JobMonitor (one attempt); fed and ticked on the controller's strand. Pure: no
// clock reads, no I/O; `now` comes in.
//
// Why waits: in a synchronous collective every member leaves at about the same moment, so a member's wait
// (completion - entry, on its own clock) is the time from its arrival to the last member's arrival plus
// the transfer all share. The member that arrives last waits least. Comparing members' mean wait per
// collective therefore names the late arriver without comparing clocks across hosts, even when DDP makes
// every step time equal.
//
// Rule (ArrivalRule holds the numbers; docs/recovery.md "Stragglers" gives the reasons):
//  - A window is the daemon-time interval between two closes; a close happens on Tick once window_s has
//    passed (1.5 x the summary interval, at least 1.5 s, so each member's summary lands in it about once).
//  - Per group instance and window: judged only when every member completed at least one collective of
//    the group in it. Each member's mean wait = wait_s / count. The member with the lowest mean held the
//    group up that window when (median of the others' means - its mean) exceeds
//    max(abs_margin_s, rel_margin x that median): 1 ms is several times the clock and wake-up noise of a
//    collective; a lateness below a quarter of what the others wait is within the spread of a healthy
//    group (and costs the group less than that quarter). Lateness = that difference.
//  - Per group instance, a run follows one candidate: the first rank that held it up. Each judged window
//    counts; the candidate's share of held-up windows is kept with halving once 2 x min_windows are
//    counted (the share then speaks of the last 20-40 windows). The candidate is named when it held up at
//    least name_share (80 %) of at least min_windows (20) judged windows spanning at least min_span_s
//    (30 s). A run whose share falls under clear_share (50 %) ends (a named rank is no longer named) and a
//    new run starts with the window's holder. With a fair coin per window (a healthy 2-member group whose
//    noise always exceeds the margin), 16 or more of 20 windows for one member has probability 0.6 %; for 4
//    members 4e-6 — and a healthy group's windows mostly have no holder at all.
//  - pp groups are not judged: pipeline traffic is point-to-point between neighbouring stages, and who
//    waits there is set by the schedule (the first stage never waits for a forward input), not by
//    lateness. Named groups (kOther) are not judged either (membership is not derived).
//
// Memory: 8 bytes per rank for each group kind in use (the current window's count and wait) plus 4 bytes
// per rank for its slot map, plus 40 bytes per group instance of 2+ members (at most 20 bytes per rank):
// about 60 bytes per rank for a job using two group kinds (7.9 MB at 131,072 ranks). Scratch of one float
// per rank is reused across closes.
// Cost: Observe O(1); Tick O(1) unless a window closes, then O(ranks) per group kind in use.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/time.h"
#include "health/rank_layout.h"
#include "health/report.h"

namespace shepherd {

struct ArrivalRule {
  double window_s = 1.5;
  int min_windows = 20;
  double min_span_s = 30;
  double name_share = 0.8;
  double clear_share = 0.5;
  double abs_margin_s = 0.001;
  double rel_margin = 0.25;
};
// The rule for a job whose ranks summarise every `summary_interval_s` (policy.heartbeat_interval_s).
ArrivalRule ArrivalRuleFor(double summary_interval_s);

// A rank named by the rule, with its evidence over the run that named it.
struct ArrivalStraggler {
  int rank = 0;
  GroupKind group = GroupKind::kDp;
  double lateness_s = 0;     // mean seconds per collective the others waited for it, in the windows it held up
  double share_held_up = 0;  // its collectives in held-up windows / its collectives in judged windows
  int windows = 0;           // judged windows counted (after halving; see above)
  double span_s = 0;         // seconds since the run began
};

class ArrivalStragglers {
 public:
  explicit ArrivalStragglers(ArrivalRule rule) : rule_(rule) {}

  // One group of one rank's summary. Ignores pp, named groups, count <= 0 and a wait that is negative or not
  // finite (the parser refuses those; this is a second line). REQUIRES: 0 <= rank < world size.
  void Observe(int rank, int world_size, const GroupSummary& g);
  // Closes the window when window_s has passed since the last close (the first call opens the first window,
  // discarding what came before it). Returns true when a window closed (named() may have changed).
  bool Tick(const RankLayout& layout, Time now);
  // Ranks named as of the last close, ordered by group kind then group; a rank may appear once per kind.
  const std::vector<ArrivalStraggler>& named() const { return named_; }
  const ArrivalRule& rule() const { return rule_; }
  int windows_closed() const { return windows_closed_; }

 private:
  struct Acc {
    uint32_t count = 0;
    float wait_s = 0;
  };
  struct Run {
    int32_t candidate = -1;
    bool named = false;
    float judged = 0, held = 0;            // windows (halved together)
    float held_collectives = 0;            // the candidate's collectives in windows it held up
    float total_collectives = 0;           // the candidate's collectives in judged windows
    float lateness_weighted = 0;           // sum over held windows of lateness x its collectives
    Time since{};                          // the run's first window's start
  };
  struct Kind {
    std::vector<Acc> acc;          // by rank
    std::vector<int32_t> by_slot;  // group instance x size + position -> rank (built at the first close)
    std::vector<Run> runs;         // by group instance
  };
  void CloseKind(GroupKind kind, Kind& k, const RankLayout& layout, Time start);
  void Judge(Run& run, int holder, uint32_t cand_count, uint32_t holder_count, double lateness, Time start);

  ArrivalRule rule_;
  std::array<std::unique_ptr<Kind>, kKnownGroupKinds> kinds_;
  Time window_start_{};
  bool open_ = false;
  int windows_closed_ = 0;
  std::vector<ArrivalStraggler> named_;
  std::vector<float> scratch_;
};

}  // namespace shepherd
