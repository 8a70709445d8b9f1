#include "health/report.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/fields.h"
#include "health/report_values.h"

namespace shepherd {

namespace {

using namespace report_values;

constexpr size_t kMaxNameLen = 128;
constexpr size_t kMaxHashLen = 512;
constexpr size_t kMaxPathLen = 4096;
constexpr int64_t kMaxStep = int64_t{1} << 53;  // exact in a double; far beyond any training run

using Errors = std::vector<FieldError>;

template <typename Json>
void ParseCollective(const Json& v, ReportKind kind, const char* prefix, Report* r, Errors* errs) {
  auto path = [prefix](const char* key) { return std::string(prefix) + "." + key; };
  if (!v.is_object()) {
    errs->push_back({prefix, "must be an object with seq, op, group"});
    return;
  }
  CollectiveInfo c;
  const Json *seq = nullptr, *op = nullptr, *group = nullptr, *since = nullptr;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k == "seq")
      seq = &*it;
    else if (k == "op")
      op = &*it;
    else if (k == "group")
      group = &*it;
    else if (k == "since")
      since = &*it;
  }
  if (!seq || !ReadInt(*seq, 0, kMaxStep, &c.seq))
    errs->push_back({path("seq"), "required: an integer from 0 to 2^53"});
  if (op && !op->is_null() && !ReadString(*op, kMaxNameLen, true, &c.op))
    errs->push_back({path("op"), "must be a string of at most 128 characters"});
  if (!group || !ReadString(*group, kMaxNameLen, false, &c.group))
    errs->push_back({path("group"), "required: \"tp\", \"pp\", \"dp\" or a group name"});
  else
    c.group_kind = GroupKindFromName(c.group);
  if (since && !since->is_null() && kind == ReportKind::kHeartbeat) {
    Time t;
    if (ReadTime(*since, &t))
      c.since = t;
    else
      errs->push_back({path("since"), "must be an RFC 3339 time or Unix seconds"});
  }
  r->collective = std::move(c);
}

constexpr size_t kMaxMembers = 1 << 20;

// `rank` < 0: the reporting rank need not be among them (a summary: JobMonitor::Ingest refuses that one
// report with reason group_membership instead of rejecting it as malformed).
template <typename Json>
bool ReadMembers(const Json& v, int rank, std::vector<int>* out) {
  if (!v.is_array() || v.empty() || v.size() > kMaxMembers) return false;
  out->reserve(v.size());
  bool has_rank = false;
  for (const Json& m : v) {
    int64_t n = 0;
    if (!ReadInt(m, 0, std::numeric_limits<int32_t>::max(), &n) || (!out->empty() && n <= out->back()))
      return false;
    has_rank = has_rank || n == rank;
    out->push_back(static_cast<int>(n));
  }
  return has_rank || rank < 0;
}

template <typename Json>
bool ParsePhase(const Json& phase, Phase* out) {
  const std::string* p = phase.is_string() ? &phase.template get_ref<const std::string&>() : nullptr;
  if (p && *p == "train")
    *out = Phase::kTrain;
  else if (p && *p == "checkpoint_save")
    *out = Phase::kCheckpointSave;
  else if (p && *p == "checkpoint_load")
    *out = Phase::kCheckpointLoad;
  else if (p && *p == "eval")
    *out = Phase::kEval;
  else
    return false;
  return true;
}

