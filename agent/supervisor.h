// Supervisor: the agent's process table. Starts desired ranks, stops undesired ones, notices exits, keeps
// exits until the daemon acknowledges them, and persists the table so a restarted agent adopts its ranks.
//
// Threading: NOT thread-safe. One thread owns a Supervisor (the agent's supervision loop); tests call it
// from the test thread. Destroying a Supervisor leaves every rank running (ranks outlive the agent).
//
// Persistence: <state-dir>/processes.json is rewritten (write + rename) after every change of the table.
// Each entry: job, attempt, rank, gpu, pid, start_time (/proc ticks), state "running" | "exited",
// exit_code, signal, error, acked. On Open, a "running" entry whose pid still runs with the same start time
// is adopted; otherwise it becomes an unacknowledged exit with an unknown exit code (exit_code null).
// Exited entries are kept until acknowledged AND no longer desired, so an agent restart never restarts
// a rank that already ran.
//
// Stopping: SIGTERM then SIGCONT to the process group (a SIGSTOPped rank gets to act on the TERM), SIGKILL to
// the group once `stop_grace` passed and the leader still runs. When a leader exits (stopped or not) the
// rest of its group gets SIGKILL: a rank's process group does not outlive the rank.
//
// Exit detection: own children by waitpid(WNOHANG); adopted processes (children of an earlier agent) by
// /proc/<pid>/stat (gone, zombie or other start time = exited, exit code unknown).
// Flight recorder: unless the rank's env sets them, the agent sets TORCH_FR_DUMP_TEMP_FILE to
// <state-dir>/flight-recorder/<job>-a<attempt>-r<rank>/nccl_trace_rank_ (PyTorch appends the rank) and
// TORCH_NCCL_DEBUG_INFO_PIPE_FILE to .../nccl_trace_pipe_ (PyTorch's dump trigger, `<stem><rank>.pipe`).
// The files whose path starts with the dump prefix are listed (path, size) in every report of the rank,
// running or exited. Before stopping a rank whose dump pipe has a reader, the agent writes to the pipe and
// sends SIGTERM only `dump_wait` later, so a rank stopped because it hung leaves its dump.
// Log tail: when a rank exits other than with code 0, the last lines of its log (agent/rank_files.h) go
// into its exit report. Log tails, errors and dump paths are redacted (core/redact.h) before any report.
// Relayed reports (agent/relay.h): each rank started gets SHEPHERD_RELAY_DIR, a directory of its own under
// <state-dir>/relay/ owned by its user; its row keeps the path (persisted, so an adopted rank's reports are
// relayed too). ReadRelayed collects what the ranks wrote for a heartbeat; the directory is removed with the
// row (an exit acknowledged and no longer desired), once nothing waits in it.
// Users: a rank runs as its assignment's `run_as` when that is one of `allowed_run_as`, else as `run_as`
// (or the agent's own identity); dumps are listed only among files of the rank's user.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/process.h"
#include "agent/protocol.h"
#include "agent/reconcile.h"
#include "agent/relay.h"
#include "core/status.h"

namespace shepherd::agent {

using SteadyTime = std::chrono::steady_clock::time_point;

struct SupervisorOptions {
  std::string state_dir;  // REQUIRES: absolute; created (with logs/) if missing
  std::chrono::milliseconds stop_grace = std::chrono::seconds(10);
  std::optional<RunAs> run_as;  // ranks drop to this identity before exec (agent/process.h)
  // The identities an assignment's `run_as` may name (run_as, if set, is one of them). A rank naming any
  // other user is not started: it exits at once with an error naming the user.
  std::vector<RunAs> allowed_run_as;
  // Credentials redacted from every text a report carries (log tails, errors, dump paths), besides each
  // rank's own SHEPHERD_TOKEN (core/redact.h): the agent's own token.
  std::vector<std::string> secrets;
  // How long a stop waits, after asking the rank for a flight-recorder dump, before SIGTERM (0: no dump).
  std::chrono::milliseconds dump_wait = std::chrono::seconds(2);
  // The kernel's count of OOM kills on this node (`oom_kill`, global and cgroup OOM kills alike; Linux
  // 4.13+). A rank killed by SIGKILL is reported as OOM-killed or not by whether it rose shortly before;
  // unreadable: not reported.
  std::string vmstat_path = "/proc/vmstat";
  // The node's GPUs as this agent knows them (`--gpus`; 0: unchecked). A rank assigned a GPU index at or
  // above it is not started: it exits at once with an error naming both counts (the daemon's record of the
  // node has more GPUs than the agent, e.g. an agent restarted with stale flags, docs/agent-protocol.md).
  int gpus = 0;
};

// How close to a SIGKILL exit the node's OOM-kill count must have risen to call the exit an OOM kill (the
// count rises when the kernel picks its victim, the exit is reaped at a later Poll).
inline constexpr std::chrono::seconds kOomKillWindow{10};

// One row of the process table (for tests, logs and heartbeats).
struct TrackedProcess {
  RankKey key;
  int gpu = -1;
  pid_t pid = 0;
  std::uint64_t start_time = 0;
  ProcessPhase phase = ProcessPhase::kRunning;
  bool adopted = false;         // started by an earlier agent process
  ExitInfo exit;                // phase kExited
  std::string error;            // phase kExited without a pid: the spawn error
  bool acked = false;           // exit acknowledged by the daemon
  std::string log_tail;         // phase kExited with a code other than 0: the end of its log
  std::string dump_prefix;      // TORCH_FR_DUMP_TEMP_FILE given to the rank
  std::string dump_pipe;        // TORCH_NCCL_DEBUG_INFO_PIPE_FILE given to the rank
  std::string relay_dir;        // SHEPHERD_RELAY_DIR given to the rank; empty: none (it posts itself)
  uid_t uid = 0;                // the rank's user: only its files are listed or poked as its dumps
  std::string token;            // the rank's SHEPHERD_TOKEN (memory only; adopted: read from /proc)
  std::vector<DumpFile> dumps;  // phase kExited: flight-recorder files found under dump_prefix
  // phase kExited by SIGKILL: whether the node's kernel OOM-killed a process just before (evidence about
  // the node); empty when the agent could not tell.
  std::optional<bool> oom_kill;
  // Stopped because the daemon's lease ran out (StopAll with a deadline): the exit is the agent's fence,
  // not the rank's or the node's doing.
  bool fenced = false;
  std::optional<SteadyTime> term_at;  // phase kStopping: SIGTERM deadline while a dump is awaited
  std::optional<SteadyTime> kill_at;  // phase kStopping: SIGKILL deadline (unset once SIGKILL was sent)
};

class Supervisor {
 public:
  // Creates the state directory, reads processes.json (a missing file is an empty table; a malformed one
  // is logged and treated as empty) and adopts what still runs. Errors: the directory cannot be created.
  static Result<std::unique_ptr<Supervisor>> Open(const SupervisorOptions& options);
  ~Supervisor();

