// ControlView: every read of control-plane state the API and the daemon make, in one query object
// (Controller::view()). It owns nothing: it holds const pointers to the owners the Controller holds
// (Inventory, JobBook, the JobHealth per job, AgentBoard, FindingLog, EventLog, RankTokens, SlurmOwner,
// Lateness) and to the façade's counters, and composes their state into the domain values api/ renders
// (JobView, NodeView, PlacementView, ...). It never writes: every method is const, free of caches and other
// hidden writes.
// Threading: it runs on the control thread and on the daemon's reader threads; the daemon holds its
// ControlLock shared around the readers and exclusively around everything the control thread runs
// (control/control_lock.h): its reads are REQUIRES_SHARED(kControl). Pointers and views it returns are
// valid until the next operation on the control thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/agent_board.h"
#include "control/control_lock.h"
#include "control/event_log.h"
#include "control/finding_log.h"
#include "control/inventory.h"
#include "control/job_book.h"
#include "control/job_health.h"
#include "control/launch/slurm_owner.h"
#include "control/rank_tokens.h"
#include "core/json.h"
#include "core/time.h"
#include "goodput/accounting.h"
#include "health/lateness.h"
#include "health/report.h"
#include "scheduler/placement.h"

namespace shepherd {

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
struct CheckpointList {
  std::vector<Checkpoint> checkpoints;
  std::optional<std::string> last_known_good;
};
using JobHealthMap = std::map<std::string, std::unique_ptr<JobHealth>>;

class ControlView {
 public:
  // What the view reads: the Controller's owners and counters (all outlive the view).
  struct Sources {
    const Clock* clock = nullptr;
    const Inventory* inventory = nullptr;
    const JobBook* jobs = nullptr;
    const JobHealthMap* health = nullptr;
    const AgentBoard* agents = nullptr;
    const FindingLog* findings = nullptr;
    const EventLog* events = nullptr;
    const RankTokens* rank_tokens = nullptr;
    const SlurmOwner* slurm = nullptr;
    const Lateness* lateness = nullptr;
    const std::map<std::string, uint64_t>* report_counts = nullptr;
    const uint64_t* reports_ignored = nullptr;  // kIgnoredReasons counters, by IgnoredReason
    const std::map<std::string, uint64_t>* heartbeat_ignored = nullptr;
    const std::map<std::string, std::map<std::string, uint64_t>>* restart_causes = nullptr;
    const std::deque<Time>* writes_started = nullptr;
    const bool* storage_failed = nullptr;
  };
  explicit ControlView(Sources s) : s_(s) {}

  // The owners themselves, read-only, for reads that need no composing.
  const Inventory& inventory() const { return *s_.inventory; }
  const JobBook& jobs() const { return *s_.jobs; }
  const FindingLog& findings() const { return *s_.findings; }
  const EventLog& events() const { return *s_.events; }
  // The live rank credentials (the daemon's authenticator looks tokens up here, from any thread).
  const RankTokens& rank_tokens() const { return *s_.rank_tokens; }
  const Lateness& lateness_of() const { return *s_.lateness; }

  // ---- Nodes. Views carry what the agent board knows now: the node's unknown processes, and
  // agent_attached as the agent's liveness (heard within node_heartbeat_timeout_s), not whether one ever
  // attached.
  Result<NodeView> GetNode(const std::string& id) const REQUIRES_SHARED(kControl);
  NodeList ListNodes(const NodeFilter& filter) const REQUIRES_SHARED(kControl);
  std::vector<SpareDeficit> SpareDeficits() const REQUIRES_SHARED(kControl) {
    return inventory().SpareDeficits();
  }
  const TopologyLevels& levels() const REQUIRES_SHARED(kControl) { return inventory().cluster().levels(); }
  std::size_t node_count() const REQUIRES_SHARED(kControl) {
    return static_cast<std::size_t>(inventory().cluster().size());
  }
  int64_t free_usable_gpus() const REQUIRES_SHARED(kControl) {
    return inventory().cluster().FreeUsableGpus();
  }
  // A node's view with the agent board's state.
  NodeView WithAgent(NodeView v) const REQUIRES_SHARED(kControl);

  // ---- Planning and jobs
  Result<PlanEstimate> PlanFor(const JobSpec& spec) const REQUIRES_SHARED(kControl) {
    return jobs().PlanFor(spec);
  }
  // What PlanFor plans on: the job's GPU profile and this inventory's GPU memory and NVLink domains.
  Hardware HardwareFor(const JobSpec& spec) const REQUIRES_SHARED(kControl) {
    return jobs().HardwareFor(spec);
  }
  Result<JobView> GetJob(const std::string& id) const REQUIRES_SHARED(kControl);
  JobView ViewOf(const JobEntry& e) const REQUIRES_SHARED(kControl);
  // The job with this spec.external_id that has not ended (an index lookup, cheap enough for every report
  // batch); nullopt when none.
  struct JobRef {
    std::string id;
    std::string owner;
  };
  std::optional<JobRef> FindExternalJob(const std::string& external_id) const REQUIRES_SHARED(kControl);
  // Why `batch` must not create a job for this external id: the newest job with it has ended (cancelled
  // here, or as its launcher said) and the batch is of that job's attempt or an earlier one, so its ranks
  // are that job's (a job that ended queued, attempt 0, had its first run to come: attempt 1 is it). Only a
  // later attempt (the launcher requeued the job) starts another. nullopt: creation may go on.
  std::optional<std::string> EndedExternalRun(const std::string& external_id, const ReportBatch& batch) const
      REQUIRES_SHARED(kControl);
  // Who submitted the job (its spec's owner; "" before auth); nullopt when there is no such job.
  std::optional<std::string> JobOwner(const std::string& id) const REQUIRES_SHARED(kControl);
  // Jobs in id order after `after` (exclusive; "" from the start), at most `limit`; `*more` tells whether
  // more matching jobs follow. Costs O(log jobs + the jobs it steps over) when no state is given; with
  // `external_id`, only the jobs with that spec.external_id are visited (an index).
  std::vector<JobView> ListJobs(std::optional<JobState> state, const std::string& after = "",
                                std::size_t limit = SIZE_MAX, bool* more = nullptr,
                                const std::optional<std::string>& external_id = std::nullopt) const
      REQUIRES_SHARED(kControl);
  // Jobs of this owner (spec.owner) that have not ended: the per-submitter quota.
  int ActiveJobsOf(const std::string& owner) const REQUIRES_SHARED(kControl);
  Result<PlacementView> GetPlacement(const std::string& id) const REQUIRES_SHARED(kControl);

