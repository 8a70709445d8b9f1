// The named handler functions the route table (api/route_table.cpp) dispatches to, one per route (the two
// failures routes share one), grouped by the file that defines them. Each runs where its route's `queue`
// says (api/route_table.h) and checks, in order: readiness -> content type -> parse -> validate ->
// dispatch (api/handlers.h).
#pragma once

#include "api/route_table.h"
#include "control/control_lock.h"

namespace shepherd::api {

// Every handler runs holding the ControlLock: exclusively on the control thread, shared on the reader thread
// (api/front_door.h); the clang thread-safety analysis checks its body against that (REQUIRES_SHARED).
#define SHEPHERD_ROUTE_HANDLER(name)                                                             \
  void name(const ApiContext& ctx, const HttpRequest& req, const PathParams& p, Respond respond) \
      REQUIRES_SHARED(kControl)

// handlers.cpp: the service routes and the dashboard's files.
SHEPHERD_ROUTE_HANDLER(Healthz);
SHEPHERD_ROUTE_HANDLER(Readyz);
SHEPHERD_ROUTE_HANDLER(MetricsText);
SHEPHERD_ROUTE_HANDLER(WhoAmI);
SHEPHERD_ROUTE_HANDLER(UiIndex);
SHEPHERD_ROUTE_HANDLER(UiFile);
// handlers_nodes.cpp
SHEPHERD_ROUTE_HANDLER(RegisterNode);
SHEPHERD_ROUTE_HANDLER(ListNodes);
SHEPHERD_ROUTE_HANDLER(GetNode);
SHEPHERD_ROUTE_HANDLER(PatchNode);
SHEPHERD_ROUTE_HANDLER(DeleteNode);
SHEPHERD_ROUTE_HANDLER(StopUnknownProcesses);
// handlers_agents.cpp
SHEPHERD_ROUTE_HANDLER(Heartbeat);
std::optional<HttpResponse> PrepareHeartbeat(const ApiContext& ctx, HttpRequest& req);
std::optional<HttpResponse> PrepareHeartbeatText(const ApiContext& ctx, HttpRequest& req);
SHEPHERD_ROUTE_HANDLER(WatchAssignments);
SHEPHERD_ROUTE_HANDLER(RestartJob);
// handlers_jobs.cpp
SHEPHERD_ROUTE_HANDLER(PlanJobRequest);
SHEPHERD_ROUTE_HANDLER(SubmitJob);
SHEPHERD_ROUTE_HANDLER(ListJobs);
SHEPHERD_ROUTE_HANDLER(GetJob);
SHEPHERD_ROUTE_HANDLER(CancelJob);
SHEPHERD_ROUTE_HANDLER(CheckSlurmOrder);  // handlers_slurm_order.cpp
SHEPHERD_ROUTE_HANDLER(GetPlacement);
// handlers_health.cpp
SHEPHERD_ROUTE_HANDLER(IngestReports);
SHEPHERD_ROUTE_HANDLER(GetHealth);
SHEPHERD_ROUTE_HANDLER(GetSteps);
SHEPHERD_ROUTE_HANDLER(ListCheckpoints);
SHEPHERD_ROUTE_HANDLER(ListFailures);  // of one job ({id}) or of all
// handlers_external.cpp
SHEPHERD_ROUTE_HANDLER(IngestSlurmReports);
// handlers_events.cpp
SHEPHERD_ROUTE_HANDLER(ListEvents);
// handlers_simulate.cpp
SHEPHERD_ROUTE_HANDLER(RunSimulation);
// handlers_goodput.cpp
SHEPHERD_ROUTE_HANDLER(GetJobGoodput);
SHEPHERD_ROUTE_HANDLER(GetFleetGoodput);

}  // namespace shepherd::api
