// Reports, health, checkpoints and failures routes.
#include "api/handlers.h"
#include "api/problem.h"

namespace shepherd {

void RegisterHealthRoutes(Router* router, Controller* c, ApiOptions o) {
  router->Add(
      "POST", "/v1/jobs/{id}/reports", [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
        if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
        auto body = api::Body(req, o);
        if (!body.ok()) return respond(ProblemFrom(body.status()));
        c->IngestReports(p.at("id"), *body, [respond](Result<Json> r) { api::Reply(respond, r, 202); });
      });
  router->Add("GET", "/v1/jobs/{id}/health",
              [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
                if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
                api::Reply(respond, c->GetHealth(p.at("id")));
              });
  router->Add("GET", "/v1/jobs/{id}/checkpoints",
              [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
                if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
                api::Reply(respond, c->GetCheckpoints(p.at("id")));
              });
  auto failures = [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
    if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
    Controller::FailureFilter f;
    std::vector<FieldError> errs;
    for (auto& [k, v] : ParseQuery(req.target)) {
      if (k == "kind")
        f.kind = v;
      else if (k == "job")
        f.job = v;
      else if (k == "since") {
        f.since = ParseRfc3339(v);
        if (!f.since) {
          char* end = nullptr;
          double secs = std::strtod(v.c_str(), &end);
          if (!v.empty() && end && *end == '\0')
            f.since = FromUnixSeconds(secs);
          else
            errs.push_back({"since", "must be RFC 3339 or Unix seconds"});
        }
      } else
        errs.push_back({k, "unknown filter"});
    }
    if (p.count("id")) f.job = p.at("id");
    if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid query", errs)));
    api::Reply(respond, c->GetFailures(f));
  };
  router->Add("GET", "/v1/jobs/{id}/failures", failures);
  router->Add("GET", "/v1/failures", failures);
}

}  // namespace shepherd
