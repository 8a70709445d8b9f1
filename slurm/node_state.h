// Slurm node states and their meaning for Shepherd. Pure.
#pragma once

#include <string>
#include <string_view>

#include "core/node.h"
#include "core/status.h"

namespace shepherd::slurm {

enum class SlurmBaseState { kUnknown, kIdle, kAllocated, kMixed, kDown, kError, kFuture };
const char* ToString(SlurmBaseState s);

// A base state plus the flags that matter to Shepherd. Flags this module does not know are ignored.
struct SlurmNodeState {
  SlurmBaseState base = SlurmBaseState::kUnknown;
  bool drain = false;           // DRAIN: drained (idle) or draining (still running jobs)
  bool not_responding = false;  // NOT_RESPONDING, '*' in sinfo
  bool fail = false;            // FAIL / FAILING
  bool completing = false;
  bool maintenance = false;  // MAINT, '$'
  bool reserved = false;
  bool powered_down = false;  // POWERED_DOWN / POWERING_DOWN / POWER_DOWN, '~' '%' '!'
  bool invalid = false;       // INVAL: registered with less hardware than configured
  bool operator==(const SlurmNodeState&) const = default;
};

// Parses both spellings: scontrol's `IDLE+DRAIN`, `DOWN+NOT_RESPONDING`, `MIXED+DRAIN+COMPLETING`, and
// sinfo's %T/%t forms `idle`, `drained`, `draining`, `down*`, `mixed~`, `alloc`, `drng`, `inval`. Case does
// not matter. kInvalidArgument: empty, or a base state that is neither.
Result<SlurmNodeState> ParseNodeState(std::string_view text);

// What a Slurm state means for placing work on the node (core/node.h). Slurm's own allocations are not
// Shepherd's: idle, mixed and allocated nodes are kAvailable (Shepherd gets nodes by asking Slurm for an
// allocation). kFailed: down, error, fail, not responding or invalid. kCordoned: drain (drained or
// draining), future, unknown (not yet registered) and maintenance. Never kAllocated or kSpare: those are
// Shepherd's decisions.
NodeState ShepherdStateOf(const SlurmNodeState& s);

}  // namespace shepherd::slurm
