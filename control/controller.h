// Controller: the façade of the control layer, the one header api/ includes. It owns the store handle and
// the owners of control-plane state, and runs each API call, report batch, agent heartbeat and tick as one
// operation over them; every read goes through view() (control/control_view.h), which it does not
// implement:
//   Inventory (nodes, allocations) · JobBook (jobs, attempts, queue) · JobHealth per job (monitor, ledger,
//   SDC replays) · RecoveryExecutor (findings → policy → actions, restart budgets) · AgentBoard (agents,
//   assignments, long polls, launch gates) · FindingLog (findings, ids, counters).
// Consequences that cross owners are wired here and only here: findings go FindingLog → RecoveryExecutor;
// attempt starts and ends and job ends that JobBook queued are settled (Settle, the one writer of a job's
// health lifecycle) into JobHealth, AgentBoard, RankTokens, RecoveryExecutor and SlurmOwner. Every mutating
// call runs as one Operation (control/operation.h): Begin opens it, and its steps reach those owners only
// through accessors (HealthOf, FindHealth, agents(), recovery(), slurm(), Schedule) that settle what is
// queued first; Commit settles the rest before the batch is persisted. No step calls Settle itself.
// Owners hold no callback into the façade: what one needs of another's state is passed with the call
// (RecoveryContext; the desired ranks AgentBoard::AnswerDue answers due long polls with), and what recovery
// decides for a job's health comes back as a value (HealthUpdate) that the façade applies.
//
// Threading: every non-const method runs on the one control thread (the constructing thread) and begins
// control_thread_.Assert() (checked in debug builds). Store completions arrive on the writer thread and are
// posted back through `post`, so callbacks (`Done`) also run on the control thread. The view() (ControlView)
// also runs on the daemon's reader thread; the daemon then holds its ControlLock shared, and exclusively
// around everything the control thread runs (control/control_lock.h), so reads must stay free of caches and
// other hidden writes. The state below is GUARDED_BY(kControl), checked by clang's thread-safety analysis.
// Durability: memory changes first, so reads may show a change whose COMMIT is pending; a change is
// acknowledged (Done with a value) only once durable. If a COMMIT fails the controller stops accepting
// writes (kUnavailable), reports not-ready and calls `on_storage_failure` so the daemon can exit.
// Values in and out are domain values (core/, health/report.h); api/ parses and renders JSON. The one
// exception is GetHealth, whose shape the health module builds (health/job_monitor_json.cpp).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "control/agent_board.h"
#include "control/callbacks.h"
#include "control/control_lock.h"
#include "control/control_view.h"
#include "control/event_log.h"
#include "control/finding_log.h"
#include "control/inventory.h"
#include "control/job_book.h"
#include "control/job_health.h"
#include "control/launch/slurm_owner.h"
#include "control/rank_tokens.h"
#include "control/recovery_executor.h"
#include "control/launch/slurm_owner.h"
#include "control/operation.h"
#include "core/agent_protocol.h"
#include "core/json.h"
#include "health/lateness.h"
#include "health/report.h"
#include "scheduler/placement.h"
#include "scheduler/rank_env.h"
#include "storage/store.h"

