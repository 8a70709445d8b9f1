// The route table: one entry per route (api/route_table.h). docs/api.md's route list is generated from it
// (scripts/api_routes_table.py --write) and docs/security.md states the same roles in prose.
#include "api/route_table.h"

#include "api/route_handlers.h"

namespace shepherd {
namespace {

constexpr Role A = Role::kAdmin, O = Role::kOperator, S = Role::kSubmitter, V = Role::kViewer,
               G = Role::kAgent, R = Role::kRank;
constexpr RequestClass kPriority = RequestClass::kPriority, kWrite = RequestClass::kWrite,
                       kRead = RequestClass::kRead;

std::vector<RouteRule> Build() {
  return {
      {.method = "GET", .pattern = "/healthz", .is_public = true, .handler = api::Healthz, .queue = kRead,
       .probe = Probe::kLive, .summary = "200 while the process serves"},
      {.method = "GET", .pattern = "/readyz", .is_public = true, .handler = api::Readyz, .queue = kRead,
       .probe = Probe::kReady, .summary = "200 once storage is open and state recovered, 503 before"},
      // The dashboard's static files carry no data: the page asks for a token and calls the API with it.
      {.method = "GET", .pattern = "/ui", .is_public = true, .handler = api::UiIndex, .queue = kRead,
       .summary = "the dashboard (/ui redirects to /ui/, which serves index.html)"},
      {.method = "GET", .pattern = "/ui/{file}", .is_public = true, .handler = api::UiFile, .queue = kRead,
       .summary = "one of the dashboard's files"},
      {.method = "GET", .pattern = "/metrics", .roles = {A, O, S, V}, .handler = api::MetricsText, .queue = kRead,
       .summary = "Prometheus metrics"},
      // Nodes. Registration carries the node id in the body: the handler checks an agent's id against it.
      {.method = "POST", .pattern = "/v1/nodes", .roles = {A, G}, .handler = api::RegisterNode, .queue = kWrite,
       .summary = "register or update a node (an agent: its own node only)"},
      {.method = "GET", .pattern = "/v1/nodes", .roles = {A, O, S, V}, .handler = api::ListNodes, .queue = kRead,
       .summary = "list nodes, filtered and paged"},
      {.method = "GET", .pattern = "/v1/nodes/{id}", .roles = {A, O, S, V, G}, .ownership = {{G, Ownership::kOwnNode}},
       .handler = api::GetNode, .queue = kRead, .summary = "one node"},
      {.method = "PATCH", .pattern = "/v1/nodes/{id}", .roles = {A, O}, .handler = api::PatchNode, .queue = kWrite,
       .summary = "cordon, drain, mark spare, clear a failure"},
      {.method = "DELETE", .pattern = "/v1/nodes/{id}", .roles = {A}, .handler = api::DeleteNode, .queue = kWrite,
       .summary = "remove a node that holds no job"},
      {.method = "POST", .pattern = "/v1/nodes/{id}/unknown-processes/stop", .roles = {A, O},
       .handler = api::StopUnknownProcesses, .queue = kWrite,
       .summary = "have the agent stop processes the daemon has no record of"},
      {.method = "POST", .pattern = "/v1/nodes/{id}/heartbeat", .roles = {A, G}, .ownership = {{G, Ownership::kOwnNode}},
       .handler = api::Heartbeat, .prepare = api::PrepareHeartbeat, .queue = kPriority,
       .summary = "an agent's heartbeat: processes, GPU faults, relayed reports"},
      // Assignments carry the ranks' credentials: only the node's own agent reads them, not even admin. A
      // long poll: it waits in the control thread's queue class, never the reader's.
      {.method = "GET", .pattern = "/v1/nodes/{id}/assignments", .roles = {G}, .ownership = {{G, Ownership::kOwnNode}},
       .handler = api::WatchAssignments, .queue = kWrite,
       .summary = "the ranks an agent runs (long poll on `version`)"},
      // Planning and jobs.
      {.method = "POST", .pattern = "/v1/plan", .roles = {A, O, S, V}, .handler = api::PlanJobRequest, .queue = kWrite,
       .summary = "plan a job without submitting it"},
      {.method = "POST", .pattern = "/v1/simulate", .roles = {A, O, S, V}, .handler = api::RunSimulation,
       .queue = kWrite, .summary = "simulate a run's goodput under faults"},
      {.method = "POST", .pattern = "/v1/jobs", .roles = {A, S}, .handler = api::SubmitJob, .queue = kWrite,
       .summary = "submit a job"},
      {.method = "GET", .pattern = "/v1/jobs", .roles = {A, O, S, V}, .handler = api::ListJobs, .queue = kRead,
       .summary = "list jobs, filtered and paged"},
      {.method = "GET", .pattern = "/v1/jobs/{id}", .roles = {A, O, S, V}, .handler = api::GetJob, .queue = kRead,
       .summary = "one job"},
      {.method = "POST", .pattern = "/v1/jobs/{id}/cancel", .roles = {A, O, S},
       .ownership = {{S, Ownership::kOwnJobSubmitter}}, .handler = api::CancelJob, .queue = kWrite,
       .summary = "cancel a job"},
      {.method = "POST", .pattern = "/v1/jobs/{id}/restart", .roles = {A, O, S},
       .ownership = {{S, Ownership::kOwnJobSubmitter}}, .handler = api::RestartJob, .queue = kWrite,
       .summary = "restart a job from a checkpoint, optionally replacing nodes"},
      {.method = "GET", .pattern = "/v1/jobs/{id}/placement", .roles = {A, O, S, V}, .handler = api::GetPlacement,
       .queue = kRead, .summary = "where a job's ranks run"},
      // Reports and health.
      {.method = "POST", .pattern = "/v1/jobs/{id}/reports", .roles = {A, R}, .ownership = {{R, Ownership::kOwnJob}},
       .handler = api::IngestReports, .queue = kPriority, .summary = "ranks' reports: steps, checkpoints, errors"},
      // Reports of a user's srun job, bound by its SLURM_JOB_ID. Ownership needs the id resolved to a job,
      // so the handler applies it: a rank only for its own job (never creates one), a submitter for its
      // own jobs (and creates the job when none has the id).
      {.method = "POST", .pattern = "/v1/external/slurm/{slurm_job_id}/reports", .roles = {A, S, R},
       .handler = api::IngestSlurmReports, .queue = kPriority,
       .summary = "reports of an srun job, bound by its SLURM_JOB_ID (the first creates the job)"},
      {.method = "GET", .pattern = "/v1/jobs/{id}/health", .roles = {A, O, S, V}, .handler = api::GetHealth,
       .queue = kRead, .summary = "a job's health: ranks, verdicts, findings"},
      {.method = "GET", .pattern = "/v1/jobs/{id}/steps", .roles = {A, O, S, V}, .handler = api::GetSteps,
       .queue = kRead, .summary = "a job's recent steps"},
      {.method = "GET", .pattern = "/v1/jobs/{id}/checkpoints", .roles = {A, O, S, V}, .handler = api::ListCheckpoints,
       .queue = kRead, .summary = "a job's checkpoints, paged"},
      {.method = "GET", .pattern = "/v1/jobs/{id}/failures", .roles = {A, O, S, V}, .handler = api::ListFailures,
       .queue = kRead, .summary = "a job's findings, filtered and paged"},
      {.method = "GET", .pattern = "/v1/failures", .roles = {A, O, S, V}, .handler = api::ListFailures,
       .queue = kRead, .summary = "every job's findings, filtered and paged"},
      // Goodput: where every GPU-hour went (docs/goodput.md).
      {.method = "GET", .pattern = "/v1/jobs/{id}/goodput", .roles = {A, O, S, V}, .handler = api::GetJobGoodput,
       .queue = kRead, .summary = "a job's goodput and checkpoint advice"},
      {.method = "GET", .pattern = "/v1/goodput", .roles = {A, O, S, V}, .handler = api::GetFleetGoodput,
       .queue = kRead, .summary = "the fleet's goodput in a window"},
      // Events of every job and node (docs/events.md).
      {.method = "GET", .pattern = "/v1/events", .roles = {A, O, S, V}, .handler = api::ListEvents, .queue = kRead,
       .summary = "the event log, paged by cursor (long poll with `wait`)"},
      // Who the token speaks for: the dashboard shows write buttons only to roles that may use them.
      {.method = "GET", .pattern = "/v1/whoami", .roles = {A, O, S, V, G, R}, .handler = api::WhoAmI, .queue = kRead,
       .summary = "who the token speaks for"},
  };
}

}  // namespace

const std::vector<RouteRule>& RouteTable() {
  static const std::vector<RouteRule> table = Build();
  return table;
}

}  // namespace shepherd
