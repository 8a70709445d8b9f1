// Agent: one node's agent (docs/agent-protocol.md). Registers the node, heartbeats, long-polls its
// assignments and keeps the node's rank processes equal to them through a Supervisor.
//
// Threads (two, no shared domain state beyond one mutex-protected mailbox):
//   - the supervision thread is the caller of Run(). It owns the Supervisor: registers (and re-registers
//     after a 404), applies the newest assignments from the mailbox, polls exits every
//     `supervise_interval`, and heartbeats every `heartbeat_interval` and at once after an exit.
//   - the poll thread (started by Run) only long-polls GET /v1/nodes/{id}/assignments and drops each answer
//     into the mailbox (latest wins). Its first call after (re-)registering sends wait=0, so an agent that
//     adopted ranks reconciles them at once.
// Each thread has its own client over the daemon's replicas (net/endpoint_list.h): a call goes to the
// replica that last answered, fails over to the next one, and follows a follower's redirect to the leader.
// Each thread has its own HttpClient. A heartbeat blocks supervision for at most twice `request_timeout`
// (below), which therefore bounds how late a stop escalates to SIGKILL while the daemon hangs.
//
// Failure model: when the daemon is unreachable or answers 5xx, registration retries with exponential
// backoff (0.25 s doubling to 10 s), the long poll likewise (up to 5 s), and heartbeats keep their
// interval; ranks keep running and exits stay queued until acknowledged, until the lease runs out. Exits
// are kept in the Supervisor until a heartbeat answer acknowledges them, whichever replica gives it, so an
// exit reported while one replica is down is resent to, and acknowledged by, the next.
// A heartbeat the leader did not answer is sent again at once as a renew-only heartbeat (header
// Shepherd-Renew-Only): a follower answers it from replicated state with a lease and takes nothing (its
// answer says renew_only: exits and relay files stay for the leader), or with node_lost (every rank stops
// now). So a heartbeat blocks supervision for at most twice `request_timeout`.
// Lease (fencing): each heartbeat answer grants `lease_s` from the moment that heartbeat was sent. With no
// newer answer, the agent stops every rank (SIGTERM at expiry - fence_grace, SIGKILL at expiry), so the
// daemon may start their replacements elsewhere once the lease it granted has expired. Heartbeat calls
// never block past the next fencing step. Fenced ranks are reported as exits like any other. A 404 on a
// heartbeat or on the long poll means the daemon forgot the node: the agent registers again.
//
// Shutdown: Stop() (from any thread; NOT async-signal-safe) makes Run() return promptly, aborting HTTP
// calls in flight. Rank processes are left running: they outlive the agent, and a restarted agent adopts
// them from <state-dir>/processes.json.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/process.h"
#include "core/status.h"

namespace shepherd::agent {

struct AgentOptions {
  std::string server;  // daemon replicas' base URLs, "http://host:port[,http://host:port...]"
  std::string node_id;                          // REQUIRES non-empty
  int gpus = 0;                                 // REQUIRES > 0
  std::map<std::string, std::string> topology;  // level -> label (may include nvlink_domain)
  bool spare = false;
  std::string hostname;         // empty: gethostname()
  std::string state_dir;        // empty: ./var/agent-<node_id>; made absolute
  std::string token;            // bearer token (from --token-file or SHEPHERD_TOKEN, never argv), empty: none
  std::string token_file;       // --token-file: read again on a 401 (a rotated token is used at once)
  std::optional<RunAs> run_as;  // the identity ranks run as; nullopt: the agent's own
  // Users an assignment's `run_as` may name (the daemon's per-submitter mapping); run_as is one of them.
  std::vector<RunAs> allowed_run_as;
  std::optional<double> gpu_memory_gib;
  std::optional<std::string> gpu_model;
  std::chrono::milliseconds heartbeat_interval = std::chrono::seconds(1);
  std::chrono::milliseconds stop_grace = std::chrono::seconds(10);
  std::chrono::seconds long_poll_wait = std::chrono::seconds(30);  // the `wait` of the assignments call
  std::chrono::milliseconds supervise_interval = std::chrono::milliseconds(100);
  std::chrono::milliseconds request_timeout = std::chrono::seconds(5);  // register and heartbeat calls
  // Fencing: when the lease the daemon granted (heartbeat answers' lease_s) runs out, every rank has been
  // stopped: SIGTERM at expiry - fence_grace, SIGKILL at expiry (docs/agent-protocol.md, "Lease").
  std::chrono::milliseconds fence_grace = std::chrono::seconds(2);
  // Also enforce the lease from a second process (agent/fence_keeper.h), so the ranks of a stopped or hung
  // agent are fenced too. Create() forks it: set only where the process has no other thread yet.
  bool fence_keeper = false;
  // The site's node health check (`/bin/sh -c`), run every health_check_interval; empty: none.
  std::string health_check;
  std::chrono::milliseconds health_check_interval = std::chrono::seconds(60);
  std::chrono::milliseconds health_check_timeout = std::chrono::seconds(60);
};

class Agent {
 public:
  // Validates the options, opens the state directory and adopts the ranks a previous agent left running.
  // Adopted ranks keep the lease that agent left in <state-dir>/lease: with no answer from the daemon they
  // are fenced when it ends, as the earlier agent would have. With no running rank adopted, any lease left
  // is dropped (none is granted yet). With fence_keeper, forks the keeper.
  // Contacts no daemon. kInvalidArgument for bad options; kInternal when the state dir is unusable.
  static Result<std::unique_ptr<Agent>> Create(AgentOptions options);
  virtual ~Agent() = default;  // REQUIRES: Run() is not running

  // Runs until Stop(). Call at most once. Returns OK after a Stop().
  virtual Status Run() = 0;
  // Thread-safe. May be called before, during or after Run().
  virtual void Stop() = 0;
};

}  // namespace shepherd::agent