  // Replaces the desired set (an assignments answer) and the processes to keep although not desired (its
  // `keep`), and reconciles at once.
  void SetDesired(std::vector<RankAssignment> desired, SteadyTime now, std::vector<RankKey> keep = {});
  bool has_desired() const { return desired_.has_value(); }

  // Reaps exits, escalates overdue stops, retries deferred starts, drops acknowledged exits that are no
  // longer desired. Returns the number of processes that exited (or failed to start) since the last call.
  int Poll(SteadyTime now);

  // Running processes (stopping ones included) plus exits not yet acknowledged, for a heartbeat.
  std::vector<ProcessReport> Report() const;
  // What the ranks wrote into their relay directories, for one heartbeat: at most kRelayMaxRanks ranks
  // (running ones first, starting one further each call so none waits behind the others for good) within
  // kRelayMaxReports / kRelayMaxBytes each and kRelayMaxHeartbeatBytes in all. Deletes malformed files
  // (counted in relay_malformed()).
  struct Relayed {
    RankKey key;
    RelayRead read;
  };
  std::vector<Relayed> ReadRelayed();
  std::uint64_t relay_malformed() const { return relay_malformed_; }

  // Marks these exits acknowledged; unknown keys are ignored.
  void AckExits(const std::vector<RankKey>& keys);

  // Stops every running process as if none were desired (tests, an explicit drain, fencing). The desired
  // set is cleared, so nothing is started until the next SetDesired. `grace` (default: stop_grace) bounds
  // the wait from SIGTERM to SIGKILL, for these stops and for stops already under way.
  void StopAll(SteadyTime now, std::optional<std::chrono::milliseconds> grace = std::nullopt);

  const std::vector<TrackedProcess>& processes() const { return table_; }
  std::string log_path(const RankKey& key) const;

 private:
  explicit Supervisor(SupervisorOptions options) : options_(std::move(options)) {}
  void Load();
  void Save() const;
  void Reconcile(SteadyTime now);
  void Start(const RankAssignment& a);
  void BeginStop(TrackedProcess* p, const std::string& reason, SteadyTime now);
  void Terminate(TrackedProcess* p, SteadyTime now);  // SIGTERM + SIGCONT to the group, SIGKILL deadline
  bool Reap(TrackedProcess* p, SteadyTime now);       // true when it exited just now
  // Reads the node's OOM-kill count; remembers when it last rose (it is read once per Poll).
  void SampleOomKills(SteadyTime now);
  std::string Redact(const TrackedProcess& p, std::string_view text) const;
  std::vector<DumpFile> Dumps(const TrackedProcess& p) const;

  SupervisorOptions options_;
  std::vector<TrackedProcess> table_;
  std::optional<std::vector<RankAssignment>> desired_;
  std::vector<RankKey> keep_;
  int new_exits_ = 0;                       // exits and spawn failures since the last Poll
  std::optional<std::uint64_t> oom_kills_;  // the count at the last Poll; empty: unreadable
  std::optional<SteadyTime> oom_rose_at_;   // when a Poll last saw it rise
  std::size_t relay_cursor_ = 0;            // ReadRelayed's rotating start
  std::uint64_t relay_malformed_ = 0;       // relayed files deleted unread, in all
};

}  // namespace shepherd::agent