// One element of a summary's `groups` (docs/api.md "Summaries"); errors named "groups[i].<field>".
template <typename Json>
void ParseGroupSummary(const Json& v, size_t i, Report* r, Errors* errs) {
  const std::string prefix = "groups[" + std::to_string(i) + "]";
  auto path = [&prefix](const char* key) { return prefix + "." + key; };
  if (!v.is_object()) {
    errs->push_back({prefix, "must be an object with group, completed, count, wait_s"});
    return;
  }
  const Json *group = nullptr, *completed = nullptr, *open = nullptr, *count = nullptr, *wait = nullptr,
             *members = nullptr;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k == "group")
      group = &*it;
    else if (k == "completed")
      completed = &*it;
    else if (k == "open")
      open = &*it;
    else if (k == "count")
      count = &*it;
    else if (k == "wait_s")
      wait = &*it;
    else if (k == "members")
      members = &*it;
  }
  GroupSummary g;
  const size_t errors_before = errs->size();
  if (!group || !ReadString(*group, kMaxNameLen, false, &g.group))
    errs->push_back({path("group"), "required: \"tp\", \"pp\", \"dp\" or a group name"});
  else
    g.group_kind = GroupKindFromName(g.group);
  if (!completed || !ReadInt(*completed, -1, kMaxStep, &g.completed))
    errs->push_back({path("completed"), "required: an integer from -1 (none yet) to 2^53"});
  if (count && !count->is_null() && !ReadInt(*count, 0, kMaxStep, &g.count))
    errs->push_back({path("count"), "must be an integer from 0 to 2^53"});
  if (wait && !wait->is_null()) {
    double d = 0;
    if (wait->is_number() && std::isfinite(d = wait->template get<double>()) && d >= 0)
      g.wait_s = d;
    else
      errs->push_back({path("wait_s"), "must be a finite number >= 0"});
  }
  if (members && !members->is_null() && !ReadMembers(*members, /*rank=*/-1, &g.members))
    errs->push_back({path("members"), "must be the group's ranks: integers ascending without repeats, at most " +
                                          std::to_string(kMaxMembers)});
  if (open && !open->is_null()) {
    if (!open->is_object()) {
      errs->push_back({path("open"), "must be an object with seq, op, since"});
    } else {
      CollectiveInfo c;
      const Json *seq = nullptr, *op = nullptr, *since = nullptr;
      for (auto it = open->begin(); it != open->end(); ++it) {
        const std::string& k = it.key();
        if (k == "seq")
          seq = &*it;
        else if (k == "op")
          op = &*it;
        else if (k == "since")
          since = &*it;
      }
      if (!seq || !ReadInt(*seq, 0, kMaxStep, &c.seq))
        errs->push_back({path("open.seq"), "required: an integer from 0 to 2^53"});
      else if (completed && c.seq <= g.completed)
        errs->push_back({path("open.seq"), "must be greater than completed"});
      if (op && !op->is_null() && !ReadString(*op, kMaxNameLen, true, &c.op))
        errs->push_back({path("open.op"), "must be a string of at most 128 characters"});
      if (since && !since->is_null()) {
        Time t;
        if (ReadTime(*since, &t))
          c.since = t;
        else
          errs->push_back({path("open.since"), "must be an RFC 3339 time or Unix seconds"});
      }
      c.group = g.group;
      c.group_kind = g.group_kind;
      g.open = std::move(c);
    }
  }
  if (errs->size() != errors_before) return;
  for (const GroupSummary& other : r->groups)
    if (other.group == g.group) {
      errs->push_back({path("group"), "must be unique within groups (\"" + g.group + "\" is repeated)"});
      return;
    }
  r->groups.push_back(std::move(g));
}

template <typename Json>
void ParseSummaryGroups(const Json* groups, Report* r, Errors* errs) {
  if (!groups || !groups->is_array()) {
    errs->push_back({"groups", "required: an array of at most " + std::to_string(kMaxSummaryGroups) +
                                   " process groups"});
    return;
  }
  if (groups->size() > kMaxSummaryGroups) {
    errs->push_back({"groups", "must have at most " + std::to_string(kMaxSummaryGroups) + " entries"});
    return;
  }
  r->groups.reserve(groups->size());
  for (size_t i = 0; i < groups->size(); ++i) ParseGroupSummary((*groups)[i], i, r, errs);
}

Status Invalid(Errors errs) {
  std::string message = errs.front().field + ": " + errs.front().message;  // before errs is moved from
  return InvalidContent(std::move(message), std::move(errs));
}

bool ValidNodeName(const std::string& s) {
  if (s.empty() || s.size() > 253 || s == "." || s == "..") return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return false;
  return true;
}

