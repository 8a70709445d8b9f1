// Controller: the façade of the control layer, the one header api/ includes. It owns the store handle and
// the owners of control-plane state, and runs each API call, report batch, agent heartbeat and tick as one
// operation over them:
//   Inventory (nodes, allocations) · JobBook (jobs, attempts, queue) · JobHealth per job (monitor, ledger,
//   SDC replays) · RecoveryExecutor (findings → policy → actions, restart budgets) · AgentBoard (agents,
//   assignments, long polls, launch gates) · FindingLog (findings, ids, counters).
// Consequences that cross owners are wired here and only here: findings go FindingLog → RecoveryExecutor;
// attempt starts and ends that JobBook queued are settled (Settle) into JobHealth and AgentBoard before the
// operation commits.
//
// Threading: every non-const method runs on the one control thread. Store completions arrive on the writer
// thread and are posted back through `post`, so callbacks (`Done`) also run on the control thread. The
// const methods (views, lists, health, failures) also run on the daemon's reader thread; the daemon then
// holds its ControlLock shared, and exclusively around everything the control thread runs
// (control/control_lock.h), so const methods must stay free of caches and other hidden writes.
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
#include "control/event_log.h"
#include "control/finding_log.h"
#include "control/inventory.h"
#include "control/job_book.h"
#include "control/job_health.h"
#include "control/rank_tokens.h"
#include "control/recovery_executor.h"
#include "control/launch/slurm_owner.h"
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
// A launching attempt: which nodes have not started its ranks, and which of those have no live agent.
struct LaunchView {
  std::vector<std::string> nodes_waiting;
  std::vector<std::string> nodes_without_agent;
  Time since{};
};
struct JobView : JobEntry {
  std::optional<LaunchView> launch;  // while launching, for jobs our agents launch
  // Only in SubmitJob's answer for a job another launcher starts: the credential its ranks report with.
  std::optional<std::string> rank_token;
  // launcher "slurm": the job's allocation (its nodes beyond the placement are its hot spares).
  std::optional<SlurmAllocationRecord> slurm_allocation;
};
struct PlacementView {
  int attempt = 0;
  JobState state = JobState::kQueued;
  std::optional<PlacementQuality> quality;  // while the job holds its GPUs
  const Placement* placement = nullptr;     // valid until the next operation on the control thread
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
struct CheckpointList {
  std::vector<Checkpoint> checkpoints;
  std::optional<std::string> last_known_good;
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
  bool ready() const { return ready_ && !storage_failed_; }
  void set_on_storage_failure(std::function<void(const Status&)> f) { on_storage_failure_ = std::move(f); }
  void set_advertise_url(std::string url) { options_.advertise_url = std::move(url); }

  // ---- Nodes
  void UpsertNode(Node node, bool schedulable_given, Done<NodeUpsert> done);
  void PatchNode(const std::string& id, NodePatch patch, Done<NodeView> done);
  void DeleteNode(const std::string& id, Done<NodeView> done);
  // Views carry what the agent board knows now: the node's unknown processes, and agent_attached as the
  // agent's liveness (heard within node_heartbeat_timeout_s), not whether one ever attached.
  Result<NodeView> GetNode(const std::string& id) const;
  NodeList ListNodes(const NodeFilter& filter) const;
  // The operator's decision on the node's unknown processes: its agent stops them. kNotFound for no node.
  void StopUnknownProcesses(const std::string& id, Done<NodeView> done);
  std::vector<SpareDeficit> SpareDeficits() const { return inventory_.SpareDeficits(); }
  const TopologyLevels& levels() const { return inventory_.cluster().levels(); }
  std::size_t node_count() const { return static_cast<std::size_t>(inventory_.cluster().size()); }
  int64_t free_usable_gpus() const { return inventory_.cluster().FreeUsableGpus(); }

