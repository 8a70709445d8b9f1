// Incidents: grouping, re-rooting and the budget rule (see incidents.h for the contract).
#include "scheduler/incidents.h"

#include <algorithm>

namespace shepherd {

bool IsNodeFaultKind(FindingKind k) {
  return k == FindingKind::kNodeLost || k == FindingKind::kGpuFault;
}

bool IsRankFaultKind(FindingKind k) {
  return k == FindingKind::kProcessExit || k == FindingKind::kHeartbeatLost || k == FindingKind::kHang;
}

namespace {

bool NamesAnyOf(const Finding& f, const std::set<std::string>& nodes) {
  return std::any_of(f.nodes.begin(), f.nodes.end(), [&](const std::string& n) { return nodes.count(n); });
}

bool Joins(const Finding& f, const Incident& i, int current_attempt, std::optional<Time> trained_since,
           const IncidentWindow& w) {
  if (f.attempt < i.root_attempt) return false;
  if (i.ended_through > 0 && f.attempt <= i.ended_through) return true;  // an attempt it ended: an echo
  if (f.attempt != current_attempt) return false;
  if (i.ended_through == 0)  // the root's attempt still runs
    return f.attempt == i.root_attempt && ToSeconds(f.detected_at - i.last_at) <= w.join_window_s;
  if (f.attempt != i.ended_through + 1) return false;  // an attempt it did not start
  return !trained_since || ToSeconds(f.detected_at - *trained_since) <= w.grace_s;
}

}  // namespace

IncidentVerdict ClassifyFinding(const Finding& f, const Incident* open, int current_attempt,
                                std::optional<Time> trained_since, const IncidentWindow& w) {
  if (!IsFaultKind(f.kind)) return {IncidentVerdict::Kind::kAlone, f.id};
  if (!open || !Joins(f, *open, current_attempt, trained_since, w))
    return {IncidentVerdict::Kind::kOpen, f.id};
  if (IsNodeFaultKind(f.kind) && IsRankFaultKind(open->root_kind) && NamesAnyOf(f, open->nodes))
    return {IncidentVerdict::Kind::kReroot, f.id};
  return {IncidentVerdict::Kind::kJoin, open->root};
}

std::vector<std::string> Admit(const Finding& f, const IncidentVerdict& v,
                               const std::set<std::string>& attempt_nodes, std::optional<Incident>* open) {
  switch (v.kind) {
    case IncidentVerdict::Kind::kAlone:
      return {};
    case IncidentVerdict::Kind::kOpen: {
      Incident i;
      i.root = f.id;
      i.root_kind = f.kind;
      i.root_attempt = f.attempt;
      i.nodes = attempt_nodes;
      i.nodes.insert(f.nodes.begin(), f.nodes.end());
      i.last_at = f.detected_at;
      i.members = {f.id};
      *open = std::move(i);
      return {};
    }
    case IncidentVerdict::Kind::kJoin:
    case IncidentVerdict::Kind::kReroot:
      break;
  }
  Incident& i = **open;
  std::vector<std::string> repointed;
  if (v.kind == IncidentVerdict::Kind::kReroot) {
    repointed = i.members;
    i.root = f.id;
    i.root_kind = f.kind;
  }
  i.members.push_back(f.id);
  i.last_at = std::max(i.last_at, f.detected_at);
  return repointed;
}

bool RestartIsFree(const Incident& i, const Finding& f) {
  return i.spent && f.incident == i.root && IsNodeFaultKind(f.kind) && NamesAnyOf(f, i.nodes);
}

void OnIncidentEndedAttempt(Incident* i, int attempt, bool restarted, bool spent,
                            const std::set<std::string>& next_nodes) {
  i->ended_through = std::max(i->ended_through, attempt);
  if (!restarted) return;
  ++i->restarts;
  i->spent = i->spent || spent;
  i->nodes.insert(next_nodes.begin(), next_nodes.end());
}

}  // namespace shepherd
