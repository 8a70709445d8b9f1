// Agent routes (docs/agent-protocol.md) and the forced restart.
#include <cerrno>
#include <memory>
#include <optional>

#include "api/handlers.h"
#include "api/problem.h"
#include "api/relayed_reports.h"
#include "api/route_handlers.h"
#include "api/views.h"
#include "core/fields.h"
#include "core/json_lite.h"
#include "core/node.h"
#include "core/redact.h"

namespace shepherd {
namespace {

// Bounds of what an agent may attach to a process entry (the agent reads at most 4 KiB of log; replacing
// invalid UTF-8 can triple that).
constexpr size_t kMaxLogTail = 16384;
constexpr size_t kMaxDumps = kMaxHeartbeatDumps;
constexpr size_t kMaxProcesses = kMaxHeartbeatProcesses;
constexpr size_t kMaxError = 4096;

// A `gpu_faults` entry's `kind` (free-form: the site's probe names it; it goes into the finding's text) and
// `detail`: printable, bounded.
template <typename Json>  // nlohmann::json or LiteJson
bool PrintableUpTo(const Json& v, size_t max, bool allow_empty) {
  if (!v.is_string()) return false;
  const std::string& s = v.template get_ref<const std::string&>();
  return (allow_empty || !s.empty()) && s.size() <= max && !HasControlCharacter(s);
}

// 422 naming each `gpu_faults[i].gpu` that is not a GPU of `node`.
std::optional<HttpResponse> GpuOutsideNode(const AgentHeartbeat& hb, const Node& node) {
  std::vector<FieldError> errs;
  for (size_t i = 0; i < hb.gpu_faults.size(); ++i)
    if (hb.gpu_faults[i].gpu >= node.gpus)
      errs.push_back({"gpu_faults[" + std::to_string(i) + "].gpu",
                      "must be from 0 to " + std::to_string(node.gpus - 1) + " (node " + node.id + " has " +
                          std::to_string(node.gpus) + " GPUs)"});
  if (errs.empty()) return std::nullopt;
  return ProblemFrom(InvalidContent("invalid heartbeat", std::move(errs)));
}

// A heartbeat as the handler uses it: its own fields and the reports it relays.
struct ParsedHeartbeat {
  AgentHeartbeat hb;
  std::vector<RelayedReports> relayed;
};

// Parses an agent's heartbeat before anything is changed: every field is checked for its type, and every
// invalid one is named (422). `now`: the receive time (relayed reports without a `time`).
template <typename Json>  // nlohmann::json or LiteJson (the parameter shadows shepherd::Json)
Result<ParsedHeartbeat> ParseHeartbeat(const Json& body, Time now) {
  std::vector<FieldError> errs;
  if (!body.is_object()) return InvalidContent("invalid heartbeat", {{"$", "must be an object"}});
  auto array_of_objects = [&](const char* key) -> const Json* {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    if (!it->is_array()) {
      errs.push_back({key, "must be an array"});
      return nullptr;
    }
    return &*it;
  };
  // `path()` names the object `o`: called only for an error (a valid heartbeat builds no path strings).
  // `nullable`: null means absent (the protocol's exit_code and signal); otherwise null is a type error.
  auto typed = [&](const Json& o, auto&& path, const char* key, bool (Json::*is)() const noexcept,
                   bool required, const char* what, bool nullable = false) {
    auto it = o.find(key);
    if (it == o.end() || (nullable && it->is_null())) {
      if (required) errs.push_back({path() + "." + key, "is required"});
    } else if (!((*it).*is)()) {
      errs.push_back({path() + "." + key, std::string("must be ") + what});
    }
  };

  // An integer field of `o` within [lo, hi]; absent is fine unless `required`, null too when `nullable`.
  auto ranged = [&](const Json& o, auto&& path, const char* key, int64_t lo, int64_t hi, bool required,
                    bool nullable = false) {
    auto it = o.find(key);
    if (it == o.end() || (nullable && it->is_null())) {
      if (required) errs.push_back({path() + "." + key, "is required"});
    } else if (!it->is_number_integer() || it->template get<int64_t>() < lo || it->template get<int64_t>() > hi ||
               (it->is_number_unsigned() && it->template get<uint64_t>() > static_cast<uint64_t>(hi))) {
      errs.push_back({path() + "." + key, "must be an integer from " + std::to_string(lo) + " to " +
                                            std::to_string(hi) + (nullable ? " or null" : "")});
    }
  };
  constexpr int64_t kInt32 = 2147483647;

  if (const Json* procs = array_of_objects("processes")) {
    if (procs->size() > kMaxProcesses)
      errs.push_back({"processes", "must have at most " + std::to_string(kMaxProcesses) + " entries"});
    for (size_t i = 0; i < procs->size() && i < kMaxProcesses; ++i) {
      const Json& p = (*procs)[i];
      auto path = [i] { return "processes[" + std::to_string(i) + "]"; };
      if (!p.is_object()) {
        errs.push_back({path(), "must be an object"});
        continue;
      }
      // Job ids reach logs and URLs: the node-id alphabet (job-000001), never control characters.
      if (auto j = p.find("job"); j == p.end())
        errs.push_back({path() + ".job", "is required"});
      else if (!j->is_string() || !ValidNodeId(j->template get_ref<const std::string&>()))
        errs.push_back(
            {path() + ".job", "must be 1-128 characters of A-Z a-z 0-9 . _ - (a letter or digit first)"});
      ranged(p, path, "attempt", 0, kInt32, true);
      ranged(p, path, "rank", 0, kInt32, true);
      if (auto st = p.find("state");
          st != p.end() && !(st->is_string() && (st->template get_ref<const std::string&>() == "running" ||
                                          st->template get_ref<const std::string&>() == "exited")))
        errs.push_back({path() + ".state", "must be \"running\" or \"exited\""});
      ranged(p, path, "pid", 0, kInt32, false);
      ranged(p, path, "exit_code", -kInt32 - 1, kInt32, false, true);
      ranged(p, path, "signal", 1, 127, false, true);
      typed(p, path, "oom_kill", &Json::is_boolean, false, "a boolean or null", true);
      typed(p, path, "fenced", &Json::is_boolean, false, "a boolean");
      typed(p, path, "error", &Json::is_string, false, "a string");
      if (auto e = p.find("error");
          e != p.end() && e->is_string() && e->template get_ref<const std::string&>().size() > kMaxError)
        errs.push_back({path() + ".error", "must be at most " + std::to_string(kMaxError) + " bytes"});
      typed(p, path, "log_tail", &Json::is_string, false, "a string");
      if (auto t = p.find("log_tail");
          t != p.end() && t->is_string() && t->template get_ref<const std::string&>().size() > kMaxLogTail)
        errs.push_back({path() + ".log_tail", "must be at most " + std::to_string(kMaxLogTail) + " bytes"});
      if (auto fr = p.find("flight_recorder"); fr != p.end() && !fr->is_null()) {
        if (!fr->is_array() || fr->size() > kMaxDumps) {
          errs.push_back({path() + ".flight_recorder",
                          "must be an array of at most " + std::to_string(kMaxDumps) + " entries"});
        } else {
          for (size_t k = 0; k < fr->size(); ++k) {
            const Json& d = (*fr)[k];
            // Named only when wrong: a heartbeat may list thousands of dumps.
            auto dpath = [&] { return path() + ".flight_recorder[" + std::to_string(k) + "]"; };
            if (!d.is_object()) {
              errs.push_back({dpath(), "must be an object"});
              continue;
            }
            if (auto fp = d.find("path"); fp == d.end())
              errs.push_back({dpath() + ".path", "is required"});
            else if (!PrintableUpTo(*fp, 4096, false))
              errs.push_back({dpath() + ".path", "must be 1 to 4096 characters without control characters"});
            if (auto sz = d.find("size"); sz != d.end() && !sz->is_number_unsigned())
              errs.push_back({dpath() + ".size", "must be a non-negative integer"});
          }
        }
      }
    }
  }
  if (const Json* faults = array_of_objects("gpu_faults")) {
    for (size_t i = 0; i < faults->size(); ++i) {
      const Json& g = (*faults)[i];
      std::string path = "gpu_faults[" + std::to_string(i) + "]";
      if (!g.is_object()) {
        errs.push_back({path, "must be an object"});
        continue;
      }
      // The node's GPU count is the controller's: the handler checks gpu < gpus (GpuOutsideNode).
      if (auto it = g.find("gpu"); it == g.end())
        errs.push_back({path + ".gpu", "is required"});
      else if (!it->is_number_integer() || it->template get<int64_t>() < 0 || it->template get<int64_t>() >= kMaxNodeGpus)
        errs.push_back({path + ".gpu", "must be an integer from 0 to the node's GPUs - 1"});
      if (auto it = g.find("kind"); it != g.end() && !PrintableUpTo(*it, kMaxGpuFaultKind, false))
        errs.push_back({path + ".kind", "must be 1 to 64 characters without control characters"});
      if (auto it = g.find("detail"); it != g.end() && !PrintableUpTo(*it, kMaxGpuFaultDetail, true))
        errs.push_back({path + ".detail", "must be at most 1024 characters without control characters"});
    }
  }
  if (auto it = body.find("health_check"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      errs.push_back({"health_check", "must be an object"});
    } else {
      auto hc = [] { return std::string("health_check"); };
      typed(*it, hc, "seq", &Json::is_number_integer, true, "an integer");
      typed(*it, hc, "ok", &Json::is_boolean, true, "true or false");
      typed(*it, hc, "output", &Json::is_string, false, "a string");
    }
  }
  std::vector<RelayedReports> relayed;
  if (auto it = body.find("reports"); it != body.end()) relayed = ParseRelayedReports(*it, now, &errs);
  if (!errs.empty()) return InvalidContent("invalid heartbeat", std::move(errs));
  // Every field read below was checked above.
  ParsedHeartbeat parsed{.relayed = std::move(relayed)};
  AgentHeartbeat& hb = parsed.hb;
  // By reference: value() would copy the whole list.
  static const Json kNone{};  // null: no elements
  const auto listed = [&body](const char* key) -> const Json& {
    auto it = body.find(key);
    return it != body.end() && it->is_array() ? *it : kNone;
  };
  const Json& processes = listed("processes");
  hb.processes.reserve(processes.size());
  for (const Json& p : processes) {
    ProcessStatus& s = hb.processes.emplace_back();
    // One pass over the entry's members (a lookup per field costs a map search each, per rank per second).
    // Absent fields keep ProcessStatus's defaults; exit_code, signal and oom_kill null mean absent.
    for (auto it = p.begin(); it != p.end(); ++it) {
      const std::string& k = it.key();
      const Json& v = *it;
      if (k == "job")
        s.rank.job = v.template get_ref<const std::string&>();
      else if (k == "attempt")
        s.rank.attempt = v.template get<int>();
      else if (k == "rank")
        s.rank.rank = v.template get<int>();
      else if (k == "state")
        s.running = v.template get_ref<const std::string&>() == "running";
      else if (k == "pid")
        s.pid = v.template get<int64_t>();
      else if (k == "exit_code" && v.is_number_integer())
        s.exit_code = v.template get<int>();
      else if (k == "signal" && v.is_number_integer())
        s.signal = v.template get<int>();
      else if (k == "oom_kill" && v.is_boolean())
        s.oom_kill = v.template get<bool>();
      else if (k == "fenced")
        s.fenced = v.template get<bool>();
      else if (k == "error")
        s.error = v.template get_ref<const std::string&>();
      else if (k == "log_tail")
        s.log_tail = v.template get_ref<const std::string&>();
      else if (k == "flight_recorder" && v.is_array())  // docs/agent-protocol.md
        for (const Json& d : v)
          s.flight_recorder.push_back(
              {RedactSecrets(d["path"].template get<std::string>()), d.value("size", uint64_t{0})});
    }
  }
  for (const Json& g : listed("gpu_faults"))
    hb.gpu_faults.push_back(
        {g.value("gpu", -1), g.value("kind", std::string("fault")), g.value("detail", "")});
  if (auto it = body.find("health_check"); it != body.end() && it->is_object())
    hb.health_check =
        HealthCheckReport{(*it)["seq"].template get<int64_t>(), (*it)["ok"].template get<bool>(), it->value("output", "")};
  return parsed;
}

}  // namespace

namespace api {

SHEPHERD_ROUTE_HANDLER(Heartbeat) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  // Converted where the body was parsed (PrepareHeartbeat); here only when it was not.
  auto hb = std::static_pointer_cast<const ParsedHeartbeat>(req.prepared);
  if (!hb) {
    auto parsed = api::Body(req, o);
    if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
    auto fresh = ParseHeartbeat(**parsed, clock->Now());
    if (!fresh.ok()) return respond(ProblemFrom(fresh.status()));
    hb = std::make_shared<const ParsedHeartbeat>(std::move(fresh).value());
  }
  if (!hb->hb.gpu_faults.empty())  // an unknown node is the controller's 404
    if (auto node = c->view().GetNode(p.at("id")); node.ok())
      if (auto refused = GpuOutsideNode(hb->hb, node->node)) return respond(*refused);
  // `hb` lives until the controller is done with it (the callback holds it).
  c->NodeHeartbeat(
      p.at("id"), hb->hb,
      [respond, hb](Result<HeartbeatAck> r) { api::Reply(respond, r, RenderHeartbeatAck); }, hb->relayed);
}

// The heartbeat's body converted where it was parsed, off the control thread (RouteRule::prepare).
std::optional<HttpResponse> PrepareHeartbeat(const ApiContext& ctx, HttpRequest& req) {
  if (!req.json) return std::nullopt;  // not JSON: the handler's 415
  auto hb = ParseHeartbeat(*req.json, ctx.clock->Now());
  if (!hb.ok()) return ProblemFrom(hb.status());
  req.prepared = std::make_shared<const ParsedHeartbeat>(std::move(hb).value());
  // The handler uses only the typed heartbeat: the tree is freed here, by the thread that built it
  // (freed on the control thread, each of its hundreds of nodes went back to another thread's arena).
  req.json.reset();
  return std::nullopt;
}

// Before the body becomes a tree (FrontDoor::ParseBody; RouteRule::prepare_text): a heartbeat within the
// subset of core/json_lite.h is read straight from its text, with the same checks and the same answer. Any
// other body is left to the tree (ParseJsonText), which names what is wrong, and to PrepareHeartbeat.
std::optional<HttpResponse> PrepareHeartbeatText(const ApiContext& ctx, HttpRequest& req) {
  std::optional<LiteJson> lite = ParseLiteJson(req.body, ctx.options.json_limits);
  if (!lite) return std::nullopt;
  auto hb = ParseHeartbeat(*lite, ctx.clock->Now());
  if (!hb.ok()) return ProblemFrom(hb.status());
  req.prepared = std::make_shared<const ParsedHeartbeat>(std::move(hb).value());
  return std::nullopt;
}

SHEPHERD_ROUTE_HANDLER(WatchAssignments) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  auto q = ParseQuery(req.target);
  // Whole values only: "abc" (strtoll's 0) or "5s" were answered as if valid.
  auto whole = [](const std::string& s, auto parse) {
    char* end = nullptr;
    errno = 0;
    auto v = parse(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && errno == 0 ? std::optional(v) : std::nullopt;
  };
  auto to_ll = [](const char* s, char** e) { return std::strtoll(s, e, 10); };
  auto to_d = [](const char* s, char** e) { return std::strtod(s, e); };
  std::optional<long long> version = q.count("version") ? whole(q["version"], to_ll) : -1;
  if (!version)
    return respond(ProblemFrom(InvalidContent("invalid query", {{"version", "must be an integer"}})));
  std::optional<double> wait = q.count("wait") ? whole(q["wait"], to_d) : 30.0;
  if (!wait || !(*wait >= 0 && *wait <= 300))
    return respond(ProblemFrom(InvalidContent("invalid query", {{"wait", "must be 0-300 seconds"}})));
  // keep=1: the agent leaves the answer's `keep` processes alone (docs/agent-protocol.md).
  if (q.count("keep") && q["keep"] != "0" && q["keep"] != "1")
    return respond(ProblemFrom(InvalidContent("invalid query", {{"keep", "must be 0 or 1"}})));
  const bool can_keep = q.count("keep") && q["keep"] == "1";
  c->WatchAssignments(p.at("id"), *version, clock->Now() + Seconds(*wait), can_keep,
                      [respond](Result<Assignments> r) { api::Reply(respond, r, RenderAssignments); });
}

SHEPHERD_ROUTE_HANDLER(RestartJob) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  std::vector<FieldError> errs;
  std::string from = "last-known-good", reason;
  std::vector<std::string> replace;
  if (!body.is_object())
    errs.push_back({"$", "must be an object"});
  else
    for (auto& [k, v] : body.items()) {
      if (k == "from" && v.is_string() && !v.get_ref<const std::string&>().empty())
        from = v;
      else if (k == "reason")
        reason = api::ReadReason(v, k, &errs).value_or("");
      else if (k == "replace_nodes" && v.is_array()) {
        for (const Json& n : v)
          if (n.is_string() && ValidNodeId(n.get<std::string>()))
            replace.push_back(n);
          else
            errs.push_back({"replace_nodes", "must be an array of node ids"});
      } else
        errs.push_back({k, k == "from" || k == "replace_nodes" ? "has the wrong type" : "unknown field"});
    }
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid restart request", errs)));
  c->RestartJob(p.at("id"), from, replace, reason, Describe(req.principal),
                [respond](Result<RestartOutcome> r) { api::Reply(respond, r, RenderRestart, 202); });
}
// The heartbeat's body converted where it was parsed, off the control thread (RouteRule::prepare).

}  // namespace api

}  // namespace shepherd
