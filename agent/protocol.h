// JSON of the agent protocol (docs/agent-protocol.md): the bodies the agent sends and the answers it reads.
// Parsers take untrusted daemon output and return a Status instead of throwing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/reconcile.h"
#include "core/json.h"
#include "core/status.h"

namespace shepherd::agent {

// The answer of GET /v1/nodes/{id}/assignments: the complete desired set for the node.
// `keep`: running processes the daemon has no record of, to leave alone although not desired (absent from
// an old daemon's answers: empty).
struct Assignments {
  std::int64_t version = 0;
  std::vector<RankAssignment> ranks;
  std::vector<RankKey> keep;
};
// Rejects the whole answer if any entry is malformed (a partial set would stop the ranks it leaves out).
Result<Assignments> ParseAssignments(const Json& j);

// A PyTorch flight-recorder dump a rank left behind (TORCH_FR_DUMP_TEMP_FILE<rank>), found when it exited.
struct DumpFile {
  std::string path;
  std::uint64_t size = 0;
  bool operator==(const DumpFile&) const = default;
};

// One entry of a heartbeat's "processes".
struct ProcessReport {
  RankKey key;
  pid_t pid = 0;  // 0 when the process could not be started (see `error`)
  bool running = true;
  std::optional<int> exit_code;           // exited: the code, or empty when killed by a signal or unknown
  std::optional<int> signal;              // exited: the terminating signal, if any
  std::string error;                      // exited without starting: why (sent as "error" when non-empty)
  std::string log_tail;                   // exited: the end of its log (sent as "log_tail" when non-empty)
  std::vector<DumpFile> flight_recorder;  // dumps found so far (sent as "flight_recorder" when non-empty)
  std::optional<bool> oom_kill;           // killed by SIGKILL: the kernel's OOM kill or not (when known)
  bool fenced = false;                    // stopped by its agent because the daemon's lease ran out
};

struct AgentIdentity {
  pid_t pid = 0;
  std::string started_at;  // RFC 3339
};
// `gpu_faults` is passed through as given (an array; anything else is sent as []). At most
// kMaxHeartbeatProcesses processes, running ones first, of at most kMaxHeartbeatDumps dumps each
// (core/node.h).
Json HeartbeatBody(const AgentIdentity& agent, const Json& gpu_faults,
                   const std::vector<ProcessReport>& processes);

struct HeartbeatAnswer {
  std::vector<RankKey> ack_exits;
  std::optional<std::int64_t> assignments_version;
  // The lease granted on the node's assignments, counted from when the heartbeat was sent: past it without
  // a newer answer the agent must have stopped every rank (docs/agent-protocol.md, "Lease").
  std::optional<double> lease_s;
  // A follower's answer to a renew-only heartbeat (kRenewOnlyHeader): it renewed the lease and took
  // nothing, so the agent keeps its exits and relayed report files for the leader's answer.
  bool renew_only = false;
  // The daemon declared the node lost (a follower's renew-only answer): the agent stops every rank now
  // (SIGTERM, SIGKILL fence_grace later), as at the end of its lease.
  bool node_lost = false;
};
// The header of a heartbeat that asks only for the lease (docs/agent-protocol.md, "Several daemon
// replicas"): a follower answers it from its view instead of redirecting it to the leader; a leader
// answers it as any heartbeat.
inline constexpr const char* kRenewOnlyHeader = "Shepherd-Renew-Only";
Result<HeartbeatAnswer> ParseHeartbeatAnswer(const Json& j);

// POST /v1/nodes body. Optional fields are omitted when unset, so the daemon keeps what it has.
struct NodeRegistration {
  std::string id;
  std::string hostname;
  int gpus = 0;
  std::map<std::string, std::string> topology;  // level -> label, may include nvlink_domain
  bool spare = false;                           // sent only when true (--spare)
  std::optional<double> gpu_memory_gib;
  std::optional<std::string> gpu_model;
};
Json RegisterBody(const NodeRegistration& n);

// "spine=s0,leaf=l03,nvlink_domain=rack7" -> map. Empty input -> empty map. kInvalidArgument on an entry
// without '=', an empty level or value, or a level given twice.
Result<std::map<std::string, std::string>> ParseTopologyFlag(std::string_view text);

// The gpu_faults to report: <state-dir>/gpu_faults.json, either an array or {"gpu_faults": [...]}, as the
// site's probe wrote it. A missing file is []; an unreadable or malformed one is [] plus a warning in the
// log. Entries are made what the daemon takes (docs/agent-protocol.md), so a probe's slip never gets the
// heartbeat refused (the node would go silent and be declared lost): an entry without an integer `gpu` in
// [0, gpus) is dropped with a warning; a `kind` that is not 1-64 printable characters becomes "fault";
// `detail` loses its control characters and is cut at 1024 bytes (not a string: dropped).
Json ReadGpuFaults(const std::string& path, int gpus);

}  // namespace shepherd::agent
