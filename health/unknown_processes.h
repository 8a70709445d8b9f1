// Unknown processes: rank processes an agent runs that the daemon has no record of. A
// daemon started on a new or emptied database must not order agents to stop ranks it never launched: they
// are tracked per node, shown (GET /v1/nodes) and kept (the assignments answer's `keep`) until an operator
// decides (POST /v1/nodes/{id}/unknown-processes/stop) or `unknown_process_timeout_s` passes.
//
// Unknown: the job is not in the daemon's records, or its attempt is newer than any the daemon started.
// A process of a known job's older or current attempt is known: if not desired it is stopped as before
// (fencing). A process once found unknown stays unknown while it runs, whatever the daemon learns later:
// a fresh database may create a job under the same id, and that job's ranks are still not this process.
//
// Pure: no clock reads, no I/O. The caller (AgentBoard, control thread) owns the lists.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/agent_protocol.h"
#include "core/time.h"

namespace shepherd {

struct UnknownProcess {
  RankRef rank;
  int64_t pid = 0;        // as the agent reported it (0: not reported)
  Time first_seen{};      // the first heartbeat since daemon start that listed it
  bool stopping = false;  // decided (operator or timeout): no longer kept, the agent stops it
};

// Does the daemon know this (job, attempt)?
using KnowsAttempt = std::function<bool(const RankRef&)>;

// The node's unknown processes after a heartbeat that lists `processes` (running and exited):
//   - a running process already in `tracked` keeps its entry (first_seen, decision, order);
//   - a running process not tracked is appended with first_seen = now when !knows(its rank);
//   - entries whose process is no longer listed as running are dropped (it ended or was stopped).
std::vector<UnknownProcess> TrackUnknown(const std::vector<UnknownProcess>& tracked,
                                         const std::vector<ProcessStatus>& processes,
                                         const KnowsAttempt& knows, Time now);

// The timeout: undecided entries first seen at least `timeout_s` before `now` become stopping.
// timeout_s <= 0: never (kept until an operator decides). Returns whether anything changed.
bool ExpireUnknown(std::vector<UnknownProcess>* tracked, Time now, double timeout_s);

// The operator's decision: every undecided entry becomes stopping. Returns how many did.
int StopUnknown(std::vector<UnknownProcess>* tracked);

// The ranks the node's agent must leave running although they are not desired: the undecided entries.
std::vector<RankRef> KeepList(const std::vector<UnknownProcess>& tracked);

}  // namespace shepherd
