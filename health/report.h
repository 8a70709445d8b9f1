// Rank reports: the high-rate input of health/. ParseReport turns one element of
// `POST /v1/jobs/{id}/reports` (see API.md) into a Report, validating it field by field.
//
// Hot path (target 150k reports/s): parsing does one pass over the object's keys, keeps short strings
// (op, group) in std::string's small buffer and allocates only for `hash`, `path` and `members`, which are
// rare (the Python client sends a group's members at most every 30 s).
// Pure: no clock reads, no I/O. Thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"
#include "core/json_lite.h"
#include "core/status.h"
#include "core/time.h"

namespace shepherd {

// kFinished: the rank ended its training normally and sends nothing more that matters (its helper may
// still heartbeat through the interpreter's exit): its silence from then on is not a loss.
// kSummary: the rank's per-interval report in the default (aggregated) mode: a heartbeat plus, per process
// group, its collective progress and arrival timing since the previous summary (GroupSummary). One summary
// replaces the heartbeat and every collective report of the interval, so a rank's traffic does not grow with
// the collectives a step runs.
enum class ReportKind : uint8_t { kHeartbeat, kStep, kCollective, kParamHash, kCheckpoint, kFinished, kSummary };
// kEval: the rank is evaluating (no training steps for a while); the no-progress hang rule allows for it.
enum class Phase : uint8_t { kUnspecified, kTrain, kCheckpointSave, kCheckpointLoad, kEval };
enum class CollectiveState : uint8_t { kStarted, kCompleted };
// Groups whose membership health/ derives from placement coordinates; kWorld ("world") is every rank (the
// Python client's name for a job-wide group in a job with more than one axis). Any other name is kOther:
// accepted and shown, but ignored for membership (the hang watchdog cannot follow waits through it).
enum class GroupKind : uint8_t { kTp = 0, kPp = 1, kDp = 2, kCp = 3, kWorld = 4, kOther = 5 };
inline constexpr int kKnownGroupKinds = 5;  // tp, pp, dp, cp, world: the ones with a membership

// Why an accepted report was ignored (counted as shepherd_reports_ignored_total{reason}; never a finding):
// kSeqBackwards: a summary whose group's `completed` went below what the rank said before in this attempt;
// kGroupMembership: a named group whose members changed, or a rank claiming a group it is not in;
// kRelayForeign: relayed by an agent for a rank that is not placed on its node. (A sender over its rate is
// refused per request, before its reports are read: shepherd_requests_shed_total{reason="rate_limited"}.)
enum class IgnoredReason : uint8_t { kSeqBackwards = 0, kGroupMembership, kRelayForeign };
inline constexpr int kIgnoredReasons = 3;

const char* ToString(IgnoredReason r);
const char* ToString(ReportKind k);
const char* ToString(Phase p);
const char* ToString(GroupKind g);
GroupKind GroupKindFromName(std::string_view name);

struct CollectiveInfo {
  int64_t seq = 0;
  std::string op;     // e.g. "all_reduce"; may be empty
  std::string group;  // as sent ("tp", "pp", "dp", "cp" or another name)
  GroupKind group_kind = GroupKind::kOther;
  std::optional<Time> since;  // heartbeat only: when the rank entered it (the rank's clock)
  // collective only, optional: a named group's members, global ranks ascending, the reporting rank among
  // them (health/named_groups.h). Empty when absent.
  std::vector<int> members;
};

// One process group's part of a summary (wire: an element of `groups`, docs/api.md "Summaries").
// Arrival timing covers the collectives of this group the rank completed since its previous summary:
// `wait_s` is the sum over them of (completion - entry) on the rank's clock. In a synchronous collective
// every member leaves at about the same moment, so the member that arrives last waits least: comparing
// members' waits names the late arriver without comparing clocks across hosts.
struct GroupSummary {
  std::string group;  // as sent ("tp", "pp", "dp", "cp", "world" or another name)
  GroupKind group_kind = GroupKind::kOther;
  int64_t completed = -1;               // highest seq of this group the rank completed; -1: none yet
  std::optional<CollectiveInfo> open;   // the oldest collective of this group the rank is inside now
  int64_t count = 0;                    // collectives of this group completed since the previous summary
  double wait_s = 0;                    // their summed wait (completion - entry), seconds, >= 0
  std::vector<int> members;             // a named group's members, as in CollectiveInfo; empty when absent
};
inline constexpr size_t kMaxSummaryGroups = 16;  // groups one summary may carry (more: the report is refused)

struct Report {
  int rank = 0;
  int attempt = 0;
  Time time{};  // the rank's `time`, or the receive time when absent
  ReportKind kind = ReportKind::kHeartbeat;

  std::optional<int64_t> step;        // required for step, param_hash, checkpoint; optional for heartbeat
  Phase phase = Phase::kUnspecified;  // heartbeat and summary
  // heartbeat: the collective the rank is inside now (absent: none).
  // collective: the collective that `collective_state` refers to.
  std::optional<CollectiveInfo> collective;
  CollectiveState collective_state = CollectiveState::kStarted;
  // step: NaN / ±Inf when the rank sent "nan", "inf", "-inf". Absent when not sent (e.g. a pipeline
  // stage that does not compute the loss).
  std::optional<double> loss;
  std::optional<double> grad_norm;
  std::optional<double> step_time_s;
  std::optional<double> lr;  // step: the learning rate the step used (the largest over parameter groups)
  std::string hash;          // param_hash: hex digest, lower- or upper-case
  std::string path;          // checkpoint: where this rank's part was saved
  // checkpoint `scope`: "rank" (default, this rank's part) or "replicated": the file holds the whole
  // state of a replicated job (a DDP rank-0 save), so this one report completes the checkpoint.
  bool replicated = false;
  // Any kind, optional: the host the rank runs on as the rank sees it (SLURMD_NODENAME, NODE_NAME or the
  // host name). Empty when absent. Valid: 1-253 characters of [A-Za-z0-9._-], not "." or "..".
  std::string node;
  // summary: one entry per process group the rank has used (at most kMaxSummaryGroups, groups unique).
  std::vector<GroupSummary> groups;
};

// Validates one report. `received_at` is the default for an absent `time`. Unknown keys are ignored
// (clients may add fields). On failure: kInvalidContent whose fields() name every invalid field by JSON
// path ("collective.seq") and whose message() is "<first field>: <first message>".
// Does not check `rank` against the world size nor `attempt` against the job: JobMonitor::Ingest does.
Result<Report> ParseReport(const Json& j, Time received_at);
// The same for a report read by the heartbeat's fast path (core/json_lite.h): the same result.
Result<Report> ParseReport(const LiteJson& j, Time received_at);

// The body of POST /v1/jobs/{id}/reports, parsed: each report that parsed with its index in the body, and
// each that did not with its error. One bad report never refuses the batch.
struct ReportBatch {
  struct Rejected {
    size_t index = 0;
    std::string error;
  };
  std::vector<std::pair<size_t, Report>> reports;
  std::vector<Rejected> rejected;
};
// Reports one POST may carry (docs/api.md): the Python client sends at most 500. Bounds the control thread's
// work per batch to about a millisecond.
inline constexpr size_t kMaxReportsPerBatch = 1000;
// kInvalidContent (field "reports") when the body is not {"reports": [...]} or has more than
// kMaxReportsPerBatch reports.
Result<ReportBatch> ParseReportBatch(const Json& body, Time received_at);

}  // namespace shepherd
