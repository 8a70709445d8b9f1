#include "slurm/node_state.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace shepherd::slurm {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// A sinfo or scontrol base word (upper case) → base state and implied flags. False: not a base state.
bool ApplyBase(const std::string& w, SlurmNodeState& s) {
  using B = SlurmBaseState;
  if (w == "IDLE") s.base = B::kIdle;
  else if (w == "ALLOCATED" || w == "ALLOC") s.base = B::kAllocated;
  else if (w == "MIXED" || w == "MIX") s.base = B::kMixed;
  else if (w == "DOWN") s.base = B::kDown;
  else if (w == "ERROR" || w == "ERR") s.base = B::kError;
  else if (w == "FUTURE" || w == "FUTR") s.base = B::kFuture;
  else if (w == "UNKNOWN" || w == "UNK") s.base = B::kUnknown;
  else if (w == "DRAINED" || w == "DRAIN") s.base = B::kIdle, s.drain = true;
  else if (w == "DRAINING" || w == "DRNG") s.base = B::kAllocated, s.drain = true;
  else if (w == "COMPLETING" || w == "COMP") s.base = B::kAllocated, s.completing = true;
  else if (w == "FAIL") s.base = B::kIdle, s.fail = true;
  else if (w == "FAILING" || w == "FAILG") s.base = B::kAllocated, s.fail = true;
  else if (w == "INVAL" || w == "INVALID") s.base = B::kUnknown, s.invalid = true;
  else if (w == "MAINT" || w == "MAINTENANCE") s.base = B::kIdle, s.maintenance = true;
  else if (w == "RESERVED" || w == "RESV") s.base = B::kIdle, s.reserved = true;
  else if (w == "PLANNED" || w == "PLND") s.base = B::kIdle;
  else if (w == "POWERED_DOWN" || w == "POW_DN" || w == "POWER_DOWN") s.base = B::kIdle, s.powered_down = true;
  else if (w == "REBOOT" || w == "BOOT") s.base = B::kIdle;
  else return false;
  return true;
}

void ApplyFlag(const std::string& f, SlurmNodeState& s) {
  if (f == "DRAIN") s.drain = true;
  else if (f == "NOT_RESPONDING" || f == "NO_RESPOND") s.not_responding = true;
  else if (f == "FAIL") s.fail = true;
  else if (f == "COMPLETING") s.completing = true;
  else if (f == "MAINT" || f == "MAINTENANCE") s.maintenance = true;
  else if (f == "RESERVED") s.reserved = true;
  else if (f == "POWERED_DOWN" || f == "POWERING_DOWN" || f == "POWER_DOWN") s.powered_down = true;
  else if (f == "INVALID" || f == "INVALID_REG") s.invalid = true;
  // CLOUD, POWERING_UP, REBOOT_REQUESTED, REBOOT_ISSUED, PLANNED, DYNAMIC_*: no meaning for Shepherd.
}

}  // namespace

const char* ToString(SlurmBaseState s) {
  switch (s) {
    case SlurmBaseState::kUnknown: return "unknown";
    case SlurmBaseState::kIdle: return "idle";
    case SlurmBaseState::kAllocated: return "allocated";
    case SlurmBaseState::kMixed: return "mixed";
    case SlurmBaseState::kDown: return "down";
    case SlurmBaseState::kError: return "error";
    case SlurmBaseState::kFuture: return "future";
  }
  return "unknown";
}

Result<SlurmNodeState> ParseNodeState(std::string_view text) {
  std::string t = Upper(text);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty()) return InvalidArgument("slurm node state: empty");
  SlurmNodeState s;
  // sinfo's one-character suffixes.
  while (!t.empty() && std::string_view("*~#!%$@^-").find(t.back()) != std::string_view::npos) {
    switch (t.back()) {
      case '*': s.not_responding = true; break;
      case '~': case '!': case '%': s.powered_down = true; break;
      case '$': s.maintenance = true; break;
      default: break;
    }
    t.pop_back();
  }
  std::size_t plus = t.find('+');
  if (!ApplyBase(t.substr(0, plus), s))
    return InvalidArgument("slurm node state: unknown base state '" + std::string(text) + "'");
  while (plus != std::string::npos) {
    std::size_t next = t.find('+', plus + 1);
    ApplyFlag(t.substr(plus + 1, next == std::string::npos ? std::string::npos : next - plus - 1), s);
    plus = next;
  }
  return s;
}

NodeState ShepherdStateOf(const SlurmNodeState& s) {
  if (s.base == SlurmBaseState::kDown || s.base == SlurmBaseState::kError || s.fail || s.not_responding ||
      s.invalid)
    return NodeState::kFailed;
  if (s.drain || s.maintenance || s.base == SlurmBaseState::kFuture || s.base == SlurmBaseState::kUnknown)
    return NodeState::kCordoned;
  return NodeState::kAvailable;
}

}  // namespace shepherd::slurm
