// /v1/plan and /v1/jobs routes.
#include "api/goodput_views.h"
#include "api/handlers.h"
#include "api/problem.h"
#include "api/route_handlers.h"
#include "api/views.h"

namespace shepherd {
namespace {

// The plan's checkpoint advice (goodput/plan_advice.h), saying where its save cost and rate came from.
Json PlanAdviceJson(const JobSpec& spec, const PlanEstimate& e, double per_node_hour, bool fleet_rate) {
  PlanAdvice a = AdviseForPlan(spec, e, per_node_hour);
  Json j = ToJson(a.advice);
  j["inputs"]["save_source"] = a.save_estimated ? "estimated" : "given";
  j["inputs"]["rate_source"] = fleet_rate ? "fleet" : "default";
  return j;
}

// 422 for a plan that cannot fit, with the per-GPU breakdown.
HttpResponse DoesNotFit(const PlanEstimate& e) {
  HttpResponse r = Problem(
      422,
      "the plan does not fit in GPU memory: needs " + std::to_string(static_cast<long long>(e.memory.total)) +
          " bytes per GPU, more than the " + std::to_string(static_cast<long long>(e.usable_memory_bytes)) +
          " usable of the GPU's " + std::to_string(static_cast<long long>(e.gpu_memory_bytes)) +
          " (the rest is left to the allocator, the CUDA context and NCCL)",
      {{"parallelism", "does not fit in GPU memory"}});
  Json body = Json::parse(r.body);
  body["plan"] = ToJson(e);
  r.body = body.dump();
  return r;
}

// 429 when the submitter is at its quota of jobs not yet ended.
std::optional<HttpResponse> QuotaRefusal(const Controller& c, const ApiOptions& o, const std::string& owner)
    REQUIRES_SHARED(kControl) {
  const int quota = o.quotas.max_active_jobs_per_submitter;
  if (quota <= 0 || c.view().ActiveJobsOf(owner) < quota) return std::nullopt;
  return api::QuotaReached("max_active_jobs_per_submitter", quota, "active jobs per submitter",
                           "'" + owner + "' has that many jobs not ended; wait for one to end or cancel one");
}

// Whether the plan of `spec` is searched on the planner thread: "parallelism": "auto", or an explicit layout
// that leaves how it runs open (PlanJob searches those). An explicit layout with all of it given is one
// evaluation (microseconds at any size the parser accepts), so it stays on the control thread, in order
// with the requests around it (the first reports of a Slurm job create it exactly once).
bool SearchesOffControl(const ApiOptions& o, const JobSpec& spec) {
  return o.planner != nullptr && (spec.parallelism.automatic || LeavesOpen(spec));
}

// Planner searches one identity may have waiting or running, and all viewers together (a dashboard's
// token): the planner queue holds 16, so neither can keep everyone else's `auto` submits waiting.
constexpr std::size_t kPlannerSearchesPerIdentity = 4, kPlannerSearchesPerViewer = 1,
                      kPlannerSearchesOfViewers = 2;

std::vector<PlanRunner::Share> PlannerShares(const std::optional<Principal>& who) {
  const Role role = who ? who->role : Role::kAdmin;
  const std::string name = who ? who->name : "anonymous";
  if (role == Role::kViewer)
    return {{"viewer:" + name, kPlannerSearchesPerViewer}, {"viewers", kPlannerSearchesOfViewers}};
  return {{std::string(ToString(role)) + ":" + name, kPlannerSearchesPerIdentity}};
}

// Runs `search` on the planner thread, or answers 429 when the planner has as many searches as it holds,
// or the caller as many as its share (PlannerShares).
void OnPlanner(const ApiOptions& o, const HttpRequest& req, const Respond& respond,
               std::function<void()> search) {
  if (o.planner->Run(std::move(search), PlannerShares(req.principal))) return;
  HttpResponse busy = Problem(429,
                              "the planner has as many searches waiting as it holds, or as this caller's "
                              "share of them; retry after the Retry-After delay");
  busy.headers.emplace_back("Retry-After", "1");
  respond(std::move(busy));
}

}  // namespace

namespace api {

void SubmitAs(Controller* c, const ApiOptions& o, const HttpRequest& req, JobSpec spec,
              const Respond& respond, std::function<void(const JobView&)> then) {
  if (Status s = CheckJobPolicy(spec, o.job_policy); !s.ok()) return respond(ProblemFrom(s));
  // Cordoning or draining fleet nodes, or running the site's hook, is not a submitter's to do: a job whose
  // findings would do it needs an admin's token (a submitter's job, or a script holding its
  // token, could otherwise name any node as where its ranks ran).
  const ExternalRemediation fix = spec.policy.external_remediation;
  if (req.principal && req.principal->role != Role::kAdmin &&
      (fix == ExternalRemediation::kCordon || fix == ExternalRemediation::kSlurmDrain ||
       fix == ExternalRemediation::kHook))
    return respond(Problem(403, "this remediation acts on the fleet's nodes: only an admin's job may use it",
                           {{"policy.external_remediation",
                             std::string("\"") + ToString(fix) + "\" needs an admin's token; a " +
                                 ToString(req.principal->role) + "'s job may use \"none\" or \"requeue\""}}));
  // The owner is who submitted it (the submitter's own-job rule for cancel and restart).
  spec.owner = req.principal ? req.principal->name : "";
  if (auto refused = QuotaRefusal(*c, o, spec.owner)) return respond(*refused);
  const Hardware hw = c->view().HardwareFor(spec);
  // Back on the control thread once the search is done: the quota again (other submits may have been
  // admitted meanwhile), then the admission.
  auto admit = [c, o, spec, respond,
                then = std::move(then)](Result<PlanEstimate> est) REQUIRES_SHARED(kControl) mutable {
    if (auto refused = QuotaRefusal(*c, o, spec.owner)) return respond(*refused);
    if (!est.ok()) return respond(ProblemFrom(est.status()));
    if (!est->fits) return respond(DoesNotFit(*est));
    c->SubmitJob(std::move(spec), std::move(est).value(),
                 [respond, then = std::move(then)](Result<JobView> r) {
                   if (!r.ok()) return respond(ProblemFrom(r.status()));
                   then(*r);
                 });
  };
  if (!SearchesOffControl(o, spec)) return admit(PlanJob(spec, hw));
  OnPlanner(o, req, respond, [spec, hw, post = o.post_control, admit = std::move(admit)]() mutable {
    Result<PlanEstimate> est = PlanJob(spec, hw);
    post([est = std::move(est), admit = std::move(admit)]()
             REQUIRES_SHARED(kControl) mutable { admit(std::move(est)); });
  });
}

// A job as `who` may see it: its `env` values (API keys, passwords: where secrets go) only for its owner,
// operators and admins; viewers (a dashboard's token) and other submitters see the names, each value
// "<redacted>".
Json RenderJobFor(const JobView& v, const std::optional<Principal>& who) {
  Json j = RenderJob(v);
  const bool sees = !who || who->role == Role::kAdmin || who->role == Role::kOperator ||
                    (who->role == Role::kSubmitter && who->name == v.job.spec.owner);
  if (!sees)
    for (auto& [name, value] : j["spec"]["env"].items()) value = "<redacted>";
  return j;
}

SHEPHERD_ROUTE_HANDLER(PlanJobRequest) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  auto spec = ParsePlanRequest(body);
  if (!spec.ok()) return respond(ProblemFrom(spec.status()));
  // A plan is answered for what /v1/jobs would admit: the same job policy, the same 422.
  if (Status s = CheckJobPolicy(*spec, o.job_policy); !s.ok()) return respond(ProblemFrom(s));
  const Hardware hw = c->view().HardwareFor(*spec);
  const bool off_control = SearchesOffControl(o, *spec);
  // The answer needs nothing more of the controller: the planner thread sends it.
  const FleetRate rate = FleetRateOf(*c, clock->Now());
  auto search = [spec = std::move(spec).value(), hw, respond, rate] {
    Result<PlanEstimate> est = PlanJob(spec, hw);
    if (!est.ok()) return respond(ProblemFrom(est.status()));
    Json answer = ToJson(*est);
    answer["checkpoint_advice"] = PlanAdviceJson(
        spec, *est, rate.enough ? rate.per_node_hour : kLlama3InterruptionsPerNodeHour, rate.enough);
    respond(JsonResponse(200, std::move(answer)));
  };
  if (!off_control) return search();
  OnPlanner(o, req, respond, std::move(search));
}

SHEPHERD_ROUTE_HANDLER(SubmitJob) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  auto spec = ParseJobSpec(body);
  if (!spec.ok()) return respond(ProblemFrom(spec.status()));
  auto created = [respond](const JobView& v) {
    HttpResponse res = JsonResponse(201, RenderJob(v));
    res.headers.emplace_back("Location", "/v1/jobs/" + v.job.id);
    respond(std::move(res));
  };
  if (spec->external_id.empty()) return api::SubmitAs(c, o, req, std::move(spec).value(), respond, created);
  // An external id binds the Slurm job's reports to this job: Slurm must show the job as the caller's.
  HttpRequest caller;  // what SubmitAs reads of the request, without its body (Slurm may answer later)
  caller.principal = req.principal;
  caller.request_id = req.request_id;
  const std::string id = spec->external_id;
  CheckSlurmBinding(o.show_slurm_job, o.slurm_users, req.principal, id, "external_id", respond,
                    [c, o, caller = std::move(caller), spec = std::move(spec).value(), respond, created]()
                        REQUIRES_SHARED(kControl) mutable {
                          api::SubmitAs(c, o, caller, std::move(spec), respond, created);
                        });
}