  // ---- Planning and jobs
  Result<PlanEstimate> PlanFor(const JobSpec& spec) const { return jobs_.PlanFor(spec); }
  // What PlanFor plans on: the job's GPU profile and this inventory's GPU memory and NVLink domains.
  Hardware HardwareFor(const JobSpec& spec) const { return jobs_.HardwareFor(spec); }
  // Admits a job whose plan fits GPU memory (queued or running). kInvalidContent when larger than the
  // usable inventory.
  void SubmitJob(JobSpec spec, PlanEstimate estimate, Done<JobView> done);
  // `by`: who asked (the job's reason becomes "cancelled by <by>").
  void CancelJob(const std::string& id, const std::string& by, Done<JobView> done);
  Result<JobView> GetJob(const std::string& id) const;
  // The job with this spec.external_id that has not ended (an index lookup, cheap enough for every report
  // batch); nullopt when none.
  struct JobRef {
    std::string id;
    std::string owner;
  };
  std::optional<JobRef> FindExternalJob(const std::string& external_id) const {
    const JobEntry* e = jobs_.FindExternal(external_id);
    return e ? std::optional<JobRef>(JobRef{e->job.id, e->job.spec.owner}) : std::nullopt;
  }
  // Why `batch` must not create a job for this external id: the newest job with it has ended (cancelled
  // here, or as its launcher said) and the batch is of that job's attempt or an earlier one, so its ranks
  // are that job's (a job that ended queued, attempt 0, had its first run to come: attempt 1 is it). Only a
  // later attempt (the launcher requeued the job) starts another. nullopt: creation may go on.
  std::optional<std::string> EndedExternalRun(const std::string& external_id, const ReportBatch& batch) const;
  // Who submitted the job (its spec's owner; "" before auth); nullopt when there is no such job.
  std::optional<std::string> JobOwner(const std::string& id) const {
    const JobEntry* e = jobs_.Find(id);
    return e ? std::optional<std::string>(e->job.spec.owner) : std::nullopt;
  }
  // Jobs in id order after `after` (exclusive; "" from the start), at most `limit`; `*more` tells whether
  // more matching jobs follow. Costs O(log jobs + the jobs it steps over) when no state is given; with
  // `external_id`, only the jobs with that spec.external_id are visited (an index).
  std::vector<JobView> ListJobs(std::optional<JobState> state, const std::string& after = "",
                                std::size_t limit = SIZE_MAX, bool* more = nullptr,
                                const std::optional<std::string>& external_id = std::nullopt) const;
  // Jobs of this owner (spec.owner) that have not ended: the per-submitter quota.
  int ActiveJobsOf(const std::string& owner) const;
  Result<PlacementView> GetPlacement(const std::string& id) const;

  // The live rank credentials (the daemon's authenticator looks tokens up here, from any thread).
  const RankTokens& rank_tokens() const { return rank_tokens_; }

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
  void ReleaseWaiters() {
    agents_.ReleaseWaiters();
    events_.ReleaseAll();
  }

