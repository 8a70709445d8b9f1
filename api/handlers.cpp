#include "api/handlers.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "api/metrics_state.h"
#include "api/problem.h"
#include "api/route_handlers.h"
#include "api/static_files.h"
#include "core/fields.h"

namespace shepherd {
namespace api {

std::optional<HttpResponse> Precheck(const HttpRequest& req, const Controller& c, const ApiOptions& o,
                                     bool needs_body) {
  if (!c.ready()) return ProblemFrom(Unavailable("the daemon is not ready"));
  if (needs_body) {
    std::string ct = req.Header("Content-Type");
    std::string media = ct.substr(0, ct.find(';'));
    while (!media.empty() && media.back() == ' ') media.pop_back();
    for (auto& ch : media) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (media != "application/json")
      return Problem(415, "Content-Type must be application/json, got '" + ct + "'");
  }
  return std::nullopt;
}

Page TakePage(QueryParams* q, std::vector<FieldError>* errs) {
  Page page;
  if (auto it = q->find("limit"); it != q->end()) {
    const std::string& v = it->second;
    char* end = nullptr;
    const long long n = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || v.size() > 9 || *end != '\0' || n < 1 || n > static_cast<long long>(kMaxPageSize))
      errs->push_back({"limit", "must be an integer from 1 to " + std::to_string(kMaxPageSize)});
    else
      page.limit = static_cast<std::size_t>(n);
    q->erase(it);
  }
  if (auto it = q->find("cursor"); it != q->end()) {
    const std::string& v = it->second;
    const bool printable =
        std::all_of(v.begin(), v.end(), [](char ch) { return static_cast<unsigned char>(ch) > 0x20; });
    if (v.empty() || v.size() > 256 || !printable)
      errs->push_back({"cursor", "must be the next_cursor of a previous page"});
    else
      page.after = v;
    q->erase(it);
  }
  return page;
}

HttpResponse QuotaReached(const std::string& name, int limit, const std::string& what,
                          const std::string& why) {
  HttpResponse r = Problem(429, "quota " + name + " (" + std::to_string(limit) + ") reached: " + why,
                           {{"quota." + name, "at most " + std::to_string(limit) + " " + what}});
  r.headers.emplace_back("Retry-After", std::to_string(kQuotaRetryAfterS));
  return r;
}

void SetNextCursor(Json* body, bool more, const std::string& last_id) {
  (*body)["next_cursor"] = more ? Json(last_id) : Json(nullptr);
}

Result<std::shared_ptr<const Json>> Body(const HttpRequest& req, const ApiOptions& o) {
  if (req.json) return req.json;
  auto parsed = ParseJsonText(req.body, o.json_limits);
  if (!parsed.ok()) return parsed.status();
  return std::make_shared<const Json>(std::move(parsed).value());
}

std::optional<HttpResponse> RefuseUnknownFields(const Json& body, std::initializer_list<const char*> known) {
  if (!body.is_object()) return std::nullopt;
  std::vector<FieldError> errs;
  FieldReader(body, "", &errs).OnlyKnown(known);
  if (errs.empty()) return std::nullopt;
  return ProblemFrom(InvalidContent("the body has unknown fields", std::move(errs)));
}

std::optional<std::string> ReadReason(const Json& v, const std::string& field,
                                      std::vector<FieldError>* errs) {
  const std::string* s = v.is_string() ? &v.get_ref<const std::string&>() : nullptr;
  if (!s || Utf8Length(*s) > kMaxReasonChars) {
    errs->push_back(
        {field, "must be a string of at most " + std::to_string(kMaxReasonChars) + " characters"});
    return std::nullopt;
  }
  if (HasControlCharacter(*s)) {
    errs->push_back({field, "must not contain control characters"});
    return std::nullopt;
  }
  return *s;
}

std::optional<HttpResponse> CheckRankScope(const HttpRequest& req, const ReportBatch& batch) {
  const auto& who = req.principal;
  if (!who || who->role != Role::kRank) return std::nullopt;
  for (const auto& [index, r] : batch.reports) {
    const std::string at = "reports[" + std::to_string(index) + "]";
    if (who->attempt && r.attempt != *who->attempt)
      return Problem(403,
                     "this rank credential is for attempt " + std::to_string(*who->attempt) + " of job " +
                         who->job.value_or("?"),
                     {{at + ".attempt", "is not the credential's attempt"}});
    if (who->rank && r.rank != *who->rank)
      return Problem(403,
                     "this rank credential is for rank " + std::to_string(*who->rank) + " of job " +
                         who->job.value_or("?") + ": a rank reports for itself only",
                     {{at + ".rank", "is not the credential's rank"}});
  }
  return std::nullopt;
}

void Reply(const Respond& respond, const Result<Json>& r, int ok_status) {
  respond(r.ok() ? JsonResponse(ok_status, *r) : ProblemFrom(r.status()));
}

SHEPHERD_ROUTE_HANDLER(Healthz) {
  respond(JsonResponse(200, {{"status", "ok"}}));
}

SHEPHERD_ROUTE_HANDLER(Readyz) {
  if (ctx.controller->ready()) return respond(JsonResponse(200, {{"status", "ready"}}));
  respond(ProblemFrom(Unavailable("storage is not open or state is not recovered")));
}

SHEPHERD_ROUTE_HANDLER(MetricsText) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = ctx.metrics->Exposition(ctx.options.version);
  respond(std::move(r));
}

