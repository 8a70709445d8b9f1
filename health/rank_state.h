// Per-rank memory of one JobMonitor: a compact, fixed-size record in a vector indexed by rank (no maps, no
// strings), so a 131,072-rank job costs about 280 bytes per rank here
// (JobMonitorTest.MemoryPerRankStaysUnderOneKiB). Internal to health/: written by JobMonitor::Ingest, read by
// the detectors.
#pragma once

#include <cstdint>

#include "core/time.h"
#include "health/report.h"

namespace shepherd {

// Straggler window capacity; Policy::straggler_window_steps is clamped to [3, kMaxStragglerWindow].
inline constexpr int kMaxStragglerWindow = 32;

struct RankState {
  enum Flag : uint8_t {
    kInCollective = 1 << 0,          // inside (collective_group, collective_seq) now
    kHeartbeatCollectives = 1 << 1,  // this rank's heartbeats carry `collective`: absence means "none"
    kHeartbeatLost = 1 << 2,         // open heartbeat_lost incident for this rank
    kStraggler = 1 << 3,             // open straggler incident
    kSdcSuspected = 1 << 4,          // open sdc_suspected incident
    kFinished = 1 << 5,              // reported `finished`: its silence is not a loss
    kArrivalStraggler = 1 << 6,      // open straggler incident of the arrival-order rule
  };

  Time last_seen{};         // receive time of the last report; epoch: never reported
  Time collective_since{};  // when it entered the current collective, on the daemon's clock
  Time busy_seen{};         // the last report in a checkpoint or eval phase; epoch: none
  int64_t step = -1;        // highest step seen in any report
  int64_t collective_seq = 0;
  uint32_t named_group = 0;  // the current collective's named group (health/named_groups.h); 0: none
  int64_t entered_seq[kKnownGroupKinds] = {-1, -1, -1, -1, -1};  // highest seq entered, per GroupKind
  int64_t completed_seq[kKnownGroupKinds] = {-1, -1, -1, -1, -1};  // highest `completed` a summary said
  int64_t hash_step[2] = {-1, -1};  // two param_hash slots (double-buffered across checks)
  uint64_t hash_digest[2] = {0, 0};
  float step_times[kMaxStragglerWindow] = {};  // ring of the last step_time_s values
  uint8_t step_time_count = 0;
  uint8_t step_time_head = 0;  // next slot to write
  GroupKind collective_group = GroupKind::kOther;
  // The current collective is a point-to-point op: which side ("send"/"isend", "recv"/"irecv" as reported).
  enum class P2p : uint8_t { kNone, kSend, kRecv };
  P2p p2p = P2p::kNone;
  Phase phase = Phase::kUnspecified;
  uint8_t flags = 0;
  uint16_t node = 0;  // the reported `node`: 0 none, else 1 + its index in JobMonitor's interned names

  bool has(Flag f) const { return (flags & f) != 0; }
  void set(Flag f, bool on) { flags = on ? (flags | f) : (flags & ~f); }
  bool ever_seen() const { return last_seen != Time{}; }
  bool in_checkpoint_phase() const {
    return phase == Phase::kCheckpointSave || phase == Phase::kCheckpointLoad;
  }
  bool in_eval_phase() const { return phase == Phase::kEval; }
};

}  // namespace shepherd
