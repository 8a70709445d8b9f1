// The REST API (shared/API.md, docs/api.md): routes from HTTP to the Controller. The route table
// (api/route_table.h) names each route's handler (api/route_handlers.h); authentication and the table's role
// and ownership checks happen in the Router before a handler runs; each handler then checks and returns
// early, in this order: readiness -> content type -> parse
// (within JsonLimits; done by the FrontDoor before the request is queued) -> validate (incl. the site's job
// policy) -> dispatch. Handlers run on the control thread; planner searches run on the planner thread
// (ApiOptions::planner).
#pragma once

#include <atomic>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/metrics.h"
#include "api/plan_runner.h"
#include "api/problem.h"
#include "api/router.h"
#include "api/slurm_binding.h"
#include "control/controller.h"
#include "core/job_policy.h"

namespace shepherd {

// Quotas from the configuration; 0 means no limit. Reaching one is 429 problem+json naming it, with
// Retry-After (api::QuotaReached): a submitter's quota frees as its jobs end.
struct Quotas {
  int max_nodes = 0;                      // registered nodes, all together
  int max_active_jobs_per_submitter = 0;  // jobs not yet ended, per submitting principal's name
};

struct ApiOptions {
  std::string version = SHEPHERD_VERSION;
  JsonLimits json_limits;  // of request bodies (core/json.h)
  JobPolicy job_policy;    // what a submitted job may run (core/job_policy.h)
  Quotas quotas;
  // Where planner searches run (POST /v1/plan, submits): off the control thread (api/plan_runner.h).
  // nullptr: inline on the control thread (tests that drive the routes without a daemon).
  PlanRunner* planner = nullptr;
  // Where POST /v1/simulate runs (goodput/simulator.h): a runner of its own, so a long simulation holds up
  // neither the control thread nor planner searches. nullptr: inline (tests without a daemon).
  PlanRunner* simulator = nullptr;
  // Set by the daemon at shutdown: a simulation in progress stops at its next event.
  const std::atomic<bool>* simulation_cancel = nullptr;
  // Posts a function to the control thread, which runs it holding the ControlLock: where a submit goes on
  // once its search is done. Required with `planner`.
  std::function<void(std::function<void()>)> post_control;
  // With --slurm: asks Slurm what it shows of a job (api/slurm_binding.h), so that a caller binds only a
  // Slurm job id that is its own. Empty: the daemon runs without --slurm (only an admin binds).
  ShowSlurmJob show_slurm_job;
  // Token name -> the Unix user it stands for in Slurm ("slurm_users"); names not listed stand for
  // themselves.
  std::map<std::string, std::string> slurm_users;
  // The dashboard's files, served at /ui/ (api/static_files.h); empty: /ui/ answers 503.
  std::string ui_dir;
};

// What every route's handler is given (api/route_table.h): set once by RegisterRoutes, read-only after.
struct ApiContext {
  Controller* controller;
  Metrics* metrics;
  ApiOptions options;
  const Clock* clock;  // turns long-poll waits into deadlines
};

// Installs the job-owner lookup the route table's submitter rule needs (Router::SetAuth keeps `auth`;
// nullptr: auth off).
void InstallAuth(Router* router, Controller* controller, Authenticator* auth);
// Binds the route table's handlers to `controller` (Router::Bind) and the state gauges to `metrics`.
void RegisterRoutes(Router* router, Controller* controller, Metrics* metrics, ApiOptions options,
                    const Clock* clock);

// Shared by handler files.
namespace api {
// Non-null response when the request must be refused before parsing (readiness, content type).
std::optional<HttpResponse> Precheck(const HttpRequest& req, const Controller& c, const ApiOptions& o,
                                     bool needs_body);
// The body as JSON: as the FrontDoor parsed it on the way in (HttpRequest::json), or parsed here within
// o.json_limits (requests that did not come through a FrontDoor); a 400 problem otherwise.
Result<std::shared_ptr<const Json>> Body(const HttpRequest& req, const ApiOptions& o);
// Paging of list routes (docs/api.md, "Pagination"): `limit` in [1, kMaxPageSize] (default
// kDefaultPageSize) and `cursor`, the opaque `next_cursor` of the previous page (the last item's id: items
// come in a stable id order and the next page starts after it). TakePage removes both from `q`; invalid
// values add errors naming `limit` or `cursor`.
constexpr std::size_t kDefaultPageSize = 500;
constexpr std::size_t kMaxPageSize = 1000;
struct Page {
  std::string after;  // "" for the first page
  std::size_t limit = kDefaultPageSize;
};
Page TakePage(QueryParams* q, std::vector<FieldError>* errs);
// 429 naming `quota.<name>` ("at most <limit> <what>"), with Retry-After: kQuotaRetryAfterS.
constexpr int kQuotaRetryAfterS = 30;
HttpResponse QuotaReached(const std::string& name, int limit, const std::string& what,
                          const std::string& why);
// Sets body["next_cursor"]: `last_id` when more items follow, else null.
void SetNextCursor(Json* body, bool more, const std::string& last_id);
// Submits `spec` as the caller's job (owner = the principal's name): the site's job policy, the submitter
// quota, the plan (searched on o.planner; the quota is checked again when the search is done); a refusal
// is sent to `respond`, the job (once durable) goes to `then` on the control thread.
void SubmitAs(Controller* c, const ApiOptions& o, const HttpRequest& req, JobSpec spec,
              const Respond& respond, std::function<void(const JobView&)> then) REQUIRES_SHARED(kControl);
// 422 naming each top-level field of `body` not in `known` (typos must not be ignored); nullopt when all are
// known or `body` is not an object (its parser refuses that).
std::optional<HttpResponse> RefuseUnknownFields(const Json& body, std::initializer_list<const char*> known);
// A free-text `reason` (cordon, restart): a string of at most kMaxReasonChars characters and no control
// characters. Otherwise nullopt and an error naming `field` in `errs`.
constexpr std::size_t kMaxReasonChars = 1024;
std::optional<std::string> ReadReason(const Json& v, const std::string& field, std::vector<FieldError>* errs);
// 403 naming `reports[i].attempt` when a rank credential minted for one attempt posts reports of another
// (an old attempt's ranks cannot report as a new one), or `reports[i].rank` when a per-rank credential
// posts a report of another rank (one rank cannot speak for the job).
std::optional<HttpResponse> CheckRankScope(const HttpRequest& req, const ReportBatch& batch);
// Sends `r` as JSON with `ok_status`, or its error as problem+json.
void Reply(const Respond& respond, const Result<Json>& r, int ok_status = 200);
// Sends render(value) as JSON with `ok_status`, or the error as problem+json.
template <typename T, typename Render>
void Reply(const Respond& respond, const Result<T>& r, Render render, int ok_status = 200) {
  if (!r.ok()) return respond(ProblemFrom(r.status()));
  respond(JsonResponse(ok_status, render(*r)));
}
}  // namespace api

}  // namespace shepherd