SHEPHERD_ROUTE_HANDLER(WhoAmI) {
  const Principal who = req.principal.value_or(Principal{Role::kAdmin, "anonymous", {}, {}, {}});
  respond(JsonResponse(200, {{"name", who.name}, {"role", ToString(who.role)}}));
}

// "/ui" and "/ui/" match the same route: only the bare one is redirected, so relative links resolve.
SHEPHERD_ROUTE_HANDLER(UiIndex) {
  if (PathOf(req.target) == "/ui/") return respond(ServeUiFile(ctx.options.ui_dir, "index.html"));
  HttpResponse r;
  r.status = 308;
  r.content_type = "text/plain; charset=utf-8";
  r.headers.emplace_back("Location", "/ui/");
  respond(std::move(r));
}

SHEPHERD_ROUTE_HANDLER(UiFile) {
  respond(ServeUiFile(ctx.options.ui_dir, p.at("file")));
}

}  // namespace api

void InstallAuth(Router* router, Controller* c, Authenticator* auth) {
  // Rank credentials are minted per rank of an attempt by the control layer (control/rank_tokens.h).
  auth->SetDynamic([c](std::string_view token) -> std::optional<Principal> {
    auto grant = c->view().rank_tokens().Lookup(token);
    if (!grant) return std::nullopt;
    return Principal{Role::kRank, "rank:" + grant->job, std::nullopt,
                     grant->job,  grant->attempt,       grant->rank};
  });
  router->SetAuth(auth, [c](const std::string& job) REQUIRES_SHARED(kControl) -> std::optional<std::string> {
    return c->view().JobOwner(job);
  });
}

