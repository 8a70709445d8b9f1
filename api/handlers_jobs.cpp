// /v1/plan and /v1/jobs routes.
#include "api/handlers.h"
#include "api/problem.h"
#include "api/views.h"

namespace shepherd {
namespace {

// 422 for a plan that cannot fit, with the per-GPU breakdown.
HttpResponse DoesNotFit(const PlanEstimate& e) {
  HttpResponse r = Problem(
      422,
      "the plan does not fit in GPU memory: needs " + std::to_string(static_cast<long long>(e.memory.total)) +
          " bytes per GPU, the GPU has " + std::to_string(static_cast<long long>(e.gpu_memory_bytes)),
      {{"parallelism", "does not fit in GPU memory"}});
  Json body = Json::parse(r.body);
  body["plan"] = ToJson(e);
  r.body = body.dump();
  return r;
}

}  // namespace

namespace api {

void SubmitAs(Controller* c, const ApiOptions& o, const HttpRequest& req, JobSpec spec,
              const Respond& respond, std::function<void(const JobView&)> then) {
  if (Status s = CheckJobPolicy(spec, o.job_policy); !s.ok()) return respond(ProblemFrom(s));
  // The owner is who submitted it (the submitter's own-job rule for cancel and restart).
  spec.owner = req.principal ? req.principal->name : "";
  if (const int quota = o.quotas.max_active_jobs_per_submitter;
      quota > 0 && c->ActiveJobsOf(spec.owner) >= quota)
    return respond(
        QuotaReached("max_active_jobs_per_submitter", quota, "active jobs per submitter",
                     "'" + spec.owner + "' has that many jobs not ended; wait for one to end or cancel one"));
  auto est = c->PlanFor(spec);
  if (!est.ok()) return respond(ProblemFrom(est.status()));
  if (!est->fits) return respond(DoesNotFit(*est));
  c->SubmitJob(std::move(spec), std::move(est).value(), [respond, then = std::move(then)](Result<JobView> r) {
    if (!r.ok()) return respond(ProblemFrom(r.status()));
    then(*r);
  });
}

}  // namespace api

void RegisterJobRoutes(Router* router, Controller* c, ApiOptions o) {
  router->Add("POST", "/v1/plan", [c, o](const HttpRequest& req, const PathParams&, Respond respond) {
    if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
    auto body = api::Body(req, o);
    if (!body.ok()) return respond(ProblemFrom(body.status()));
    auto spec = ParsePlanRequest(*body);
    if (!spec.ok()) return respond(ProblemFrom(spec.status()));
    auto est = c->PlanFor(*spec);
    if (!est.ok()) return respond(ProblemFrom(est.status()));
    respond(JsonResponse(200, ToJson(*est)));
  });
  router->Add("POST", "/v1/jobs", [c, o](const HttpRequest& req, const PathParams&, Respond respond) {
    if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
    auto body = api::Body(req, o);
    if (!body.ok()) return respond(ProblemFrom(body.status()));
    auto spec = ParseJobSpec(*body);
    if (!spec.ok()) return respond(ProblemFrom(spec.status()));
    api::SubmitAs(c, o, req, std::move(spec).value(), respond, [respond](const JobView& v) {
      HttpResponse res = JsonResponse(201, RenderJob(v));
      res.headers.emplace_back("Location", "/v1/jobs/" + v.job.id);
      respond(std::move(res));
    });
  });
  router->Add("GET", "/v1/jobs", [c, o](const HttpRequest& req, const PathParams&, Respond respond) {
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
    std::vector<JobView> jobs = c->ListJobs(state, page.after, page.limit, &more, external_id);
    Json body = RenderJobList(jobs);
    api::SetNextCursor(&body, more, jobs.empty() ? "" : jobs.back().job.id);
    respond(JsonResponse(200, body));
  });
  router->Add("GET", "/v1/jobs/{id}", [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
    if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
    api::Reply(respond, c->GetJob(p.at("id")), RenderJob);
  });
  router->Add("POST", "/v1/jobs/{id}/cancel",
              [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
                if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
                c->CancelJob(p.at("id"), [respond](Result<JobView> r) { api::Reply(respond, r, RenderJob); });
              });
  router->Add("GET", "/v1/jobs/{id}/placement",
              [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
                if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
                auto view = c->GetPlacement(p.at("id"));
                if (!view.ok()) return respond(ProblemFrom(view.status()));
                HttpResponse r;
                r.body = RenderPlacement(*view);
                respond(std::move(r));
              });
}

}  // namespace shepherd