  // ---- Events (control/event_log.h, docs/events.md), readable once their batch is durable.
  Result<EventPage> ReadEvents(int64_t after, std::size_t limit) const REQUIRES_SHARED(kControl) {
    return events().Read(after, limit);
  }

  // ---- Health. GetHealth's shape is the health module's (health/job_monitor_json.cpp).
  Result<Json> GetHealth(const std::string& id) const REQUIRES_SHARED(kControl);
  // GET /v1/jobs/{id}/steps: the running attempt's last `limit` final steps, oldest first
  // (health/step_history.h); an empty list when no attempt is watched.
  Result<Json> GetSteps(const std::string& id, size_t limit) const REQUIRES_SHARED(kControl);
  Result<CheckpointList> GetCheckpoints(const std::string& id) const REQUIRES_SHARED(kControl);
  // kNotFound when q.job names no job.
  Result<std::vector<Finding>> GetFailures(const FindingQuery& q, bool* more = nullptr) const
      REQUIRES_SHARED(kControl);

  // ---- The daemon's own state and counters for /metrics.
  Lateness::Facts lateness() const REQUIRES_SHARED(kControl) { return s_.lateness->facts(s_.clock->Now()); }
  const std::map<FindingKind, uint64_t>& finding_counts() const REQUIRES_SHARED(kControl) {
    return findings().counts();
  }
  const std::map<std::string, uint64_t>& report_counts() const REQUIRES_SHARED(kControl) {
    return *s_.report_counts;
  }
  const std::map<std::string, uint64_t>& heartbeat_ignored() const REQUIRES_SHARED(kControl) {
    return *s_.heartbeat_ignored;
  }
  // Reports accepted but ignored for a reason (shepherd_reports_ignored_total), indexed by IgnoredReason.
  uint64_t reports_ignored(IgnoredReason why) const REQUIRES_SHARED(kControl) {
    return s_.reports_ignored[static_cast<int>(why)];
  }
  // Per-job facts, for the reader thread.
  struct JobMetrics {
    const Job* job = nullptr;  // valid only during the visit
    int64_t last_step = -1;    // JobHealth::LatestStep; -1: none
    double step_time_s = 0;    // JobHealth::StepTimeSeconds; 0: none
    // Restarts this daemon made since it started, by cause (RestartCause); null when none.
    const std::map<std::string, uint64_t>* restarts = nullptr;
  };
  // Calls `visit` for every job that has not ended and every job that ended (updated_at) at or after
  // `ended_since`, in id order. O(jobs): visits no placement and copies nothing.
  void VisitJobMetrics(Time ended_since, const std::function<void(const JobMetrics&)>& visit) const
      REQUIRES_SHARED(kControl);
  // ---- Goodput (goodput/accounting.h): a job's records as accounting reads them.
  struct GoodputRecords {
    const Job* job = nullptr;             // valid only during the visit
    std::vector<Attempt> attempts;        // oldest first, without their placements' ranks
    std::vector<AttemptSize> sizes;       // per attempt: what its placement held
    std::vector<Checkpoint> checkpoints;  // the job's (empty unless asked for)
    std::vector<Finding> findings;        // those the attempts' ended_by name, and their incidents' roots
    GoodputInput Input(Time now) const {
      return {.job = *job,
              .attempts = attempts,
              .checkpoints = checkpoints,
              .findings = findings,
              .now = now,
              .sizes = sizes};
    }
  };
  // kNotFound for no job. O(the job's attempts and checkpoints, log of its findings).
  Result<GoodputRecords> GetGoodputRecords(const std::string& id) const REQUIRES_SHARED(kControl);
  // Calls `visit` for every job that has not ended and every job that ended (updated_at) at or after
  // `ended_since`, in id order, one job at a time (one set of buffers, reused): O(jobs and their attempts),
  // and their checkpoints when `with_checkpoints`.
  void VisitGoodputRecords(Time ended_since, bool with_checkpoints,
                           const std::function<void(const GoodputRecords&)>& visit) const
      REQUIRES_SHARED(kControl);
  struct FleetFacts {
    std::map<NodeState, int> by_state;  // nodes by state (no zero entries)
    int spare_nodes = 0;                // nodes held aside as spares, whatever their state
  };
  // O(nodes).
  FleetFacts Fleet() const REQUIRES_SHARED(kControl);
  // The store as the control thread sees it: batches handed to it and not answered yet, how long the oldest
  // has waited (a stall: another connection's lock, a slow disk), and whether it failed.
  struct StorageFacts {
    size_t writes_in_flight = 0;
    double oldest_write_s = 0;
    bool failed = false;
  };
  StorageFacts storage() const REQUIRES_SHARED(kControl);

 private:
  const JobHealth* HealthOf(const std::string& job) const {
    auto it = s_.health->find(job);
    return it == s_.health->end() ? nullptr : it->second.get();
  }

  Sources s_;
};

}  // namespace shepherd