  // ---- Events (control/event_log.h, docs/events.md): findings, actions, job and node state changes, each
  // stored in the batch of its change and readable once that batch is durable.
  Result<EventPage> ReadEvents(int64_t after, std::size_t limit) const { return events_.Read(after, limit); }
  // As ReadEvents, but waits until `deadline` (the tick expires it) for an event when none follows `after`.
  void WatchEvents(int64_t after, std::size_t limit, Time deadline, Done<EventPage> done) {
    events_.Wait(after, limit, deadline, std::move(done));
  }
  // Called on the control thread with each durable batch's events, in order (webhooks). Must not block.
  void set_on_events(std::function<void(const std::vector<Event>&)> f) { on_events_ = std::move(f); }

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
  Result<Json> GetHealth(const std::string& id) const;
  // GET /v1/jobs/{id}/steps: the running attempt's last `limit` final steps, oldest first
  // (health/step_history.h); an empty list when no attempt is watched.
  Result<Json> GetSteps(const std::string& id, size_t limit) const;
  Result<CheckpointList> GetCheckpoints(const std::string& id) const;
  // kNotFound when q.job names no job.
  Result<std::vector<Finding>> GetFailures(const FindingQuery& q, bool* more = nullptr) const;
  // The daemon's own lateness, measured by the daemon's loop: the periodic tick fired `tick_lag` late, work
  // posted to the control thread waited `queue_age`, and the HTTP server answered `refused` requests 503
  // itself since the previous tick (an agent refused for its connection cap was not silent).
  void ObserveLateness(Duration tick_lag, Duration queue_age, uint64_t refused = 0) {
    Time now = clock_->Now();
    lateness_.OnTickLag(tick_lag, now);
    lateness_.OnQueueAge(queue_age, now);
    lateness_.OnRefusals(refused, now);
  }
  Lateness::Facts lateness() const { return lateness_.facts(clock_->Now()); }
  // Counters for /metrics.
  const std::map<FindingKind, uint64_t>& finding_counts() const { return findings_.counts(); }
  const std::map<std::string, uint64_t>& report_counts() const { return report_counts_; }
  const std::map<std::string, uint64_t>& heartbeat_ignored() const { return heartbeat_ignored_; }
  // Reports accepted but ignored for a reason (shepherd_reports_ignored_total), indexed by IgnoredReason.
  uint64_t reports_ignored(IgnoredReason why) const { return reports_ignored_[static_cast<int>(why)]; }
  // ---- Metrics (/metrics, docs/api.md): per-job facts and fleet counts, for the reader thread.
  struct JobMetrics {
    const Job* job = nullptr;  // valid only during the visit
    int64_t last_step = -1;    // JobHealth::LatestStep; -1: none
    double step_time_s = 0;    // JobHealth::StepTimeSeconds; 0: none
    // Restarts this daemon made since it started, by cause (RestartCause); null when none.
    const std::map<std::string, uint64_t>* restarts = nullptr;
  };
  // Calls `visit` for every job that has not ended and every job that ended (updated_at) at or after
  // `ended_since`, in id order. O(jobs): visits no placement and copies nothing.
  void VisitJobMetrics(Time ended_since, const std::function<void(const JobMetrics&)>& visit) const;
  // ---- Goodput (goodput/accounting.h): a job's records as accounting reads them.
  struct GoodputRecords {
    const Job* job = nullptr;              // valid only during the visit
    std::vector<Attempt> attempts;         // oldest first, without their placements' ranks
    std::vector<AttemptSize> sizes;        // per attempt: what its placement held
    std::vector<Checkpoint> checkpoints;   // the job's (empty unless asked for)
    std::vector<Finding> findings;         // those the attempts' ended_by name, and their incidents' roots
    GoodputInput Input(Time now) const {
      return {.job = *job, .attempts = attempts, .checkpoints = checkpoints, .findings = findings,
              .now = now, .sizes = sizes};
    }
  };
  // kNotFound for no job. O(the job's attempts and checkpoints, log of its findings).
  Result<GoodputRecords> GetGoodputRecords(const std::string& id) const;
  // Calls `visit` for every job that has not ended and every job that ended (updated_at) at or after
  // `ended_since`, in id order, one job at a time (one set of buffers, reused): O(jobs and their attempts),
  // and their checkpoints when `with_checkpoints`.
  void VisitGoodputRecords(Time ended_since, bool with_checkpoints,
                           const std::function<void(const GoodputRecords&)>& visit) const;
  struct FleetFacts {
    std::map<NodeState, int> by_state;  // nodes by state (no zero entries)
    int spare_nodes = 0;                // nodes held aside as spares, whatever their state
  };
  // O(nodes).
  FleetFacts Fleet() const;
  // Flight-recorder dumps a hang finding keeps: per rank of the hung attempt, and in all.
  static constexpr int kMaxDumpsPerRank = 4;
  static constexpr std::size_t kMaxDumpsPerFinding = 2048;
  // The store as the control thread sees it: batches handed to it and not answered yet, how long the oldest
  // has waited (a stall: another connection's lock, a slow disk), and whether it failed.
  struct StorageFacts {
    size_t writes_in_flight = 0;
    double oldest_write_s = 0;
    bool failed = false;
  };
  StorageFacts storage() const {
    return {writes_started_.size(),
            writes_started_.empty() ? 0 : ToSeconds(clock_->Now() - writes_started_.front()),
            storage_failed_};
  }

 private:
  // A node's view with the agent board's state (GetNode).
  NodeView WithAgent(NodeView v) const;
  // Usable nodes no live agent serves (never attached since the daemon started, or lost). O(nodes).
  std::set<std::string> UnservedNodes() const;
  Status CheckWritable() const;
  // Reads the clock for an operation that may judge silence, and tells Lateness the thread is running.
  Time Turn() {
    Time now = clock_->Now();
    lateness_.OnTurn(now);
    return now;
  }
  // The events of the operation `batch` commits: the job states entered, new findings and their actions,
  // node state changes (against what the previous batches told).
  std::vector<Event> CollectEvents(const WriteBatch& batch, Time now);
  // What CollectEvents compares with: every node's state and every finding's actions as of the last
  // batch (from the restored records at start-up).
  void BaselineEvents();
  // Settles, then persists `batch`; `done` runs on the control thread after COMMIT.
  void Commit(WriteBatch batch, std::function<void(Status)> done);
  template <typename T>
  void CommitThen(WriteBatch batch, Done<T> done, std::function<T()> answer);
  void OnStorageFailure(const Status& s);

