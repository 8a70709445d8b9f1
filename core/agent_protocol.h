// The daemon's side of the agent protocol (docs/agent-protocol.md) as typed values. api/ parses agent
// heartbeats into AgentHeartbeat and renders Assignments and HeartbeatAck; control/ works on these only.
// (The agent keeps its own types in agent/protocol.h: the two sides of one wire, each validating what it
// reads.)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/job.h"

namespace shepherd {

// One rank of one attempt of one job.
struct RankRef {
  std::string job;
  int attempt = 0;
  int rank = 0;
  bool operator==(const RankRef&) const = default;
};

// One rank process as its agent last saw it.
struct ProcessStatus {
  RankRef rank;
  bool running = true;
  std::optional<int> exit_code;  // exited: the code; empty when killed by a signal or unknown
  std::optional<int> signal;     // exited: the terminating signal, if any
  std::string error;             // exited without starting: why
  std::string log_tail;          // exited (not with 0): the last lines of the rank's log, valid UTF-8
  // PyTorch flight-recorder dumps the agent found for the rank so far (running) or when it exited.
  std::vector<FlightRecorderDump> flight_recorder;
  int64_t pid = 0;  // as the agent reported it (0: not reported, or never started)
  // Killed by SIGKILL: whether the node's kernel OOM-killed a process just before (the agent's evidence);
  // empty when not known.
  std::optional<bool> oom_kill;
  // Stopped by its agent because the daemon's lease ran out (no heartbeat answer in time: the daemon or the
  // network was late), not by the rank or its node.
  bool fenced = false;
};

struct GpuFault {
  int gpu = -1;
  std::string kind = "fault";
  std::string detail;
};

// The latest run of the site's node health check on the agent (`--health-check`).
struct HealthCheckReport {
  int64_t seq = 0;  // increases per run: each run is counted once
  bool ok = false;
  std::string output;
};

// POST /v1/nodes/{id}/heartbeat.
struct AgentHeartbeat {
  std::vector<ProcessStatus> processes;
  std::vector<GpuFault> gpu_faults;
  std::optional<HealthCheckReport> health_check;
};

// The answer: exits the daemon has recorded (the agent forgets them) and the node's assignments version.
struct HeartbeatAck {
  std::vector<RankRef> ack_exits;
  int64_t assignments_version = 0;
  double lease_s = 0;  // the agent's lease on its assignments, from when it sent this heartbeat
  // The heartbeat's relayed reports (`reports`, docs/agent-protocol.md "Relayed reports"): taken (ignored
  // ones included, as POST /v1/jobs/{id}/reports counts them) and refused (malformed, another rank's, or an
  // entry for a rank not placed on the node in its job's current attempt).
  int reports_accepted = 0;
  int reports_rejected = 0;
};

// One rank the node's agent must run.
struct RankAssignment {
  RankRef rank;
  int gpu = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string
      run_as;  // the Unix user for the job's owner (daemon config `run_as`); empty: the agent's default
};

// GET /v1/nodes/{id}/assignments: the complete desired set of the node, versioned.
// `keep`: running processes the daemon has no record of that the agent must leave alone although they are
// not desired (health/unknown_processes.h); only agents that asked with keep=1 get an answer while any.
struct Assignments {
  int64_t version = 0;
  std::vector<RankAssignment> ranks;
  std::vector<RankRef> keep;
};

}  // namespace shepherd
