// POST /v1/simulate: the run simulator (goodput/simulator.h) on its own thread. A simulation at the input
// bounds takes tens of seconds; on the control thread it would hold up every report and heartbeat, and on
// the planner thread every `auto` submit, so it runs on ApiOptions::simulator, one at a time.
#include "api/handlers.h"
#include "api/route_handlers.h"
#include "api/simulate_json.h"

namespace shepherd {

namespace {

// Simulations one identity may have waiting or running (the runner holds kSimulatorCapacity in all).
constexpr std::size_t kSimulationsPerIdentity = 2;  // 2: the next request of a caller that waited
                                                    // may arrive before the last one is counted off

}  // namespace

namespace api {

SHEPHERD_ROUTE_HANDLER(RunSimulation) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  std::optional<InventoryFleet> fleet;
  if (body.is_object() && body.contains("fleet") && body["fleet"] == "inventory") {
    NodeList all = c->view().ListNodes({});  // the control thread's snapshot; the run sees a copy
    if (static_cast<int64_t>(all.total) > kSimMaxFleetNodes) {
      return respond(ProblemFrom(
          InvalidContent("the inventory is too large to simulate",
                         {{"fleet", "more than " + std::to_string(kSimMaxFleetNodes) + " nodes"}})));
    }
    fleet = InventoryFleet{.levels = c->view().levels()};
    for (NodeView& v : all.nodes) fleet->nodes.push_back(std::move(v.node));
  }
  Result<SimInput> in = ParseSimRequest(body, fleet ? &*fleet : nullptr);
  if (!in.ok()) return respond(ProblemFrom(in.status()));
  auto run = [in = std::move(in).value(), respond, cancel = o.simulation_cancel] {
    Result<SimResult> r = Simulate(in, cancel);
    if (!r.ok()) return respond(ProblemFrom(r.status()));
    respond(JsonResponse(200, ToJson(*r)));
  };
  if (o.simulator == nullptr) return run();
  const std::string who =
      req.principal ? std::string(ToString(req.principal->role)) + ":" + req.principal->name : "anonymous";
  if (o.simulator->Run(std::move(run), {{"simulate:" + who, kSimulationsPerIdentity}})) return;
  HttpResponse busy = Problem(429,
                              "the simulator has as many runs waiting as it holds, or this caller has two "
                              "waiting or running; retry after the Retry-After delay");
  busy.headers.emplace_back("Retry-After", "5");
  respond(std::move(busy));
}

}  // namespace api

}  // namespace shepherd
