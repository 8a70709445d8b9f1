// Collective-hang analysis: which collectives are open past the hang timeout and which ranks are the root
// culprits, found by following the wait-for graph.
//
// Wait-for graph: a rank inside collective (G, s) waits for every member m of its G-group (tp, pp, dp, cp
// from placement coordinates; world; or a named group whose members the ranks sent, named_groups.h) that
// has not entered seq s of G (m's highest entered seq for G < s).
// Starting from the ranks whose collective is open longer than hang_timeout_s, chains are followed to
// their ends (the sink components of the graph):
//   - a rank that is not heartbeating, never reported, or is alive but inside no collective: culprit;
//     one that reported `finished` too, but not as stopped (it ended by choice, its node is not suspect);
//   - a rank inside a collective of a group whose members are unknown (a name the ranks sent no members
//     for): culprit, with that caveat in its reason;
//   - a cycle of ranks waiting on each other (collective order mismatch): every rank of the cycle;
//   - a rank inside (G, s) where every member entered s: if some members have gone silent (no report for
//     more than `silent_after_s`, checkpoint allowances ignored), those silent members are the culprits:
//     a rank's heartbeat thread keeps reporting while a collective blocks it, so silence means the process
//     or its host stopped. Otherwise, if some live members have already left (G, s) (the collective
//     completed for them): when one of them now waits past the timeout in a later collective, r is the
//     culprit (stuck in a collective its peers completed); else r's report predates its own completion and
//     nothing is concluded yet (if nothing else is, `hung` is false). Otherwise, once every member has
//     been inside (G, s) past the timeout (not while the last one to enter only just arrived), no culprit
//     rank; the group's nodes are suspected of a communication fault (reported in comm_faults), unless
//     the members are inside point-to-point ops that all face one way (every one in recv, or every one
//     in send): no transfer is in flight, so the job's code deadlocked and each member is a (heartbeating)
//     culprit.
// Ranks that merely wait are never culprits. Pipeline p2p ops reported with group "pp" are treated as a
// collective of the whole pp group, so their seqs must be counted per pp group by the client.
//
// Pure function of its inputs; cost O(sum of group sizes of the ranks reached), paid only while a hang is
// open.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"
#include "health/named_groups.h"
#include "health/rank_layout.h"
#include "health/rank_state.h"

namespace shepherd {

struct HangCulprit {
  int rank = 0;
  std::string reason;  // "heartbeating but inside no collective", "no heartbeat for 42 s", ...
  // Not heartbeating (silent, or never reported): the process or its host stopped. A heartbeating culprit
  // is busy in its own work (its code, a lone rank's task), which says nothing against its node.
  bool stopped = false;
};

struct CommFault {
  std::string group;  // "tp", "dp", ..., or the named group's name
  int64_t seq = 0;
  std::vector<int> members;  // ascending
};

struct HangAnalysis {
  bool hung = false;
  // The longest-open collective past the timeout: evidence for the detail sentence.
  int oldest_rank = -1;
  std::string oldest_group;  // "tp", "dp", ..., or the name the rank sent
  int64_t oldest_seq = 0;
  double oldest_open_s = 0;
  int waiting_past_timeout = 0;       // ranks inside a collective open past the timeout
  std::vector<HangCulprit> culprits;  // ascending by rank
  std::vector<CommFault> comm_faults;
  std::string detail;  // one human sentence naming the evidence

  std::vector<int> SuspectRanks() const;  // culprits, else comm-fault members; ascending, unique
};

// `alive[r]`: whether rank r's heartbeat is fresh (the caller applies grace and checkpoint allowances).
// REQUIRES: ranks.size() == alive.size() == layout.world_size().
HangAnalysis AnalyzeHang(const RankLayout& layout, const std::vector<RankState>& ranks,
                         const NamedGroups& named, double silent_after_s, const std::vector<bool>& alive,
                         double hang_timeout_s, Time now);

}  // namespace shepherd
