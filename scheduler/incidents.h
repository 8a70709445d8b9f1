// Incidents: one fault, one incident. When a node dies its surviving peers' collectives fail first (their
// processes exit, or hang), and the node itself is declared lost seconds later; these findings are one
// incident: one restart where possible, one unit of restart budget, one cause. Pure: a finding and the
// job's open incident in, a verdict out; no I/O, no clock reads (times come with the findings).
//
// Terms. Fault findings: node_lost, gpu_fault (node faults) and process_exit, heartbeat_lost, hang (rank
// faults). Other kinds (SDC, loss, straggler, a forced restart, ...) are each their own incident and are
// never joined: they speak of data or of a person's decision, not of a fault cascading.
// An incident's root is the finding that best explains it; every member's Finding::incident is the root's
// id, and every attempt the incident ended has Attempt::ended_by = the root's id.
//
// Membership (the closing rule). A fault finding f of the job joins its open incident I when:
//  - f is of an attempt I ended (root_attempt <= f.attempt <= I.ended_through): a late echo of the fault;
//  - or f is of the job's current attempt, and either
//      - I ended no attempt yet (f.attempt == root_attempt: a restart held, or a root recorded only) and f
//        comes within join_window_s of I's newest member (the node-lost timeout plus a margin: the node's
//        own finding follows its peers' exits by about that much), or
//      - I started that attempt (f.attempt == I.ended_through + 1) and it has not trained yet: no first
//        step, or f comes at most grace_s after the first step (a fault found while the new attempt starts
//        up, such as the node its predecessor lost, is still this fault; one after it trained is new).
// Anything else opens a new incident rooted at f. A fault finding always leaves an open incident behind
// (the one it joined or opened); other kinds leave the open one as it was.
//
// Re-rooting. A node fault f that joins an incident whose root is a rank fault, and names a node of the
// root's attempt (I.nodes), is the better root cause (the peers failed because the node died): f becomes
// the root, every earlier member and every attempt the incident ended point at f.
//
// Budget. An incident spends one unit of policy.max_restarts and one backoff step: its first restart does.
// A later restart inside it is free when a node fault on one of the incident's nodes causes it (the
// restart that moves the ranks off the node found dead; each node can be found dead once, so this is
// bounded). A rank fault that restarts the job again inside an incident spends anew: the same loss
// repeating across restarts is a loop, and the budget is what bounds it.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/time.h"

namespace shepherd {

bool IsNodeFaultKind(FindingKind k);  // node_lost, gpu_fault
bool IsRankFaultKind(FindingKind k);  // process_exit, heartbeat_lost, hang
inline bool IsFaultKind(FindingKind k) {
  return IsNodeFaultKind(k) || IsRankFaultKind(k);
}

struct Incident {
  std::string root;  // the root finding's id
  FindingKind root_kind = FindingKind::kProcessExit;
  int root_attempt = 0;              // the attempt the (first) root finding was of
  std::set<std::string> nodes;       // nodes of the root's attempt, and of every attempt the incident started
  int ended_through = 0;             // the newest attempt the incident ended; 0: none yet
  int restarts = 0;                  // restarts it executed (free ones included)
  bool spent = false;                // one of them spent the unit of restart budget
  Time last_at{};                    // the newest member's detected_at
  std::vector<std::string> members;  // finding ids, oldest first, the root among them
};

struct IncidentWindow {
  double join_window_s = 15;  // see "Membership"; the daemon uses node_heartbeat_timeout_s + 5 s
  double grace_s = 30;        // after the first step of the attempt the incident started
};

struct IncidentVerdict {
  enum class Kind {
    kOpen,    // f opens a new incident (its own root)
    kJoin,    // f joins the open incident
    kReroot,  // f joins and becomes its root
    kAlone,   // f is not a fault finding: its own incident, the open one unchanged
  };
  Kind kind = Kind::kOpen;
  std::string incident;  // the root id f carries: its own for kOpen and kAlone, the (new) root otherwise
};

// REQUIRES: f.id set. `open`: the job's open incident, if any. `current_attempt`: the job's current attempt
// number. `trained_since`: when that attempt reported its first step (daemon clock), if it has.
IncidentVerdict ClassifyFinding(const Finding& f, const Incident* open, int current_attempt,
                                std::optional<Time> trained_since, const IncidentWindow& w);

// Applies a verdict. kOpen: *open becomes a new incident rooted at f, on `attempt_nodes` (the nodes of f's
// attempt). kJoin, kReroot: f is added (kReroot: and made the root). kAlone: nothing. Returns the ids of the
// members whose incident changed other than f itself (kReroot: every earlier member), for the caller to
// re-point and persist with the attempts the incident ended.
std::vector<std::string> Admit(const Finding& f, const IncidentVerdict& v,
                               const std::set<std::string>& attempt_nodes, std::optional<Incident>* open);

// Whether a restart decided for finding f of incident `i` (f.incident == i.root) is free: the incident
// already spent its unit, and f is a node fault on one of its nodes (see "Budget").
bool RestartIsFree(const Incident& i, const Finding& f);

// The incident ended attempt `attempt` by a restart (or by failing or queueing the job, restarted = false
// then); `spent`: the restart spent budget; `next_nodes`: the new placement's nodes (empty when none).
void OnIncidentEndedAttempt(Incident* i, int attempt, bool restarted, bool spent,
                            const std::set<std::string>& next_nodes);

}  // namespace shepherd