// ParseReport for Json and LiteJson alike (the template parameter shadows shepherd::Json).
template <typename Json>
Result<Report> ParseReportOf(const Json& j, Time received_at) {
  if (!j.is_object()) return InvalidContent("report: must be an object", {{"", "must be an object"}});
  // One pass over the keys; kind-specific checks follow once `kind` is known.
  const Json *rank = nullptr, *attempt = nullptr, *time = nullptr, *kind = nullptr, *step = nullptr,
             *collective = nullptr, *phase = nullptr, *loss = nullptr, *grad_norm = nullptr,
             *step_time = nullptr, *seq = nullptr, *op = nullptr, *group = nullptr, *state = nullptr,
             *hash = nullptr, *lr = nullptr, *path = nullptr, *scope = nullptr, *node = nullptr,
             *members = nullptr, *groups = nullptr;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const Json* v = &*it;
    switch (k.empty() ? '\0' : k[0]) {
      case 'a':
        if (k == "attempt") attempt = v;
        break;
      case 'c':
        if (k == "collective") collective = v;
        break;
      case 'g':
        if (k == "grad_norm")
          grad_norm = v;
        else if (k == "group")
          group = v;
        else if (k == "groups")
          groups = v;
        break;
      case 'h':
        if (k == "hash") hash = v;
        break;
      case 'k':
        if (k == "kind") kind = v;
        break;
      case 'l':
        if (k == "loss")
          loss = v;
        else if (k == "lr")
          lr = v;
        break;
      case 'm':
        if (k == "members") members = v;
        break;
      case 'n':
        if (k == "node") node = v;
        break;
      case 'o':
        if (k == "op") op = v;
        break;
      case 'p':
        if (k == "phase")
          phase = v;
        else if (k == "path")
          path = v;
        break;
      case 'r':
        if (k == "rank") rank = v;
        break;
      case 's':
        if (k == "step")
          step = v;
        else if (k == "step_time_s")
          step_time = v;
        else if (k == "seq")
          seq = v;
        else if (k == "state")
          state = v;
        else if (k == "scope")
          scope = v;
        break;
      case 't':
        if (k == "time") time = v;
        break;
      default:
        break;
    }
  }

  Report r;
  r.time = received_at;
  Errors errs;
  int64_t n = 0;
  if (!rank || !ReadInt(*rank, 0, std::numeric_limits<int32_t>::max(), &n))
    errs.push_back({"rank", "required: an integer from 0 to 2147483647"});
  else
    r.rank = static_cast<int>(n);
  if (!attempt || !ReadInt(*attempt, 0, std::numeric_limits<int32_t>::max(), &n))
    errs.push_back({"attempt", "required: an integer from 0 to 2147483647"});
  else
    r.attempt = static_cast<int>(n);
  if (time && !time->is_null() && !ReadTime(*time, &r.time))
    errs.push_back({"time", "must be an RFC 3339 time or Unix seconds"});

  bool kind_ok = false;
  if (kind && kind->is_string()) {
    const std::string& k = kind->template get_ref<const std::string&>();
    kind_ok = true;
    if (k == "heartbeat")
      r.kind = ReportKind::kHeartbeat;
    else if (k == "step")
      r.kind = ReportKind::kStep;
    else if (k == "collective")
      r.kind = ReportKind::kCollective;
    else if (k == "param_hash")
      r.kind = ReportKind::kParamHash;
    else if (k == "checkpoint")
      r.kind = ReportKind::kCheckpoint;
    else if (k == "finished")
      r.kind = ReportKind::kFinished;
    else if (k == "summary")
      r.kind = ReportKind::kSummary;
    else
      kind_ok = false;
  }
  if (!kind_ok) {
    errs.push_back(
        {"kind", "required: one of heartbeat, summary, step, collective, param_hash, checkpoint, finished"});
    return Invalid(std::move(errs));
  }

  if (node && !node->is_null()) {
    const std::string* name = node->is_string() ? &node->template get_ref<const std::string&>() : nullptr;
    if (name && ValidNodeName(*name))
      r.node = *name;
    else
      errs.push_back({"node", "must be 1-253 characters of A-Z a-z 0-9 . _ - (not \".\" or \"..\")"});
  }

  bool step_required =
      r.kind == ReportKind::kStep || r.kind == ReportKind::kParamHash || r.kind == ReportKind::kCheckpoint;
  if (step && !step->is_null()) {
    if (ReadInt(*step, 0, kMaxStep, &n))
      r.step = n;
    else
      errs.push_back({"step", "must be an integer from 0 to 2^53"});
  } else if (step_required) {
    errs.push_back({"step", "required for this kind: an integer from 0 to 2^53"});
  }

  switch (r.kind) {
    case ReportKind::kHeartbeat:
      if (collective && !collective->is_null()) ParseCollective(*collective, r.kind, "collective", &r, &errs);
      if (phase && !phase->is_null() && !ParsePhase(*phase, &r.phase))
        errs.push_back({"phase", "must be one of train, eval, checkpoint_save, checkpoint_load"});
      break;
    case ReportKind::kSummary:
      if (phase && !phase->is_null() && !ParsePhase(*phase, &r.phase))
        errs.push_back({"phase", "must be one of train, eval, checkpoint_save, checkpoint_load"});
      ParseSummaryGroups(groups, &r, &errs);
      break;
    case ReportKind::kStep: {
      double d = 0;
      if (loss && !loss->is_null()) {
        if (ReadMetric(*loss, &d))
          r.loss = d;
        else
          errs.push_back({"loss", "must be a number or \"nan\", \"inf\", \"-inf\""});
      }
      if (grad_norm && !grad_norm->is_null()) {
        if (ReadMetric(*grad_norm, &d))
          r.grad_norm = d;
        else
          errs.push_back({"grad_norm", "must be a number or \"nan\", \"inf\", \"-inf\""});
      }
      if (step_time && !step_time->is_null()) {
        if (step_time->is_number() && std::isfinite(d = step_time->template get<double>()) && d >= 0)
          r.step_time_s = d;
        else
          errs.push_back({"step_time_s", "must be a finite number >= 0"});
      }
      if (lr && !lr->is_null()) {
        if (lr->is_number() && std::isfinite(d = lr->template get<double>()) && d >= 0)
          r.lr = d;
        else
          errs.push_back({"lr", "must be a finite number >= 0"});
      }
      break;
    }
    case ReportKind::kCollective: {
      // For this kind the collective's fields sit at the top level of the report.
      CollectiveInfo c;
      if (!seq || !ReadInt(*seq, 0, kMaxStep, &c.seq))
        errs.push_back({"seq", "required: an integer from 0 to 2^53"});
      if (op && !op->is_null() && !ReadString(*op, kMaxNameLen, true, &c.op))
        errs.push_back({"op", "must be a string of at most 128 characters"});
      if (!group || !ReadString(*group, kMaxNameLen, false, &c.group))
        errs.push_back({"group", "required: \"tp\", \"pp\", \"dp\" or a group name"});
      else
        c.group_kind = GroupKindFromName(c.group);
      const std::string* s = state && state->is_string() ? &state->template get_ref<const std::string&>() : nullptr;
      if (s && *s == "started")
        r.collective_state = CollectiveState::kStarted;
      else if (s && *s == "completed")
        r.collective_state = CollectiveState::kCompleted;
      else
        errs.push_back({"state", "required: \"started\" or \"completed\""});
      if (members && !members->is_null() && !ReadMembers(*members, r.rank, &c.members))
        errs.push_back({"members", "must be the group's ranks: integers ascending without repeats, at most " +
                                       std::to_string(kMaxMembers) + ", this report's rank among them"});
      r.collective = std::move(c);
      break;
    }
    case ReportKind::kParamHash:
      if (!hash || !ReadString(*hash, kMaxHashLen, false, &r.hash) || !IsHex(r.hash))
        errs.push_back({"hash", "required: a non-empty hex string of at most 512 characters"});
      break;
    case ReportKind::kCheckpoint:
      if (!path || !ReadString(*path, kMaxPathLen, false, &r.path))
        errs.push_back({"path", "required: a non-empty string of at most 4096 characters"});
      else if (HasControlCharacter(r.path))
        errs.push_back({"path", "must not contain control characters"});
      if (scope && !scope->is_null()) {
        const std::string* sc = scope->is_string() ? &scope->template get_ref<const std::string&>() : nullptr;
        if (sc && *sc == "replicated")
          r.replicated = true;
        else if (!sc || *sc != "rank")
          errs.push_back({"scope", "must be \"rank\" or \"replicated\""});
      }
      break;
    case ReportKind::kFinished:
      break;  // optional `step`: the last step the rank completed
  }
  if (!errs.empty()) return Invalid(std::move(errs));
  return r;
}

}  // namespace

Result<Report> ParseReport(const Json& j, Time received_at) { return ParseReportOf(j, received_at); }
Result<Report> ParseReport(const LiteJson& j, Time received_at) { return ParseReportOf(j, received_at); }

Result<ReportBatch> ParseReportBatch(const Json& body, Time received_at) {
  if (!body.is_object() || !body.contains("reports") || !body["reports"].is_array())
    return InvalidContent("the body must be {\"reports\": [...]}", {{"reports", "must be an array"}});
  const Json& reports = body["reports"];
  if (reports.size() > kMaxReportsPerBatch)
    return InvalidContent(
        "too many reports",
        {{"reports", "must have at most " + std::to_string(kMaxReportsPerBatch) + " entries"}});
  ReportBatch out;
  out.reports.reserve(reports.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    Result<Report> r = ParseReport(reports[i], received_at);
    if (r.ok())
      out.reports.emplace_back(i, std::move(r).value());
    else
      out.rejected.push_back({i, r.status().message()});
  }
  return out;
}

}  // namespace shepherd
