#include "slurm/step_log.h"

#include <algorithm>
#include <charconv>
#include <utility>

namespace shepherd::slurm {
namespace {

bool ToInt(std::string_view s, int* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// "1", "2-3", "0,2,5-6": the task ids; empty when malformed.
std::vector<int> Tasks(std::string_view list) {
  std::vector<int> out;
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view part = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    std::size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (!ToInt(part.substr(0, dash), &lo)) return {};
    hi = lo;
    if (dash != std::string_view::npos && !ToInt(part.substr(dash + 1), &hi)) return {};
    if (hi < lo || hi - lo > 1'000'000) return {};
    for (int t = lo; t <= hi; ++t) out.push_back(t);
  }
  return out;
}

std::optional<int> SignalOf(std::string_view how) {
  static const std::pair<std::string_view, int> kSignals[] = {{"Hangup", 1},
                                                              {"Interrupt", 2},
                                                              {"Quit", 3},
                                                              {"Illegal instruction", 4},
                                                              {"Trace/breakpoint trap", 5},
                                                              {"Aborted", 6},
                                                              {"Bus error", 7},
                                                              {"Floating point exception", 8},
                                                              {"Killed", 9},
                                                              {"User defined signal 1", 10},
                                                              {"Segmentation fault", 11},
                                                              {"User defined signal 2", 12},
                                                              {"Broken pipe", 13},
                                                              {"Alarm clock", 14},
                                                              {"Terminated", 15}};
  if (how.size() > 14 && how.substr(how.size() - 14) == " (core dumped)") how.remove_suffix(14);
  for (const auto& [text, sig] : kSignals)
    if (how == text) return sig;
  return std::nullopt;
}

// "*** STEP 7.0 ON n1 CANCELLED AT <time> DUE TO TIME LIMIT ***", after srun's "srun: error: " or
// slurmstepd's "slurmstepd: error: " ("slurmstepd-<node>: error: " where several slurmd share a host),
// which srun relays through a task's stream: with --label it carries the task's label ("0: ").
StepCancel CancelNotice(std::string_view line) {
  constexpr std::string_view kNotice = ": error: *** STEP ";
  if (std::size_t c = line.find(": ");
      c != std::string_view::npos && c > 0 &&
      line.substr(0, c).find_first_not_of("0123456789") == std::string_view::npos)
    line.remove_prefix(c + 2);  // the task label
  const std::size_t at = line.find(kNotice);
  if (at == std::string_view::npos) return StepCancel::kNone;
  const std::string_view who = line.substr(0, at);
  if (who != "srun" && who != "slurmstepd" && who.rfind("slurmstepd-", 0) != 0) return StepCancel::kNone;
  line.remove_prefix(at + kNotice.size());
  if (line.find(" CANCELLED AT ") == std::string_view::npos) return StepCancel::kNone;
  static const std::pair<std::string_view, StepCancel> kCauses[] = {
      {" DUE TO TIME LIMIT ***", StepCancel::kTimeLimit},
      {" DUE TO PREEMPTION ***", StepCancel::kPreemption},
      {" DUE TO JOB REQUEUE ***", StepCancel::kJobRequeue},
      {" DUE TO NODE FAILURE", StepCancel::kNodeFailure}};
  for (const auto& [text, cause] : kCauses)
    if (line.find(text) != std::string_view::npos) return cause;
  return StepCancel::kOther;
}

}  // namespace

const char* ToString(StepCancel c) {
  switch (c) {
    case StepCancel::kNone:
      return "none";
    case StepCancel::kTimeLimit:
      return "time limit";
    case StepCancel::kPreemption:
      return "preemption";
    case StepCancel::kJobRequeue:
      return "job requeue";
    case StepCancel::kNodeFailure:
      return "node failure";
    case StepCancel::kOther:
      return "cancelled";
  }
  return "cancelled";
}

StepLog ParseStepLog(std::string_view out) {
  StepLog log;
  constexpr std::string_view kError = "srun: error: ", kNodeFailure = "Node failure on ",
                             kExited = "Exited with exit code ";
  while (!out.empty()) {
    std::size_t nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    if (log.cancel == StepCancel::kNone) log.cancel = CancelNotice(line);
    if (line.rfind(kError, 0) != 0) continue;
    line.remove_prefix(kError.size());
    if (line.rfind(kNodeFailure, 0) == 0) {
      std::string node(line.substr(kNodeFailure.size()));
      if (std::find(log.node_failures.begin(), log.node_failures.end(), node) == log.node_failures.end())
        log.node_failures.push_back(std::move(node));
      continue;
    }
    // "<node>: task(s) <list>: <how>"
    std::size_t c1 = line.find(": ");
    if (c1 == std::string_view::npos) continue;
    std::string_view node = line.substr(0, c1), rest = line.substr(c1 + 2);
    std::size_t sp = rest.find(' ');
    if (sp == std::string_view::npos || (rest.substr(0, sp) != "task" && rest.substr(0, sp) != "tasks"))
      continue;
    rest.remove_prefix(sp + 1);
    std::size_t c2 = rest.find(": ");
    if (c2 == std::string_view::npos) continue;
    std::vector<int> tasks = Tasks(rest.substr(0, c2));
    std::string_view how = rest.substr(c2 + 2);
    std::optional<int> code, sig;
    int n = 0;
    if (how.rfind(kExited, 0) == 0 && ToInt(how.substr(kExited.size()), &n))
      code = n;
    else
      sig = SignalOf(how);
    for (int t : tasks) log.failed.push_back({t, std::string(node), code, sig, std::string(how)});
  }
  return log;
}

bool TasksRan(std::string_view out) {
  if (!ParseStepLog(out).failed.empty()) return true;
  while (!out.empty()) {
    std::size_t nl = out.find('\n');
    std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    std::size_t digits = 0;
    while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') ++digits;
    if (digits > 0 && line.substr(digits, 2) == ": ") return true;
  }
  return false;
}

}  // namespace shepherd::slurm