namespace shepherd {

struct ControllerOptions {
  TopologyLevels levels = DefaultTopologyLevels();
  double default_gpu_memory_gib = 80;  // GPU size for planning when the inventory is empty
  int min_spares_per_leaf = 0;         // reserve reported in GET /v1/nodes and metrics when not met
  int min_spares_per_spine = 0;
  double node_heartbeat_timeout_s = 10;  // an attached agent silent this long: its node is lost
  // Granted on every heartbeat answer: an agent that has no newer answer when it expires has stopped its
  // ranks; replacements of a lost node's ranks start only after it (docs/agent-protocol.md, "Lease").
  // 75 s: a control-plane outage of up to 60 s (a restart, an upgrade, a failover) stops no rank.
  double agent_lease_s = 75;
  // Replicated mode: a follower may renew a lease from a view up to this old (daemon/follower_lease.h), so
  // a lost node's replacements wait this much longer (control/agent_board.h). 0: one daemon (SQLite).
  double follower_renewal_s = 0;
  double stop_timeout_s = 30;  // longest wait for an old attempt's ranks to stop before a restart
  // How long a rank process the daemon has no record of is kept (health/unknown_processes.h); 0: until an
  // operator decides (POST /v1/nodes/{id}/unknown-processes/stop).
  double unknown_process_timeout_s = 600;
  std::string advertise_url;      // SHEPHERD_URL given to ranks (the daemon sets it once listening)
  int health_check_passes = 3;    // a node cordoned by a finding returns after this many passes in a row
  uint32_t master_port_salt = 0;  // varies MASTER_PORT between daemons (random per daemon start)
  // A gap between two control-thread operations, a tick lag or a queue age over this is the daemon's own
  // lateness (health/lateness.h): silence verdicts wait a full window after it. 0: gaps between
  // operations are not judged (unit tests whose fake clock jumps); the daemon sets it from its config.
  double late_after_s = 0;
  // policy.external_remediation = "hook": runs the site's command with the finding (never blocks).
  RemediationHook remediation_hook;
  // Job owner -> the Unix user its ranks run as, carried in each assignment (`run_as`); "*" for every other
  // owner. Empty: no user is named and agents run ranks as their default (--run-as).
  std::map<std::string, std::string> run_as;
  // The daemon syncs the inventory with Slurm (--slurm; control/launch/slurm_node_sync.h).
  bool slurm = false;
  // policy.external_remediation = "requeue": requeues the Slurm job (never blocks; null without --slurm).
  ExternalRequeue slurm_requeue;
  EventRetention event_retention;  // GET /v1/events (docs/events.md)
  FindingRetention finding_retention;  // findings_retention_days (docs/operations.md, "Retention")
};

struct NodeUpsert {
  NodeView node;
  bool created = false;
};
struct IngestSummary {
  int accepted = 0;  // includes ignored
  int ignored = 0;
  std::vector<ReportBatch::Rejected> rejected;
};
// One entry of a heartbeat's `reports` (docs/agent-protocol.md, "Relayed reports"): reports a rank on the
// heartbeating node wrote for its agent to relay, parsed as POST /v1/jobs/{id}/reports parses its body.
// Reports naming another rank or attempt than `rank` are already among `batch.rejected`.
struct RelayedReports {
  RankRef rank;
  ReportBatch batch;
};
struct RestartOutcome {
  int attempt = 0;
  JobState state = JobState::kQueued;
  std::optional<Checkpoint> checkpoint;
};

class Controller {
 public:
  Controller(Store* store, const Clock* clock, Post post, ControllerOptions options);
  ~Controller();

  // Loads every durable record and rebuilds memory (allocations of running jobs, the queue), then places
  // queued jobs, and persists the next epoch (assignment versions never go backwards; long polls are
  // answered 503 until that epoch is durable). A record that
  // cannot be decoded fails recovery naming its collection and key, unless `salvage`: then it is moved
  // aside (Store::Quarantine) and recovery goes on without it. REQUIRES: called once, before anything else.
  Status Recover(bool salvage = false);
  bool ready() const {
    control_thread_.AssertShared();
    return ready_ && !storage_failed_;
  }
  void set_on_storage_failure(std::function<void(const Status&)> f) {
    control_thread_.Assert();
    on_storage_failure_ = std::move(f);
  }
  void set_advertise_url(std::string url) {
    control_thread_.Assert();
    options_.advertise_url = std::move(url);
  }

  // ---- Nodes
  void UpsertNode(Node node, bool schedulable_given, Done<NodeUpsert> done);
  void PatchNode(const std::string& id, NodePatch patch, Done<NodeView> done);
  void DeleteNode(const std::string& id, Done<NodeView> done);
  // The operator's decision on the node's unknown processes: its agent stops them. kNotFound for no node.
  void StopUnknownProcesses(const std::string& id, Done<NodeView> done);

