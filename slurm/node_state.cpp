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

// sinfo's and scontrol's base words (upper case): the base state and the flag a word implies.
struct BaseWord {
  const char* word;
  SlurmBaseState base;
  bool SlurmNodeState::*flag;  // nullptr: none
};
constexpr BaseWord kBaseWords[] = {
    {"IDLE", SlurmBaseState::kIdle, nullptr},
    {"ALLOCATED", SlurmBaseState::kAllocated, nullptr},
    {"ALLOC", SlurmBaseState::kAllocated, nullptr},
    {"MIXED", SlurmBaseState::kMixed, nullptr},
    {"MIX", SlurmBaseState::kMixed, nullptr},
    {"DOWN", SlurmBaseState::kDown, nullptr},
    {"ERROR", SlurmBaseState::kError, nullptr},
    {"ERR", SlurmBaseState::kError, nullptr},
    {"FUTURE", SlurmBaseState::kFuture, nullptr},
    {"FUTR", SlurmBaseState::kFuture, nullptr},
    {"UNKNOWN", SlurmBaseState::kUnknown, nullptr},
    {"UNK", SlurmBaseState::kUnknown, nullptr},
    {"DRAINED", SlurmBaseState::kIdle, &SlurmNodeState::drain},
    {"DRAIN", SlurmBaseState::kIdle, &SlurmNodeState::drain},
    {"DRAINING", SlurmBaseState::kAllocated, &SlurmNodeState::drain},
    {"DRNG", SlurmBaseState::kAllocated, &SlurmNodeState::drain},
    {"COMPLETING", SlurmBaseState::kAllocated, &SlurmNodeState::completing},
    {"COMP", SlurmBaseState::kAllocated, &SlurmNodeState::completing},
    {"FAIL", SlurmBaseState::kIdle, &SlurmNodeState::fail},
    {"FAILING", SlurmBaseState::kAllocated, &SlurmNodeState::fail},
    {"FAILG", SlurmBaseState::kAllocated, &SlurmNodeState::fail},
    {"INVAL", SlurmBaseState::kUnknown, &SlurmNodeState::invalid},
    {"INVALID", SlurmBaseState::kUnknown, &SlurmNodeState::invalid},
    {"MAINT", SlurmBaseState::kIdle, &SlurmNodeState::maintenance},
    {"MAINTENANCE", SlurmBaseState::kIdle, &SlurmNodeState::maintenance},
    {"RESERVED", SlurmBaseState::kIdle, &SlurmNodeState::reserved},
    {"RESV", SlurmBaseState::kIdle, &SlurmNodeState::reserved},
    {"PLANNED", SlurmBaseState::kIdle, nullptr},
    {"PLND", SlurmBaseState::kIdle, nullptr},
    {"POWERED_DOWN", SlurmBaseState::kIdle, &SlurmNodeState::powered_down},
    {"POWER_DOWN", SlurmBaseState::kIdle, &SlurmNodeState::powered_down},
    {"POW_DN", SlurmBaseState::kIdle, &SlurmNodeState::powered_down},
    {"REBOOT", SlurmBaseState::kIdle, nullptr},
    {"BOOT", SlurmBaseState::kIdle, nullptr},
};

// False: `w` is not a base state.
bool ApplyBase(const std::string& w, SlurmNodeState& s) {
  for (const BaseWord& b : kBaseWords)
    if (w == b.word) {
      s.base = b.base;
      if (b.flag) s.*b.flag = true;
      return true;
    }
  return false;
}

void ApplyFlag(const std::string& f, SlurmNodeState& s) {
  if (f == "DRAIN")
    s.drain = true;
  else if (f == "NOT_RESPONDING" || f == "NO_RESPOND")
    s.not_responding = true;
  else if (f == "FAIL")
    s.fail = true;
  else if (f == "COMPLETING")
    s.completing = true;
  else if (f == "MAINT" || f == "MAINTENANCE")
    s.maintenance = true;
  else if (f == "RESERVED")
    s.reserved = true;
  else if (f == "POWERED_DOWN" || f == "POWERING_DOWN" || f == "POWER_DOWN")
    s.powered_down = true;
  else if (f == "INVALID" || f == "INVALID_REG")
    s.invalid = true;
  // CLOUD, POWERING_UP, REBOOT_REQUESTED, REBOOT_ISSUED, PLANNED, DYNAMIC_*: no meaning for Shepherd.
}

}  // namespace

const char* ToString(SlurmBaseState s) {
  switch (s) {
    case SlurmBaseState::kUnknown:
      return "unknown";
    case SlurmBaseState::kIdle:
      return "idle";
    case SlurmBaseState::kAllocated:
      return "allocated";
    case SlurmBaseState::kMixed:
      return "mixed";
    case SlurmBaseState::kDown:
      return "down";
    case SlurmBaseState::kError:
      return "error";
    case SlurmBaseState::kFuture:
      return "future";
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
      case '*':
        s.not_responding = true;
        break;
      case '~':
      case '!':
      case '%':
        s.powered_down = true;
        break;
      case '$':
        s.maintenance = true;
        break;
      default:
        break;
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
