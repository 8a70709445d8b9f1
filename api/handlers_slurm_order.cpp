// POST /v1/jobs/{id}/slurm-order: a Slurm step's wrapper asks whether its launch order is still its
// attempt's current one before it runs the rank's command (docs/slurm.md, "One step per attempt";
// slurm/step_order.h). Body {"allocation": "<SLURM_JOB_ID>", "attempt": N, "order": K}; answer
// {"current": true|false}, given once a fenced write made after the decision is durable (a deposed leader
// answers 503). A rank credential asks for its own job and attempt only.
#include "api/handlers.h"
#include "api/route_handlers.h"

namespace shepherd {
namespace api {

SHEPHERD_ROUTE_HANDLER(CheckSlurmOrder) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  if (!body.is_object())
    return respond(ProblemFrom(InvalidContent("invalid body", {{"", "must be an object"}})));
  if (auto unknown = api::RefuseUnknownFields(body, {"allocation", "attempt", "order"}))
    return respond(*unknown);
  std::vector<FieldError> errs;
  std::string allocation;
  int64_t attempt = 0, order = 0;
  auto it = body.find("allocation");
  if (it == body.end() || !it->is_string() || it->get<std::string>().empty() ||
      it->get<std::string>().size() > 64)
    errs.push_back({"allocation", "required: the Slurm job id of the step's allocation (1-64 characters)"});
  else
    allocation = it->get<std::string>();
  it = body.find("attempt");
  if (it == body.end() || !it->is_number_integer() || (attempt = it->get<int64_t>()) < 1 ||
      attempt > 0x7fffffff)
    errs.push_back({"attempt", "required: an attempt number (an integer >= 1)"});
  it = body.find("order");
  if (it == body.end() || !it->is_number_integer() || (order = it->get<int64_t>()) < 1)
    errs.push_back({"order", "required: a launch order (an integer >= 1)"});
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid launch order question", errs)));
  if (const auto& who = req.principal;
      who && who->role == Role::kRank && who->attempt && *who->attempt != attempt)
    return respond(Problem(403,
                           "this rank credential is for attempt " + std::to_string(*who->attempt) +
                               " of job " + who->job.value_or("?"),
                           {{"attempt", "is not the credential's attempt"}}));
  c->CheckSlurmOrder(p.at("id"), allocation, static_cast<int>(attempt), order, [respond](Result<bool> r) {
    if (!r.ok()) return respond(ProblemFrom(r.status()));
    respond(JsonResponse(200, {{"current", *r}}));
  });
}

}  // namespace api
}  // namespace shepherd