  // ---- Jobs
  // Admits a job whose plan fits GPU memory (queued or running). kInvalidContent when larger than the
  // usable inventory.
  void SubmitJob(JobSpec spec, PlanEstimate estimate, Done<JobView> done);
  // `by`: who asked (the job's reason becomes "cancelled by <by>").
  void CancelJob(const std::string& id, const std::string& by, Done<JobView> done);

  // ---- Agents (docs/agent-protocol.md)
  // Marks the node's agent attached and alive; rank exits and GPU faults become findings.
  // `relayed`: the heartbeat's relayed reports, each ingested as IngestReports would for its rank, only when
  // that rank is placed on `node` in its job's current attempt (others are ignored and counted); they are
  // ingested before the heartbeat's processes (a rank's last reports come before its exit) and a refused
  // one changes nothing of the heartbeat's own effect (lease, exits, faults).
  void NodeHeartbeat(const std::string& node, const AgentHeartbeat& heartbeat, Done<HeartbeatAck> done,
                     const std::vector<RelayedReports>& relayed = {});
  // `can_keep`: the agent honours the answer's `keep` (AgentBoard::Watch).
  void WatchAssignments(const std::string& node, int64_t known, Time deadline, bool can_keep,
                        Done<Assignments> done);
  // Answers every pending long poll (agents' and events') now (shutdown: in-flight requests must finish).
  void ReleaseWaiters();

  // ---- Events (control/event_log.h, docs/events.md): findings, actions, job and node state changes, each
  // stored in the batch of its change and readable once that batch is durable (ControlView::ReadEvents).
  // Waits until `deadline` (the tick expires it) for an event when none follows `after`.
  void WatchEvents(int64_t after, std::size_t limit, Time deadline, Done<EventPage> done);
  // Called on the control thread with each durable batch's events, in order (webhooks). Must not block.
  void set_on_events(std::function<void(const std::vector<Event>&)> f) {
    control_thread_.Assert();
    on_events_ = std::move(f);
  }

  // ---- Slurm (control/launch/slurm_owner.h keeps and decides it; the daemon's workers,
  // daemon/slurm_sync_worker.h and daemon/slurm_launch_worker.h, run Slurm's commands and report here)
  using SlurmWork = shepherd::SlurmWork;
  // Applies Slurm's view to the inventory; `done` gets the cycle's work.
  void SyncSlurm(const slurm::SlurmView& view, Done<SlurmWork> done);
  // What the launch worker is to do now (allocations, the current attempt's step, cancellations).
  // `started`: per job, the latest attempt the worker started a step for (its spec is then left out).
  SlurmOrders GetSlurmOrders(const std::map<std::string, int>& started = {}) const;
  // What a Slurm worker saw or did: the launch worker's events (stale ones, of an older attempt's step,
  // change nothing); a reconcile cycle's outcomes (drained_by_shepherd is updated and persisted; a job whose
  // watched Slurm job ended ends, and gives its slots back); what became of a requeue recovery asked for
  // (one that did not happen is written on its finding and its restart given back).
  using SlurmReport = std::variant<SlurmLaunchEvent, SlurmCycleResults, RequeueOutcome>;
  void OnSlurmReport(const SlurmReport& report);
  // POST /v1/jobs/{id}/slurm-order: whether a step's launch order is its attempt's current one
  // (SlurmOwner::OrderCurrent), decided now and answered once a fenced write made after it is durable (a
  // deposed leader's fails: kUnavailable). kNotFound: no such job.
  void CheckSlurmOrder(const std::string& job, const std::string& allocation, int attempt, int64_t order,
                       Done<bool> done);

  // ---- Recovery
  // POST /v1/jobs/{id}/restart; kConflict when no checkpoint qualifies. `by`: who asked, named in the
  // restart_requested finding's detail.
  void RestartJob(const std::string& id, const std::string& from,
                  const std::vector<std::string>& replace_nodes, const std::string& reason,
                  const std::string& by, Done<RestartOutcome> done);

