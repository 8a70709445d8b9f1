// POST /v1/external/slurm/{slurm_job_id}/reports: reports of ranks a user started with srun, bound to the
// Shepherd job whose external_id is that SLURM_JOB_ID. When no job that has not ended has it, the first
// report creates one (a watched job of SLURM_NTASKS ranks). Who may do what is decided here, not in the
// route table, because it needs the id resolved to a job (docs/security.md):
//   - a rank credential reports for its own job only and never creates one;
//   - a submitter reports for its own jobs and creates the job as its owner, only for a Slurm job Slurm
//     shows as its own user's (api/slurm_binding.h);
//   - admin (or auth off) for any job.
// Creation needs no lock: handlers run on the control thread and SubmitJob enters the job into the
// external-id index before it returns, so the next report (of 64 arriving together) finds it. Reports that
// waited for Slurm's answer look the id up again once it came.
#include "api/handlers.h"
#include "api/route_handlers.h"
#include "api/views.h"
#include "core/fields.h"

namespace shepherd {
namespace {

bool ValidSlurmJobId(const std::string& id) {
  return !id.empty() && id.size() <= 20 && id.find_first_not_of("0123456789") == std::string::npos;
}

// The envelope's "slurm" object: what the ranks know of their Slurm job. `ntasks` is required only to
// create the job.
struct SlurmEnvelope {
  std::optional<long long> ntasks;  // SLURM_NTASKS
  std::string job_name;             // SLURM_JOB_NAME
  const Json* policy = nullptr;     // the created job's policy (the client's SHEPHERD_POLICY)
};

Result<SlurmEnvelope> ParseSlurmEnvelope(const Json& body) {
  SlurmEnvelope env;
  const Json* slurm = body.is_object() && body.contains("slurm") ? &body["slurm"] : nullptr;
  if (!slurm) return env;
  std::vector<FieldError> errs;
  FieldReader r(*slurm, "slurm", &errs);
  if (!r.ok()) return InvalidContent("invalid slurm envelope", {{"slurm", "must be an object"}});
  r.OnlyKnown({"ntasks", "job_name", "policy"});
  env.ntasks = r.Int("ntasks", false, 1, 1 << 20);
  // Slurm takes names a Shepherd job's name may not have (over 128 characters, control characters such as a
  // tab): the job is named by their start, each control character a space (a refusal left the job
  // unwatched, its ranks' reports all answered 422).
  if (const Json* name = r.Find("job_name"); name && !name->is_string()) {
    errs.push_back({"slurm.job_name", "must be a string"});
  } else if (name) {
    std::string n = Utf8Prefix(name->get_ref<const std::string&>(), 128);
    for (char& ch : n)
      if (HasControlCharacter(std::string_view(&ch, 1))) ch = ' ';
    env.job_name = std::move(n);
  }
  env.policy = r.Find("policy");
  if (!errs.empty()) return InvalidContent("invalid slurm envelope", std::move(errs));
  return env;
}

// The job created from a first report: watched (no command), external_id = the Slurm job id, one rank per
// task. Nothing is planned for a job Shepherd does not launch and no rank says what it trains, so the model
// is a placeholder that fits any GPU, with nothing left for the planner to choose (PlanJob: the job is
// created on the control thread, in order with the reports); the ranks hold one GPU slot each in
// Shepherd's inventory.
Result<JobSpec> CreatedSpec(const std::string& slurm_job_id, const SlurmEnvelope& env) {
  const long long n = *env.ntasks;
  Json spec = {
      {"name", env.job_name.empty() ? "slurm-" + slurm_job_id : env.job_name},
      {"model",
       {{"parameters", 1e6}, {"layers", 1}, {"hidden", 64}, {"heads", 1}, {"seq_len", 64}, {"vocab", 1000}}},
      {"training",
       {{"global_batch_size", n}, {"micro_batch_size", 1}, {"activation_recompute", "selective"}}},
      {"parallelism", {{"tp", 1}, {"pp", 1}, {"dp", n}, {"zero_stage", 0}}},
      {"resources", {{"gpus", n}}},
      {"external_id", slurm_job_id}};
  if (env.policy) spec["policy"] = *env.policy;
  Result<JobSpec> parsed = ParseJobSpec(spec);
  if (parsed.ok()) return parsed;
  // Name the fields as the client sent them.
  std::vector<FieldError> errs = parsed.status().fields();
  for (FieldError& e : errs) e.field = e.field == "name" ? "slurm.job_name" : "slurm." + e.field;
  return InvalidContent(parsed.status().message(), std::move(errs));
}

}  // namespace

namespace api {

SHEPHERD_ROUTE_HANDLER(IngestSlurmReports) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  const std::string& slurm_job_id = p.at("slurm_job_id");
  if (!ValidSlurmJobId(slurm_job_id))
    return respond(ProblemFrom(
        InvalidContent("invalid Slurm job id", {{"slurm_job_id", "must be a SLURM_JOB_ID (digits)"}})));
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  auto batch = ParseReportBatch(body, clock->Now());
  if (!batch.ok()) return respond(ProblemFrom(batch.status()));
  if (auto unknown = api::RefuseUnknownFields(body, {"reports", "slurm"})) return respond(*unknown);
  auto env = ParseSlurmEnvelope(body);
  if (!env.ok()) return respond(ProblemFrom(env.status()));
  if (auto refused = api::CheckRankScope(req, *batch)) return respond(*refused);
  const std::optional<Principal>& who = req.principal;
  const Role role = who ? who->role : Role::kAdmin;
  // Answers the ingest, naming the job the reports went to.
  auto ingest = [c, respond](const std::string& job, bool created, const ReportBatch& reports) {
    c->IngestReports(job, reports, [respond, job, created](Result<IngestSummary> r) {
      if (!r.ok()) return respond(ProblemFrom(r.status()));
      Json out = RenderIngest(*r);
      out["job"] = job;
      out["created"] = created;
      respond(JsonResponse(202, out));
    });
  };
  // Reports for the job bound to the id, if the caller may send them there.
  auto to_bound = [slurm_job_id, who, role, ingest, respond](const Controller::JobRef& bound,
                                                             const ReportBatch& reports) {
    const std::string& id = bound.id;
    const bool allowed = role == Role::kAdmin || (role == Role::kRank && who->job == id) ||
                         (role == Role::kSubmitter && bound.owner == who->name);
    if (!allowed)
      return respond(Problem(403, "job " + id + " (Slurm job " + slurm_job_id + ") is not the caller's"));
    ingest(id, false, reports);
  };
  if (auto bound = c->view().FindExternalJob(slurm_job_id)) return to_bound(*bound, *batch);
  // The ranks of a job that ended here still report: theirs is no new job.
  if (auto ended = c->view().EndedExternalRun(slurm_job_id, *batch)) return respond(Problem(409, *ended));
  if (role == Role::kRank)  // a rank credential is bound to one job: it never creates another
    return respond(Problem(
        403, "no job is bound to Slurm job " + slurm_job_id + ", and a rank credential cannot create one"));
  if (!env->ntasks)
    return respond(ProblemFrom(
        InvalidContent("no job is bound to Slurm job " + slurm_job_id + ": its first report creates it",
                       {{"slurm.ntasks", "is required to create the job (SLURM_NTASKS)"}})));
  auto spec = CreatedSpec(slurm_job_id, *env);
  if (!spec.ok()) return respond(ProblemFrom(spec.status()));
  // Creating binds the id: Slurm must show the job as the caller's. The answer may come later
  // (Slurm is asked off the control thread), when another report may have created the job.
  HttpRequest caller;  // what SubmitAs reads of the request, without its body
  caller.principal = who;
  caller.request_id = req.request_id;
  CheckSlurmBinding(o.show_slurm_job, o.slurm_users, who, slurm_job_id, "slurm_job_id", respond,
                    [c, o, slurm_job_id, caller = std::move(caller), respond, ingest, to_bound,
                     spec = std::move(spec).value(),
                     reports = std::move(batch).value()]() REQUIRES_SHARED(kControl) mutable {
                      if (auto bound = c->view().FindExternalJob(slurm_job_id))
                        return to_bound(*bound, reports);
                      if (auto ended = c->view().EndedExternalRun(slurm_job_id, reports))
                        return respond(Problem(409, *ended));
                      api::SubmitAs(c, o, caller, std::move(spec), respond,
                                    [ingest, reports](const JobView& v) { ingest(v.job.id, true, reports); });
                    });
}

}  // namespace api

}  // namespace shepherd