SHEPHERD_ROUTE_HANDLER(ListJobs) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  std::optional<JobState> state;
  std::vector<FieldError> errs;
  auto q = ParseQuery(req.target);
  const api::Page page = api::TakePage(&q, &errs);
  if (auto it = q.find("state"); it != q.end()) {
    state = JobStateFromString(it->second);
    if (!state)
      errs.push_back(
          {"state", "must be queued, launching, running, recovering, succeeded, failed or cancelled"});
  }
  std::optional<std::string> external_id;
  if (auto it = q.find("external_id"); it != q.end()) {
    external_id = it->second;
    if (external_id->empty() || external_id->size() > 128)
      errs.push_back({"external_id", "must be 1 to 128 characters"});
  }
  for (const auto& [k, v] : q)
    if (k != "state" && k != "external_id") errs.push_back({k, "unknown filter"});
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid query", errs)));
  bool more = false;
  std::vector<JobView> jobs = c->view().ListJobs(state, page.after, page.limit, &more, external_id);
  Json items = Json::array();
  for (const JobView& v : jobs) items.push_back(api::RenderJobFor(v, req.principal));
  Json body = {{"jobs", std::move(items)}};
  api::SetNextCursor(&body, more, jobs.empty() ? "" : jobs.back().job.id);
  respond(JsonResponse(200, body));
}

SHEPHERD_ROUTE_HANDLER(GetJob) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  api::Reply(respond, c->view().GetJob(p.at("id")),
             [who = req.principal](const JobView& v) { return api::RenderJobFor(v, who); });
}

SHEPHERD_ROUTE_HANDLER(CancelJob) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  c->CancelJob(p.at("id"), Describe(req.principal),
               [respond](Result<JobView> r) { api::Reply(respond, r, RenderJob); });
}

SHEPHERD_ROUTE_HANDLER(GetPlacement) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  auto view = c->view().GetPlacement(p.at("id"));
  if (!view.ok()) return respond(ProblemFrom(view.status()));
  HttpResponse r;
  r.body = RenderPlacement(*view);
  respond(std::move(r));
}

}  // namespace api

}  // namespace shepherd
