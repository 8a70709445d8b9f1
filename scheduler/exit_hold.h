// The exit hold: one restart where possible. When a node dies, its peers' collectives fail and their
// processes exit within about a second, while the node itself is declared lost only after its agent has
// been silent for the node timeout. Restarting at the first exit would restart onto the dead node and
// then again off it. So, for a job Shepherd's agents launched, a rank fault (process_exit first of all)
// restarts nothing until every node of the attempt has been heard from (its agent heartbeated) since the
// fault was reported: then it restarts as it would have; if instead a node is declared lost first, that
// node_lost finding restarts the job once, off the node (scheduler/incidents.h makes the exits its
// members). Pure: times in, a verdict out; no clock reads.
//
// Cost: live agents heartbeat every second (and at once after an exit), so a genuine user error waits at
// most about one agent heartbeat interval. Bound: the hold never outlasts exit_at + node_timeout_s +
// margin_s (the dead node is declared lost by then unless the daemon itself was late); past it the fault
// is decided as if no hold existed.
// Not for Slurm-launched or externally launched jobs: no agent of ours speaks for their nodes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"

namespace shepherd {

struct ExitHoldInput {
  Time exit_at{};  // when the daemon learned of the fault (the exit's finding detected_at)
  // Every node of the attempt, with its agent's last heartbeat (nullopt: never heard, or declared lost).
  std::map<std::string, std::optional<Time>> last_heard;
  Time now{};
  double node_timeout_s = 10;  // the daemon's node_heartbeat_timeout_s
  double margin_s = 3;         // ticks, and the heartbeat in flight when the timeout passes
};

struct ExitHold {
  bool hold = false;
  Time until{};                          // hold: decide at this time at the latest
  std::vector<std::string> waiting_for;  // nodes not heard from since exit_at (sorted)
  // Why it holds, or why it no longer does: names up to 3 waited-for nodes, beyond that their count and
  // the first 3 (bounded whatever the fleet; waiting_for has them all).
  std::string reason;
};

ExitHold DecideExitHold(const ExitHoldInput& in);

}  // namespace shepherd