  // ---- Health
  // A batch of rank reports: memory only, except what they reveal (checkpoint grades, urgent findings), which
  // is committed before `done`.
  void IngestReports(const std::string& job, const ReportBatch& batch, Done<IngestSummary> done);
  // Periodic: evaluates every job, agents' liveness and launch gates, due restarts, the queue.
  void Tick();
  // The daemon's own lateness, measured by the daemon's loop: the periodic tick fired `tick_lag` late, work
  // posted to the control thread waited `queue_age`, and the HTTP server answered `refused` requests 503
  // itself since the previous tick (an agent refused for its connection cap was not silent).
  void ObserveLateness(Duration tick_lag, Duration queue_age, uint64_t refused = 0);
  // ---- Reads: every query of the state above, for the API and the daemon's reader threads.
  const ControlView& view() const { return view_; }
  // For code that reads view() where the analysis sees no hold (the daemon's start-up, a follower's view
  // thread, which constructed its Controller): the caller may read control state, being this Controller's
  // control thread or holding a ControlReadHold. Checked in debug builds.
  void AssertReadable() const ASSERT_SHARED_CAPABILITY(kControl) { control_thread_.AssertShared(); }
  using JobRef = ControlView::JobRef;
  using JobMetrics = ControlView::JobMetrics;
  using GoodputRecords = ControlView::GoodputRecords;
  using FleetFacts = ControlView::FleetFacts;
  using StorageFacts = ControlView::StorageFacts;
  // Flight-recorder dumps a hang finding keeps: per rank of the hung attempt, and in all.
  static constexpr int kMaxDumpsPerRank = 4;
  static constexpr std::size_t kMaxDumpsPerFinding = 2048;

 private:
  // Usable nodes no live agent serves (never attached since the daemon started, or lost). O(nodes).
  std::set<std::string> UnservedNodes() const REQUIRES_SHARED(kControl);
  Status CheckWritable() const REQUIRES_SHARED(kControl);
  // Reads the clock for an operation that may judge silence, and tells Lateness the thread is running.
  Time Turn() REQUIRES(kControl) {
    Time now = clock_->Now();
    lateness_.OnTurn(now);
    return now;
  }
  // The events of the operation `batch` commits: the job states entered, new findings and their actions,
  // node state changes (against what the previous batches told).
  std::vector<Event> CollectEvents(const WriteBatch& batch, Time now) REQUIRES(kControl);
  // What CollectEvents compares with: every node's state and every finding's actions as of the last
  // batch (from the restored records at start-up).
  void BaselineEvents() REQUIRES(kControl);
  // The open operation's scope (control/operation.h): closes it when the call returns, committing what
  // it holds unless the call committed it.
  class [[nodiscard]] OpScope {
   public:
    OpScope(Controller* c, uint64_t seq) : c_(c), seq_(seq) {}
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;
    ~OpScope() NO_THREAD_SAFETY_ANALYSIS { c_->Close(seq_); }  // made by Begin, on the control thread
    Operation& operator*() const NO_THREAD_SAFETY_ANALYSIS { return *c_->op_; }
    Operation* operator->() const NO_THREAD_SAFETY_ANALYSIS { return &*c_->op_; }

   private:
    Controller* c_;
    uint64_t seq_;
  };
  // Opens the operation of one mutating call at `now`. One still open (a refused call's `done` that called
  // in again before its scope ended) is closed first.
  OpScope Begin(Time now) REQUIRES(kControl);
  // Settles the open operation, then persists its batch and closes it; `done` runs on the control thread
  // after COMMIT.
  void Commit(std::function<void(Status)> done) REQUIRES(kControl);
  template <typename T>
  void CommitThen(Done<T> done, std::function<T()> answer) REQUIRES(kControl);
  // OpScope's end: settles and commits what operation `seq` left open, if it is still the open one.
  void Close(uint64_t seq) REQUIRES(kControl);
  void OnStorageFailure(const Status& s) REQUIRES(kControl);

