// Reports, health, checkpoints and failures routes.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "api/handlers.h"
#include "api/problem.h"
#include "api/route_handlers.h"
#include "api/views.h"
#include "health/step_history.h"

namespace shepherd {
namespace {

// Unix seconds as `since` takes them: an optional '-', digits, and an optional fraction. (strtod alone would
// also take hex, exponents, "inf" and leading spaces.)
bool IsDecimal(const std::string& v) {
  std::size_t i = !v.empty() && v[0] == '-' ? 1 : 0;
  const std::size_t digits = i;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  if (i == digits) return false;
  if (i < v.size() && v[i] == '.') {
    const std::size_t fraction = ++i;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    if (i == fraction) return false;
  }
  return i == v.size();
}

}  // namespace

namespace api {

SHEPHERD_ROUTE_HANDLER(IngestReports) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  // The envelope and each report are parsed here; one bad report never refuses the batch.
  auto batch = ParseReportBatch(body, clock->Now());
  if (!batch.ok()) return respond(ProblemFrom(batch.status()));
  if (auto unknown = api::RefuseUnknownFields(body, {"reports"})) return respond(*unknown);
  if (auto refused = api::CheckRankScope(req, *batch)) return respond(*refused);
  c->IngestReports(p.at("id"), *batch,
                   [respond](Result<IngestSummary> r) { api::Reply(respond, r, RenderIngest, 202); });
}

SHEPHERD_ROUTE_HANDLER(GetHealth) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  api::Reply(respond, c->view().GetHealth(p.at("id")));
}

SHEPHERD_ROUTE_HANDLER(GetSteps) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  std::vector<FieldError> errs;
  std::size_t limit = 200;
  for (const auto& [k, v] : ParseQuery(req.target)) {
    if (k != "limit") {
      errs.push_back({k, "unknown query parameter"});
      continue;
    }
    const bool digits = !v.empty() && v.size() <= 4 && v.find_first_not_of("0123456789") == std::string::npos;
    limit = digits ? std::strtoul(v.c_str(), nullptr, 10) : 0;
    if (limit < 1 || limit > StepHistory::kCapacity)
      errs.push_back({"limit", "must be an integer from 1 to 2000"});
  }
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid query", errs)));
  api::Reply(respond, c->view().GetSteps(p.at("id"), limit));
}

SHEPHERD_ROUTE_HANDLER(ListCheckpoints) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  std::vector<FieldError> errs;
  QueryParams q = ParseQuery(req.target);
  const api::Page page = api::TakePage(&q, &errs);
  for (const auto& [k, v] : q) errs.push_back({k, "unknown query parameter"});
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid query", errs)));
  auto list = c->view().GetCheckpoints(p.at("id"));
  if (!list.ok()) return respond(ProblemFrom(list.status()));
  // Ledger order; a job has few checkpoints, so paging slices the copy.
  auto& all = list->checkpoints;
  auto from = all.begin();
  if (!page.after.empty()) {
    from = std::find_if(all.begin(), all.end(), [&](const Checkpoint& x) { return x.id == page.after; });
    if (from == all.end())
      return respond(
          ProblemFrom(InvalidContent("invalid query", {{"cursor", "names no checkpoint of this job"}})));
    ++from;
  }
  const bool more = static_cast<std::size_t>(all.end() - from) > page.limit;
  all = std::vector<Checkpoint>(from, more ? from + static_cast<std::ptrdiff_t>(page.limit) : all.end());
  Json body = RenderCheckpoints(*list);
  api::SetNextCursor(&body, more, all.empty() ? "" : all.back().id);
  respond(JsonResponse(200, body));
}

SHEPHERD_ROUTE_HANDLER(ListFailures) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  FindingQuery f;
  std::vector<FieldError> errs;
  QueryParams query = ParseQuery(req.target);
  const api::Page page = api::TakePage(&query, &errs);
  f.after = page.after;
  f.limit = page.limit;
  if (!f.after.empty() && (f.after.rfind("f-", 0) != 0 || f.after.size() < 3 ||
                           f.after.find_first_not_of("0123456789", 2) != std::string::npos))
    errs.push_back({"cursor", "must be the next_cursor of a previous page"});
  for (auto& [k, v] : query) {
    if (k == "kind") {
      f.kind = FindingKindFromString(v);
      if (!f.kind) errs.push_back({"kind", "is not a finding kind (see docs/recovery.md)"});
    } else if (k == "job" && !p.count("id")) {  // the per-job route names its job in the path
      f.job = v;
      if (v.empty()) errs.push_back({"job", "must name a job"});
    } else if (k == "since") {
      // A time the clock cannot hold (after 2262-04-11; inf, nan) is refused, never wrapped around.
      f.since = ParseRfc3339(v);
      if (!f.since && IsDecimal(v)) f.since = TimeFromUnixSeconds(std::strtod(v.c_str(), nullptr));
      if (!f.since)
        errs.push_back(
            {"since", "must be an RFC 3339 time or decimal Unix seconds, from 1677-09-22 to 2262-04-11"});
    } else
      errs.push_back({k, "unknown filter"});
  }
  if (p.count("id")) f.job = p.at("id");
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid query", errs)));
  bool more = false;
  auto found = c->view().GetFailures(f, &more);
  if (!found.ok()) return respond(ProblemFrom(found.status()));
  Json body = RenderFailures(*found);
  api::SetNextCursor(&body, more, found->empty() ? "" : found->back().id);
  respond(JsonResponse(200, body));
}

}  // namespace api

}  // namespace shepherd