void RegisterRoutes(Router* router, Controller* c, Metrics* metrics, ApiOptions o, const Clock* clock) {
  PlanRunner* const planner = o.planner;
  router->Bind(std::make_shared<const ApiContext>(ApiContext{c, metrics, std::move(o), clock}));
  metrics->SetGaugeSource([c, clock, planner](std::string* out) REQUIRES_SHARED(kControl) {
    AppendStateMetrics(*c, clock->Now(), out);
    *out += "# HELP shepherd_findings_total Findings by kind.\n# TYPE shepherd_findings_total counter\n";
    for (const auto& [kind, n] : c->view().finding_counts())
      *out +=
          std::string("shepherd_findings_total{kind=\"") + ToString(kind) + "\"} " + std::to_string(n) + "\n";
    *out += "# HELP shepherd_reports_total Rank reports by outcome.\n# TYPE shepherd_reports_total counter\n";
    for (const auto& [outcome, n] : c->view().report_counts())
      *out += "shepherd_reports_total{outcome=\"" + outcome + "\"} " + std::to_string(n) + "\n";
    *out +=
        "# HELP shepherd_reports_ignored_total Rank reports accepted but not used, by reason: seq_backwards "
        "(a summary's completed seq went backwards), group_membership (a named group whose members changed, "
        "or a rank claiming a group it is not in), relay_foreign (relayed for a rank not on "
        "the node).\n# TYPE shepherd_reports_ignored_total counter\n";
    for (IgnoredReason why :
         {IgnoredReason::kSeqBackwards, IgnoredReason::kGroupMembership, IgnoredReason::kRelayForeign})
      *out += std::string("shepherd_reports_ignored_total{reason=\"") + ToString(why) + "\"} " +
              std::to_string(c->view().reports_ignored(why)) + "\n";
    *out +=
        "# HELP shepherd_heartbeat_ignored_total Agent heartbeat entries ignored: processes of ranks not "
        "placed "
        "on the agent's node (or listed twice), flight-recorder dumps of those or beyond the caps, relayed "
        "report entries of ranks not placed on the node in their job's current attempt.\n"
        "# TYPE shepherd_heartbeat_ignored_total counter\n";
    for (const char* what : {"process", "flight_recorder", "reports"}) {
      auto it = c->view().heartbeat_ignored().find(what);
      *out += std::string("shepherd_heartbeat_ignored_total{what=\"") + what + "\"} " +
              std::to_string(it == c->view().heartbeat_ignored().end() ? 0 : it->second) + "\n";
    }
    *out += "# HELP shepherd_spare_deficits Leaves or spines below their configured spare minimum.\n";
    *out += "# TYPE shepherd_spare_deficits gauge\nshepherd_spare_deficits " +
            std::to_string(c->view().SpareDeficits().size()) + "\n";
    *out += "# HELP shepherd_free_usable_gpus GPUs on usable nodes that no job holds.\n";
    *out += "# TYPE shepherd_free_usable_gpus gauge\nshepherd_free_usable_gpus " +
            std::to_string(c->view().free_usable_gpus()) + "\n";
    // The daemon's own lateness (health/lateness.h): silence verdicts wait while it is late.
    Lateness::Facts l = c->view().lateness();
    auto gauge = [out](const char* name, const char* help, double v) {
      *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " +
              std::to_string(v) + "\n";
    };
    gauge("shepherd_tick_lag_seconds", "How late the latest periodic tick fired.", l.tick_lag_s);
    gauge("shepherd_control_queue_age_seconds", "How long the latest probe waited for the control thread.",
          l.queue_age_s);
    gauge("shepherd_seconds_since_reports", "Since a batch of rank reports was last processed (-1: never).",
          l.since_reports_s);
    gauge("shepherd_listening_seconds", "Since the daemon was last late (silence counts from then at most).",
          l.listening_for_s);
    gauge("shepherd_late", "1 while the latest tick lag or queue age is over the lateness threshold.",
          l.late ? 1 : 0);
    const Controller::StorageFacts st = c->view().storage();
    gauge("shepherd_storage_writes_in_flight", "Write batches handed to the store and not yet committed.",
          static_cast<double>(st.writes_in_flight));
    gauge("shepherd_storage_oldest_write_seconds",
          "How long the oldest uncommitted write batch has waited (0: none); a stall shows here first.",
          st.oldest_write_s);
    gauge("shepherd_storage_failed", "1 once a write failed: the daemon refuses writes and shuts down.",
          st.failed ? 1 : 0);
    if (planner)
      gauge("shepherd_planner_searches", "Planner searches waiting or running on the planner thread.",
            static_cast<double>(planner->pending()));
    *out +=
        "# HELP shepherd_stalls_total Episodes of the daemon's own lateness since start-up.\n"
        "# TYPE shepherd_stalls_total counter\nshepherd_stalls_total " +
        std::to_string(l.stalls) + "\n";
  });
}

}  // namespace shepherd
