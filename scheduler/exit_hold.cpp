// The exit hold (see exit_hold.h for the contract).
#include "scheduler/exit_hold.h"

#include <cmath>

namespace shepherd {

ExitHold DecideExitHold(const ExitHoldInput& in) {
  ExitHold out;
  out.until = in.exit_at + Seconds(in.node_timeout_s + in.margin_s);
  for (const auto& [node, heard] : in.last_heard)
    if (!heard || *heard < in.exit_at) out.waiting_for.push_back(node);
  std::string nodes;
  for (const std::string& n : out.waiting_for) nodes += (nodes.empty() ? "" : ", ") + n;
  if (out.waiting_for.empty()) {
    out.reason = "every node of the attempt was heard from after the exit";
    return out;
  }
  if (in.now >= out.until) {
    out.reason = "no word from " + nodes + " since the exit, and no node declared lost within " +
                 std::to_string(std::lround(in.node_timeout_s + in.margin_s)) + " s: decided without it";
    return out;
  }
  out.hold = true;
  out.reason = "hold the restart until " + nodes + " is heard from or declared lost (at most until " +
               FormatRfc3339(out.until) + ")";
  return out;
}

}  // namespace shepherd
