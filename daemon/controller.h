// The Controller owns all control-plane state: the inventory (Cluster), jobs, attempts, the queue, and
// (later) health monitors, checkpoints and findings. It turns API calls into state changes, persists them
// through the Store, and acknowledges a change only after the COMMIT that holds it.
//
// Threading: every method runs on the one control thread. Store completions arrive on the writer thread
// and are posted back through `post`, so callbacks (`Done`) also run on the control thread.
// Reads see the newest state, including changes whose COMMIT is still pending; a change is acknowledged
// (Done with a value) only once durable. If a COMMIT fails the controller stops accepting writes
// (kUnavailable), reports not-ready and calls `on_storage_failure` so the daemon can exit: restarting
// recovers exactly what was acknowledged.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/json.h"
#include "core/node.h"
#include "core/status.h"
#include "core/time.h"
#include "health/checkpoint_ledger.h"
#include "health/job_monitor.h"
#include "scheduler/cluster.h"
#include "scheduler/planner.h"
#include "scheduler/recovery.h"
#include "scheduler/spares.h"
#include "storage/store.h"

namespace shepherd {

template <typename T>
using Done = std::function<void(Result<T>)>;
// Runs `fn` on the control thread, later (never inline from inside a store completion).
using Post = std::function<void(std::function<void()>)>;

struct ControllerOptions {
  TopologyLevels levels = {"spine", "leaf"};
  double default_gpu_memory_gib = 80;  // GPU size for planning when the inventory is empty
  int min_spares_per_leaf = 0;         // reserve reported in GET /v1/nodes and metrics when not met
  int min_spares_per_spine = 0;
  double node_heartbeat_timeout_s = 10;  // an attached agent silent this long: its node is lost
  double stop_timeout_s = 30;            // longest wait for an old attempt's ranks to stop before a restart
  std::string advertise_url;             // SHEPHERD_URL given to ranks (the daemon sets it once listening)
  std::string rank_token;                // SHEPHERD_TOKEN given to ranks
};

struct NodePatch {
  std::optional<bool> schedulable;
  std::optional<bool> spare;
  std::optional<bool> failed;  // only false is accepted from users: clears a failure after repair
  std::optional<std::string> reason;
};

struct NodeFilter {
  std::optional<std::string> state;
  std::optional<bool> spare;
  std::map<std::string, std::string> topology;  // level -> label
};

class Controller {
 public:
  Controller(Store* store, const Clock* clock, Post post, ControllerOptions options);
  ~Controller();

  // Loads every durable record and rebuilds memory (allocations of running jobs, the queue), then tries to
  // place queued jobs. REQUIRES: called once, before anything else.
  Status Recover();
  bool ready() const { return ready_ && !storage_failed_; }
  void set_on_storage_failure(std::function<void(const Status&)> f) { on_storage_failure_ = std::move(f); }

  // ---- Nodes
  struct NodeUpsert {
    Json node;
    bool created = false;
  };
  // Registers or updates a node. `schedulable_given`: the request named `schedulable` (otherwise an update
  // keeps the current cordon). kConflict when the change would drop GPUs a job holds.
  void UpsertNode(Node node, bool schedulable_given, Done<NodeUpsert> done);
  void PatchNode(const std::string& id, NodePatch patch, Done<Json> done);
  void DeleteNode(const std::string& id, Done<Json> done);
  Result<Json> GetNode(const std::string& id) const;
  Json ListNodes(const NodeFilter& filter) const;
  // Leaves and spines below the configured spare minimum (ControllerOptions::min_spares_per_*).
  std::vector<SpareDeficit> SpareDeficits() const;

  // ---- Planning and jobs
  // Hardware the planner assumes for `spec` on this inventory.
  Hardware HardwareFor(const JobSpec& spec) const;
  Result<PlanEstimate> PlanFor(const JobSpec& spec) const;
  // Admits a job whose plan fits GPU memory: 201 queued or running. kInvalidContent when it is larger than
  // the usable inventory.
  void SubmitJob(JobSpec spec, PlanEstimate estimate, Done<Json> done);
  void CancelJob(const std::string& id, Done<Json> done);
  Result<Json> GetJob(const std::string& id) const;
  Json ListJobs(std::optional<JobState> state) const;
  // The placement as JSON text (large: one entry per rank).
  Result<std::string> GetPlacement(const std::string& id) const;

  // ---- Agents (controller_agents.cpp, docs/agent-protocol.md)
  // An agent's heartbeat: marks the node attached and alive, records its processes, turns rank exits and
  // GPU faults into findings. Answers {"ack_exits", "assignments_version"}.
  // REQUIRES: `body` passed the API's heartbeat validation (every field read here has its type).
  void NodeHeartbeat(const std::string& node, const Json& body, Done<Json> done);
  // Long poll for the node's desired ranks: answers at once when the version differs from `known`,
  // otherwise when it changes or on the first Tick at or after `deadline`.
  void WatchAssignments(const std::string& node, int64_t known, Time deadline, Done<Json> done);
  void set_advertise_url(std::string url) { options_.advertise_url = std::move(url); }
  // Answers every pending long poll now (the daemon is shutting down: in-flight requests must finish).
  void ReleaseWaiters();

  // ---- Recovery (controller_recovery.cpp)
  // POST /v1/jobs/{id}/restart: 202 {"attempt", "checkpoint"} once durable; kConflict when no checkpoint
  // qualifies.
  void RestartJob(const std::string& id, std::string from, std::vector<std::string> replace_nodes,
                  std::string reason, Done<Json> done);

