// Goodput routes: GET /v1/jobs/{id}/goodput and GET /v1/goodput (docs/api.md, "Goodput"). Read-only:
// they gather the records the controller holds in memory, account them (goodput/accounting.h) and render.
// Work per request: the jobs (each with its attempts; the asked job's checkpoints too), one at a time,
// with buffers reused; nothing kept beyond one line per job.
#include <limits>

#include "api/goodput_views.h"
#include "api/handlers.h"
#include "api/problem.h"
#include "api/route_handlers.h"

namespace shepherd {
namespace {

struct Window {
  std::optional<Time> since, until;
};

// `since` and `until` (RFC 3339), nothing else; a 400 naming the parameter otherwise.
std::optional<HttpResponse> ParseWindow(const HttpRequest& req, Window* w) {
  std::vector<FieldError> errs;
  for (const auto& [k, v] : ParseQuery(req.target)) {
    if (k != "since" && k != "until") {
      errs.push_back({k, "unknown query parameter (since, until)"});
      continue;
    }
    std::optional<Time> t = ParseRfc3339(v);
    if (!t) {
      errs.push_back({k, "must be an RFC 3339 time, e.g. 2026-11-21T06:48:00Z"});
      continue;
    }
    (k == "since" ? w->since : w->until) = t;
  }
  if (errs.empty() && w->since && w->until && *w->since > *w->until)
    errs.push_back({"since", "must not be after until"});
  if (errs.empty()) return std::nullopt;
  return Problem(400, "invalid query", errs);
}

}  // namespace

namespace api {

SHEPHERD_ROUTE_HANDLER(GetJobGoodput) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  Window w;
  if (auto bad = ParseWindow(req, &w)) return respond(*bad);
  auto records = c->view().GetGoodputRecords(p.at("id"));
  if (!records.ok()) return respond(ProblemFrom(records.status()));
  const Time now = clock->Now();
  GoodputInput in = records->Input(now);
  const JobGoodput whole = AccountJob(in);
  in.since = w.since;
  in.until = w.until;
  const JobGoodput windowed = w.since || w.until ? AccountJob(in) : whole;
  const AdviceOrReason advice = AdviceInputFor(*records, whole, FleetRateOf(*c, now));
  respond(JsonResponse(200, RenderJobGoodput(*records->job, windowed, advice)));
}

SHEPHERD_ROUTE_HANDLER(GetFleetGoodput) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  Window w;
  if (auto bad = ParseWindow(req, &w)) return respond(*bad);
  const Time now = clock->Now();
  const Time until = std::min(w.until.value_or(now), now);
  FleetGoodput fleet;
  FleetRateTally tally;
  // Every job, once: its accounting in the window (jobs that ended before it or began after it add
  // nothing), and its history to the fleet's interruption rate.
  c->view().VisitGoodputRecords(Time::min(), true, [&](const Controller::GoodputRecords& r) {
    tally.Add({.job = r.job, .attempts = r.attempts, .findings = r.findings, .sizes = r.sizes}, now);
    if (r.job->created_at > until) return;
    if (w.since && IsTerminal(r.job->state) && r.job->updated_at < *w.since) return;
    GoodputInput in = r.Input(now);
    in.since = w.since;
    in.until = until;
    fleet.Add(*r.job, AccountJob(in));
  });
  respond(JsonResponse(200, RenderFleetGoodput(fleet, w.since, until, tally.Result())));
}

}  // namespace api

}  // namespace shepherd
