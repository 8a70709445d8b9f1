// The exit hold (see exit_hold.h for the contract).
#include "scheduler/exit_hold.h"

#include <cmath>

namespace shepherd {

namespace {

// The waited-for nodes as the reason names them: every name up to kNamed nodes, else their count and the
// first kNamed names (a fleet job waits for thousands of nodes; the finding's text must stay a line).
constexpr std::size_t kNamed = 3;

std::string NodeList(const std::vector<std::string>& nodes) {
  std::string names;
  for (std::size_t i = 0; i < nodes.size() && i < kNamed; ++i) names += (i ? ", " : "") + nodes[i];
  if (nodes.size() <= kNamed) return names;
  return std::to_string(nodes.size()) + " nodes (" + names + " and " + std::to_string(nodes.size() - kNamed) +
         " more)";
}

}  // namespace

ExitHold DecideExitHold(const ExitHoldInput& in) {
  ExitHold out;
  out.until = in.exit_at + Seconds(in.node_timeout_s + in.margin_s);
  for (const auto& [node, heard] : in.last_heard)
    if (!heard || *heard < in.exit_at) out.waiting_for.push_back(node);
  const std::string nodes = NodeList(out.waiting_for);
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
  out.reason = "hold the restart until " + nodes + (out.waiting_for.size() > 1 ? " are" : " is") +
               " heard from or declared lost (at most until " +
               FormatRfc3339(out.until) + ")";
  return out;
}

}  // namespace shepherd