  // ---- Health (controller_health.cpp)
  // A batch of rank reports: memory only, except what they reveal (checkpoint grades, urgent findings),
  // which is committed before `done` (202 {"accepted", "rejected", "ignored"}).
  void IngestReports(const std::string& job_id, const Json& body, Done<Json> done);
  // Periodic: evaluates every monitor, persists findings and checkpoint grades.
  void Tick();
  Result<Json> GetHealth(const std::string& id) const;
  Result<Json> GetCheckpoints(const std::string& id) const;
  struct FailureFilter {
    std::optional<std::string> job, kind;
    std::optional<Time> since;
  };
  Result<Json> GetFailures(const FailureFilter& f) const;
  // Counters for /metrics: findings by kind, reports by outcome.
  const std::map<std::string, uint64_t>& finding_counts() const { return finding_counts_; }
  const std::map<std::string, uint64_t>& report_counts() const { return report_counts_; }

  const Cluster& cluster() const { return cluster_; }

 private:
  struct JobEntry {
    Job job;
    PlanEstimate estimate;
    std::optional<Attempt> attempt;       // the current (or last) attempt
    std::unique_ptr<JobMonitor> monitor;  // while an attempt runs
    bool monitor_started = false;         // agent-launched, or a rank reported: detectors are armed
    std::unique_ptr<CheckpointLedger> ledger;
    // A new attempt's ranks are handed to agents only once every rank of older attempts has stopped
    // (or launch_deadline passed): the old attempt's ranks are all stopped before the new ones start.
    bool launched = true;
    Time launch_deadline{};
    std::map<int, bool> exited_ok;  // ranks of the current attempt that exited 0
    // Recovery: a restart waiting for its backoff (state recovering), and the restart history.
    struct PendingRestart {
      Placement placement;
      std::optional<Checkpoint> resume;
      std::string reason;
      Time not_before{};
    };
    std::optional<PendingRestart> pending_restart;
    std::optional<Time> last_restart_at;
    int consecutive_restarts = 0;
  };
  struct AgentState {
    Time last_heartbeat{};
    bool lost = false;
    std::vector<std::pair<std::string, int>> running;  // (job, attempt) of its live rank processes
    std::set<std::string> faults_seen;                 // "gpu:kind" already turned into findings
  };
  struct Waiter {
    int64_t known = 0;
    Time deadline{};
    Done<Json> done;
  };

  Json NodeJson(const Node& n) const;
  Json JobJson(const JobEntry& e) const;
  Status CheckWritable() const;
  // Persists `batch`; `done` runs on the control thread after COMMIT. Marks the store failed on error.
  void Commit(WriteBatch batch, std::function<void(Status)> done);
  void OnStorageFailure(const Status& s);

  Record NodeRecord(const Node& n) const;
  Record JobRecord(const Job& j) const;
  Record AttemptRecord(const Attempt& a) const;

  // Starts a new attempt of `e` on `placement`: allocation, attempt record, state running.
  // `resume`: the checkpoint to resume from (nullopt: the ledger's last-known-good, else latest, else none).
  // kConflict (nothing changed) when a GPU of `placement` is no longer free.
  Status StartAttempt(JobEntry& e, Placement placement, const std::string& reason, WriteBatch* batch,
                      std::optional<Checkpoint> resume = std::nullopt);
  // Ends the current attempt: monitor gone, GPUs released, agents told to stop its ranks.
  void EndAttempt(JobEntry& e, Time now, WriteBatch* batch);
  // Carries out a recovery decision; appends to `actions`.
  void Execute(JobEntry& e, const RecoveryDecision& d, bool automatic, WriteBatch* batch);
  void StartDueRestarts(Time now, WriteBatch* batch);
  // FIFO with conservative backfill (scheduler/queue.h); adds the started jobs to `batch`.
  void ScheduleQueued(WriteBatch* batch);
  // ScheduleQueued and commit in the background (no caller waits).
  void ScheduleAndCommit();

  Store* store_;
  const Clock* clock_;
  Post post_;
  ControllerOptions options_;
  // Monitor and ledger of a job (health): created when an attempt starts and at recovery.
  void StartMonitor(JobEntry& e, Time started_at);
  CheckpointLedger& Ledger(JobEntry& e);
  void PersistTransitions(const std::vector<CheckpointTransition>& ts, WriteBatch* batch);
  // Records a finding (id, counters) and adds it to `batch`.
  void RecordFinding(Finding f, WriteBatch* batch);
  // Evaluates one job's monitor and forwards evidence; adds what changed to `batch`.
  void EvaluateJob(JobEntry& e, Time now, WriteBatch* batch);

  Json AssignmentsJson(const std::string& node) const;
  // Bumps the version of every node of `placement` and answers their waiters.
  void BumpAssignments(const Placement& placement);
  void BumpAssignments(const std::string& node);
  // Opens launch gates whose old ranks have stopped; expires long polls; declares silent agents lost.
  void CheckAgents(Time now, WriteBatch* batch);
  // What a finding means for the job: recovery (controller_recovery.cpp).
  void OnFinding(JobEntry& e, Finding& f, WriteBatch* batch);  // appends f.actions

  Cluster cluster_;
  std::map<std::string, JobEntry> jobs_;
  std::map<std::string, AgentState> agents_;
  std::map<std::string, int64_t> assignment_versions_;
  std::map<std::string, std::vector<Waiter>> waiters_;
  SdcHistory sdc_history_;
  std::vector<Finding> findings_;  // every finding, in detection order
  int64_t next_finding_seq_ = 1;
  std::map<std::string, uint64_t> finding_counts_;
  std::map<std::string, uint64_t> report_counts_;
  int64_t next_job_seq_ = 1;
  bool ready_ = false;
  bool storage_failed_ = false;
  std::function<void(const Status&)> on_storage_failure_;
};

}  // namespace shepherd