  // Carries attempt starts and ends queued by JobBook into JobHealth, AgentBoard and RankTokens.
  void Settle(Time now, WriteBatch* batch);
  JobHealth& HealthOf(const std::string& job);
  // Records a finding: id, recovery (its actions), the log, the batch.
  void RecordFinding(Finding f, Time now, WriteBatch* batch);
  // The recovery part of RecordFinding (also for a held finding whose hold is over: may_hold false).
  void RunRecovery(Finding& f, Time now, WriteBatch* batch, bool may_hold);
  // Held restarts whose hold is over (scheduler/exit_hold.h): decided now, or dropped, and persisted.
  void ReleaseHolds(Time now, WriteBatch* batch);
  // Adds the process's flight-recorder dumps (new paths, or new sizes) to the latest hang finding of its
  // job and attempt, if there is one, within kMaxDumpsPerRank and kMaxDumpsPerFinding; what does not fit is
  // counted as ignored. REQUIRES: the rank is placed on the heartbeating node (PlacedOn).
  void AttachFlightRecorder(const ProcessStatus& p, WriteBatch* batch);
  void EvaluateJob(const std::string& job, Time now, WriteBatch* batch);
  void PersistTransitions(const std::vector<CheckpointTransition>& ts, WriteBatch* batch);
  // Agent liveness (node_lost findings), launch gates and long-poll deadlines.
  void CheckAgents(Time now, WriteBatch* batch);
  // Running attempts' goodput marks into their records, each at most once per kMarksPersistEvery_s (the
  // in-memory attempt is kept current per report batch; the record is rewritten at the attempt's end).
  void PersistMarks(Time now, WriteBatch* batch);
  // Erases resolved findings older than the retention (control/finding_log.h, FindingRetention).
  void PruneFindings(Time now, WriteBatch* batch);
  static constexpr double kMarksPersistEvery_s = 60;
  // The job of `rank` when it is of the job's current, active attempt and placed on `node`; else null.
  const JobEntry* CurrentRankOn(const std::string& node, const RankRef& rank) const;
  // Whether `rank` is placed on `node` in its attempt, that attempt being its job's current one or the one
  // before (whose ranks may still be stopping): what an agent may speak for.
  bool PlacedOn(const std::string& node, const RankRef& rank) const;
  void OnRankExit(const std::string& node, const ProcessStatus& p, Time now, WriteBatch* batch);
  // A job another launcher starts: a report of a higher attempt begins that attempt.
  void FollowExternalAttempt(const std::string& job, const ReportBatch& reports, Time now, WriteBatch* batch);
  // IngestReports' work, into `batch` (the caller commits): the POST route and relayed reports alike.
  Result<IngestSummary> IngestInto(const std::string& job, const ReportBatch& reports, Time now,
                                   WriteBatch* batch);
  // Places queued jobs.
  void Schedule(Time now, WriteBatch* batch);
  // The attempt's ranks are known to have started: launching → running.
  void MarkLaunched(const std::string& job, Time now, WriteBatch* batch);
  // Launching attempts whose agents did not start them in policy.launch_timeout_s: re-placed onto nodes
  // with live agents when they fit there, else left waiting with the reason.
  void CheckLaunches(Time now, WriteBatch* batch);
  // Places `id`'s next attempt off `exclude` (its own GPUs counted free), ends the current attempt and
  // starts the new one with `reason`, resuming where the current one would have. Otherwise the placement's
  // error, and nothing changed.
  Status PlaceAgain(const std::string& id, const std::set<std::string>& exclude, const std::string& reason,
                    Time now, WriteBatch* batch);
  JobView ViewOf(const JobEntry& e) const;
  // Ends a job that has not ended (cancelled, or its watched Slurm job ended): its attempt, backoff, launch
  // gate, rank tokens, health and Slurm allocation. kNotFound, kConflict (already ended) as JobBook::End.
  Status EndJob(const std::string& id, JobState state, const std::string& reason, Time now,
                WriteBatch* batch);
  // The rendezvous and resume inputs of ComposeRankEnv for `e`'s current attempt on `node`.
  RankEnvInput RankEnvFor(const JobEntry& e, const std::string& node) const;
  // The environment of each of `e`'s ranks on `node`, each with its own rank token (SHEPHERD_TOKEN):
  // shared by the agents' assignments and the Slurm steps.
  std::vector<LocalRankEnv> RankEnvsOn(const JobEntry& e, const std::string& node) const;
  // IndexPlacementNodes of `e`'s current attempt, kept until the attempt (or its placement) changes.
  std::shared_ptr<const PlacementNodes> NodeIndexOf(const JobEntry& e) const;
  // Carries out the Slurm owner's effects in order (controller_slurm.cpp). `ended`: set when a job ended.
  void ApplySlurm(const std::vector<SlurmEffect>& effects, Time now, WriteBatch* batch,
                  bool* ended = nullptr);
  // What the node's agent must run (AgentBoard's source).
  std::vector<RankAssignment> DesiredRanks(const std::string& node) const;