  // Carries attempt starts and ends queued by JobBook into JobHealth, AgentBoard, RankTokens,
  // RecoveryExecutor and SlurmOwner (the one writer of a job's health lifecycle). Run by Sync and Commit
  // only.
  void Settle(Time now, WriteBatch* batch) REQUIRES(kControl);
  // Settles the open operation when JobBook has queued attempt events (nothing outside an operation).
  void Sync() REQUIRES(kControl);
  // The owners Settle writes, as an operation's steps reach them: settled first (Sync).
  JobHealth& HealthOf(const std::string& job) REQUIRES(kControl);
  JobHealth* FindHealth(const std::string& job) REQUIRES(kControl);
  std::map<std::string, std::unique_ptr<JobHealth>>& healths() REQUIRES(kControl) {
    Sync();
    return health_;
  }
  AgentBoard& agents() REQUIRES(kControl) {
    Sync();
    return agents_;
  }
  RecoveryExecutor& recovery() REQUIRES(kControl) {
    Sync();
    return recovery_;
  }
  SlurmOwner& slurm() REQUIRES(kControl) {
    Sync();
    return slurm_;
  }
  // The job's health without settling: for Settle itself, start-up, and choosers called from inside an
  // owner's own pass (JobBook::Schedule, RecoveryExecutor::StartQueuedOnSpares), which Sync ran before.
  JobHealth& HealthSlot(const std::string& job) REQUIRES(kControl);
  // Records a finding: id, recovery (its actions), the log, the batch.
  void RecordFinding(Finding f, Time now, WriteBatch* batch) REQUIRES(kControl);
  // What recovery needs of `job` from the other owners (its Slurm allocation, its launcher's nodes, the
  // agents for the exit hold), handed to RecoveryExecutor with each finding.
  RecoveryContext RecoveryContextOf(const Job& job) const REQUIRES_SHARED(kControl);
  // The recovery part of RecordFinding (also for a held finding whose hold is over: may_hold false).
  void RunRecovery(Finding& f, Time now, WriteBatch* batch, bool may_hold) REQUIRES(kControl);
  // Held restarts whose hold is over (scheduler/exit_hold.h): decided now, or dropped, and persisted.
  void ReleaseHolds(Time now, WriteBatch* batch) REQUIRES(kControl);
  // Adds the process's flight-recorder dumps (new paths, or new sizes) to the latest hang finding of its
  // job and attempt, if there is one, within kMaxDumpsPerRank and kMaxDumpsPerFinding; what does not fit is
  // counted as ignored. REQUIRES: the rank is placed on the heartbeating node (PlacedOn).
  void AttachFlightRecorder(const ProcessStatus& p, WriteBatch* batch) REQUIRES(kControl);
  void EvaluateJob(const std::string& job, Time now, WriteBatch* batch) REQUIRES(kControl);
  void PersistTransitions(const std::vector<CheckpointTransition>& ts, WriteBatch* batch) REQUIRES(kControl);
  // Agent liveness (node_lost findings), launch gates and long-poll deadlines.
  void CheckAgents(Time now, WriteBatch* batch) REQUIRES(kControl);
  // Running attempts' goodput marks into their records, each at most once per kMarksPersistEvery_s (the
  // in-memory attempt is kept current per report batch; the record is rewritten at the attempt's end).
  void PersistMarks(Time now, WriteBatch* batch) REQUIRES(kControl);
  // Erases resolved findings older than the retention (control/finding_log.h, FindingRetention).
  void PruneFindings(Time now, WriteBatch* batch) REQUIRES(kControl);
  static constexpr double kMarksPersistEvery_s = 60;
  // The job of `rank` when it is of the job's current, active attempt and placed on `node`; else null.
  const JobEntry* CurrentRankOn(const std::string& node, const RankRef& rank) const REQUIRES_SHARED(kControl);
  // Whether `rank` is placed on `node` in its attempt, that attempt being its job's current one or the one
  // before (whose ranks may still be stopping): what an agent may speak for.
  bool PlacedOn(const std::string& node, const RankRef& rank) const REQUIRES_SHARED(kControl);
  void OnRankExit(const std::string& node, const ProcessStatus& p, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // A job another launcher starts: a report of a higher attempt begins that attempt.
  void FollowExternalAttempt(const std::string& job, const ReportBatch& reports, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // IngestReports' work, into `batch` (the caller commits): the POST route and relayed reports alike.
  Result<IngestSummary> IngestInto(const std::string& job, const ReportBatch& reports, Time now,
                                   WriteBatch* batch) REQUIRES(kControl);
  // Places queued jobs (settled first).
  void Schedule(Time now, WriteBatch* batch) REQUIRES(kControl);
  // The attempt's ranks are known to have started: launching → running.
  void MarkLaunched(const std::string& job, Time now, WriteBatch* batch) REQUIRES(kControl);
  // Launching attempts whose agents did not start them in policy.launch_timeout_s: re-placed onto nodes
  // with live agents when they fit there, else left waiting with the reason.
  void CheckLaunches(Time now, WriteBatch* batch) REQUIRES(kControl);
  // Places `id`'s next attempt off `exclude` (its own GPUs counted free), ends the current attempt and
  // starts the new one with `reason`, resuming where the current one would have. Otherwise the placement's
  // error, and nothing changed.
  Status PlaceAgain(const std::string& id, const std::set<std::string>& exclude, const std::string& reason,
                    Time now, WriteBatch* batch) REQUIRES(kControl);
  // Ends a job that has not ended (cancelled, or its watched Slurm job ended): its attempt, backoff, launch
  // gate, rank tokens, health and Slurm allocation. kNotFound, kConflict (already ended) as JobBook::End.
  Status EndJob(const std::string& id, JobState state, const std::string& reason, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // The rendezvous and resume inputs of ComposeRankEnv for `e`'s current attempt on `node`.
  RankEnvInput RankEnvFor(const JobEntry& e, const std::string& node) const REQUIRES_SHARED(kControl);
  // The environment of each of `e`'s ranks on `node`, each with its own rank token (SHEPHERD_TOKEN):
  // shared by the agents' assignments and the Slurm steps.
  std::vector<LocalRankEnv> RankEnvsOn(const JobEntry& e, const std::string& node) const
      REQUIRES_SHARED(kControl);
  // IndexPlacementNodes of `e`'s current attempt, kept until the attempt (or its placement) changes.
  std::shared_ptr<const PlacementNodes> NodeIndexOf(const JobEntry& e) const REQUIRES_SHARED(kControl);
  // Carries out the Slurm owner's effects in order (controller_slurm.cpp). `ended`: set when a job ended.
  void ApplySlurm(const std::vector<SlurmEffect>& effects, Time now, WriteBatch* batch, bool* ended = nullptr)
      REQUIRES(kControl);
  // Answers the long polls AgentBoard made due with each node's DesiredRanks. Run after every call that
  // may make one due (Settle, a durable batch, a heartbeat, the tick, a watch, a release).
  void AnswerWaiters() REQUIRES(kControl);
  // What the node's agent must run (AgentBoard::AnswerDue).
  std::vector<RankAssignment> DesiredRanks(const std::string& node) const REQUIRES_SHARED(kControl);

  // Set at construction and never changed. Everything else but the node index and the rank tokens (each
  // behind its own mutex) is control state, GUARDED_BY(kControl).
  ControlThread control_thread_;  // the constructing thread: each method asserts it (or a shared hold)
  Store* store_;
  const Clock* clock_;
  Post post_;
  ControllerOptions options_ GUARDED_BY(kControl);
  Inventory inventory_ GUARDED_BY(kControl);
  JobBook jobs_ GUARDED_BY(kControl);
  std::map<std::string, std::unique_ptr<JobHealth>> health_ GUARDED_BY(kControl);
  RecoveryExecutor recovery_ GUARDED_BY(kControl);
  AgentBoard agents_ GUARDED_BY(kControl);
  FindingLog findings_ GUARDED_BY(kControl);
  Time next_findings_prune_ GUARDED_BY(kControl){};  // the next retention pass
  EventLog events_ GUARDED_BY(kControl);
  std::map<std::string, NodeState> event_node_state_ GUARDED_BY(kControl);
  std::map<std::string, std::size_t> event_finding_actions_
      GUARDED_BY(kControl);  // finding id -> actions already told
  // Findings recorded since the last Commit: (size of the batch when recording began, id).
  std::vector<std::pair<std::size_t, std::string>> finding_order_ GUARDED_BY(kControl);
  std::function<void(const std::vector<Event>&)> on_events_ GUARDED_BY(kControl);
  RankTokens rank_tokens_;
  Lateness lateness_ GUARDED_BY(kControl);
  SlurmOwner slurm_ GUARDED_BY(kControl);  // after inventory_, jobs_ and findings_, which it is given
  std::optional<Operation> op_ GUARDED_BY(kControl);  // the open operation (Begin, Commit)
  uint64_t op_seq_ GUARDED_BY(kControl) = 0;          // Begin's count: which scope op_ belongs to
  bool settling_ GUARDED_BY(kControl) = false;        // inside Settle: Sync does nothing
  std::map<std::string, uint64_t> report_counts_ GUARDED_BY(kControl);
  uint64_t reports_ignored_[kIgnoredReasons] GUARDED_BY(kControl) = {};
  // Heartbeat entries ignored, by what: "process" (a rank not placed on the heartbeating node, or named
  // twice in one heartbeat), "flight_recorder" (dumps of such processes, or beyond the caps).
  std::map<std::string, uint64_t> heartbeat_ignored_ GUARDED_BY(kControl);
  // The paths of the latest hang finding's dumps per job (AttachFlightRecorder), so a dump is found by its
  // path in log time; rebuilt from the finding when another finding becomes the latest.
  struct DumpIndex {
    std::string finding;
    std::map<std::string, std::size_t, std::less<>> by_path;  // -> index in the finding's flight_recorder
    std::map<int, int> per_rank;                              // dumps added per rank
  };
  std::map<std::string, DumpIndex> dump_index_ GUARDED_BY(kControl);
  // Restarts by job and cause since the daemon started (VisitJobMetrics): the finding kind that led
  // recovery to restart or re-queue the job, "operator" for POST /v1/jobs/{id}/restart, "launch_timeout"
  // for a launch re-placed onto live agents.
  std::map<std::string, std::map<std::string, uint64_t>> restart_causes_ GUARDED_BY(kControl);
  // Attempts started since the last Commit took them: once their batch is durable their ranks reach agents
  // (AgentBoard::HoldUntilSaved) and their Slurm steps may start (SlurmOwner::Saved).
  std::vector<std::pair<std::string, int>> unsaved_starts_ GUARDED_BY(kControl);
  std::map<std::string, Time> launch_checked_at_
      GUARDED_BY(kControl);  // CheckLaunches: last look at a stuck launch, per job
  bool ready_ GUARDED_BY(kControl) = false;
  // Recover's epoch record is durable: no assignments version of this epoch is handed out before, or a
  // crash right after start-up would let the next start use the same epoch again (versions repeating, or
  // going backwards against what an agent already holds).
  bool epoch_saved_ GUARDED_BY(kControl) = false;
  bool storage_failed_ GUARDED_BY(kControl) = false;
  std::deque<Time> writes_started_
      GUARDED_BY(kControl);  // per batch handed to the store and not answered, oldest first
  std::function<void(const Status&)> on_storage_failure_ GUARDED_BY(kControl);
  // NodeIndexOf's cache, by job id: the attempt and placement it was built from. Its own mutex: const
  // readers (the agents' long polls) may run on several threads under the shared control lock.
  struct NodeIndexEntry {
    int attempt = 0;
    const RankSlot* data = nullptr;
    size_t size = 0;
    std::shared_ptr<const PlacementNodes> nodes;
  };
  mutable std::mutex node_index_mu_;
  mutable std::map<std::string, NodeIndexEntry> node_index_;
  ControlView view_;  // last: it reads the members above
};

template <typename T>
void Controller::CommitThen(Done<T> done, std::function<T()> answer) {
  Commit([done = std::move(done), answer = std::move(answer)](Status s) {
    if (!s.ok()) return done(s);
    done(answer());
  });
}

}  // namespace shepherd