  Store* store_;
  const Clock* clock_;
  Post post_;
  ControllerOptions options_;
  Inventory inventory_;
  JobBook jobs_;
  std::map<std::string, std::unique_ptr<JobHealth>> health_;
  RecoveryExecutor recovery_;
  AgentBoard agents_;
  FindingLog findings_;
  Time next_findings_prune_{};  // the next retention pass
  EventLog events_;
  std::map<std::string, NodeState> event_node_state_;
  std::map<std::string, std::size_t> event_finding_actions_;  // finding id -> actions already told
  // Findings recorded since the last Commit: (size of the batch when recording began, id).
  std::vector<std::pair<std::size_t, std::string>> finding_order_;
  std::function<void(const std::vector<Event>&)> on_events_;
  RankTokens rank_tokens_;
  Lateness lateness_;
  SlurmOwner slurm_;  // after inventory_, jobs_ and findings_, which it is given
  std::map<std::string, uint64_t> report_counts_;
  uint64_t reports_ignored_[kIgnoredReasons] = {};
  // Heartbeat entries ignored, by what: "process" (a rank not placed on the heartbeating node, or named
  // twice in one heartbeat), "flight_recorder" (dumps of such processes, or beyond the caps).
  std::map<std::string, uint64_t> heartbeat_ignored_;
  // The paths of the latest hang finding's dumps per job (AttachFlightRecorder), so a dump is found by its
  // path in log time; rebuilt from the finding when another finding becomes the latest.
  struct DumpIndex {
    std::string finding;
    std::map<std::string, std::size_t, std::less<>> by_path;  // -> index in the finding's flight_recorder
    std::map<int, int> per_rank;                              // dumps added per rank
  };
  std::map<std::string, DumpIndex> dump_index_;
  // Restarts by job and cause since the daemon started (VisitJobMetrics): the finding kind that led
  // recovery to restart or re-queue the job, "operator" for POST /v1/jobs/{id}/restart, "launch_timeout"
  // for a launch re-placed onto live agents.
  std::map<std::string, std::map<std::string, uint64_t>> restart_causes_;
  // Attempts started since the last Commit took them: once their batch is durable their ranks reach agents
  // (AgentBoard::HoldUntilSaved) and their Slurm steps may start (SlurmOwner::Saved).
  std::vector<std::pair<std::string, int>> unsaved_starts_;
  std::map<std::string, Time> launch_checked_at_;  // CheckLaunches: last look at a stuck launch, per job
  bool ready_ = false;
  // Recover's epoch record is durable: no assignments version of this epoch is handed out before, or a
  // crash right after start-up would let the next start use the same epoch again (versions repeating, or
  // going backwards against what an agent already holds).
  bool epoch_saved_ = false;
  bool storage_failed_ = false;
  std::deque<Time> writes_started_;  // per batch handed to the store and not answered, oldest first
  std::function<void(const Status&)> on_storage_failure_;
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
};

template <typename T>
void Controller::CommitThen(WriteBatch batch, Done<T> done, std::function<T()> answer) {
  Commit(std::move(batch), [done = std::move(done), answer = std::move(answer)](Status s) {
    if (!s.ok()) return done(s);
    done(answer());
  });
}

}  // namespace shepherd
