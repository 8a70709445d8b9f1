// /v1/nodes routes.
#include "api/handlers.h"
#include "api/problem.h"
#include "api/route_handlers.h"
#include "api/views.h"

namespace shepherd {

namespace api {

SHEPHERD_ROUTE_HANDLER(RegisterNode) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  auto node = ParseNode(body, c->view().levels());
  if (!node.ok()) return respond(ProblemFrom(node.status()));
  const Result<NodeView> stored = c->view().GetNode(node->id);
  if (stored.ok()) KeepOmittedFields(body, stored->node, &*node);
  bool schedulable_given = body.is_object() && body.contains("schedulable");
  // An agent speaks for its own node only, and may not lift a cordon by re-registering.
  if (req.principal && req.principal->role == Role::kAgent) {
    if (req.principal->node != node->id)
      return respond(Problem(403, "this agent's credential is for node " + req.principal->node.value_or("?") +
                                      ", not " + node->id));
    if (schedulable_given) return respond(Problem(403, "an agent may not set schedulable; operators cordon"));
  }
  if (o.quotas.max_nodes > 0 && !stored.ok() &&
      c->view().node_count() >= static_cast<std::size_t>(o.quotas.max_nodes))
    return respond(api::QuotaReached("max_nodes", o.quotas.max_nodes, "nodes",
                                     "node " + node->id + " is not registered"));
  c->UpsertNode(std::move(node).value(), schedulable_given, [respond](Result<NodeUpsert> r) {
    if (!r.ok()) return respond(ProblemFrom(r.status()));
    respond(JsonResponse(r->created ? 201 : 200, RenderNode(r->node)));
  });
}

SHEPHERD_ROUTE_HANDLER(ListNodes) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  NodeFilter f;
  std::vector<FieldError> errs;
  QueryParams query = ParseQuery(req.target);
  const api::Page page = api::TakePage(&query, &errs);
  f.after = page.after;
  f.limit = page.limit;
  for (auto& [k, v] : query) {
    if (k == "state") {
      f.state = NodeStateFromString(v);
      if (!f.state)
        errs.push_back(
            {"state", "must be one of available, allocated, spare, cordoned, failed, draining, drained"});
    } else if (k == "spare") {
      if (v != "true" && v != "false") errs.push_back({"spare", "must be true or false"});
      f.spare = v == "true";
    } else if (k == "nvlink_domain" || std::count(c->view().levels().begin(), c->view().levels().end(), k)) {
      f.topology[k] = v;
    } else {
      errs.push_back({k, "unknown filter"});
    }
  }
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid query", errs)));
  NodeList list = c->view().ListNodes(f);
  Json body = RenderNodeList(list);
  api::SetNextCursor(&body, list.more, list.nodes.empty() ? "" : list.nodes.back().node.id);
  respond(JsonResponse(200, body));
}

SHEPHERD_ROUTE_HANDLER(GetNode) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  api::Reply(respond, c->view().GetNode(p.at("id")), RenderNode);
}

SHEPHERD_ROUTE_HANDLER(PatchNode) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
  auto parsed = api::Body(req, o);
  if (!parsed.ok()) return respond(ProblemFrom(parsed.status()));
  const Json& body = **parsed;
  std::vector<FieldError> errs;
  NodePatch patch;
  if (!body.is_object()) {
    errs.push_back({"$", "must be an object"});
  } else {
    for (auto& [k, v] : body.items()) {
      if ((k == "schedulable" || k == "spare" || k == "failed" || k == "drain") && !v.is_boolean())
        errs.push_back({k, "must be true or false"});
      else if (k == "schedulable")
        patch.schedulable = v.get<bool>();
      else if (k == "spare")
        patch.spare = v.get<bool>();
      else if (k == "failed" && v.get<bool>())
        errs.push_back({k, "only false (clear a failure) is accepted"});
      else if (k == "failed")
        patch.failed = false;
      else if (k == "drain" && !v.get<bool>())
        errs.push_back({k, "only true is accepted; {\"schedulable\": true} lifts a drain"});
      else if (k == "drain")
        patch.drain = true;
      else if (k == "reason")
        patch.reason = api::ReadReason(v, k, &errs);
      else
        errs.push_back({k, "unknown field"});
    }
  }
  if (patch.drain && patch.schedulable == true)
    errs.push_back({"drain", "a drain takes the node out of service: schedulable must not be true"});
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("the patch is invalid", errs)));
  c->PatchNode(p.at("id"), patch, [respond](Result<NodeView> r) { api::Reply(respond, r, RenderNode); });
}

// The operator's decision on processes the daemon has no record of (docs/api.md): the agent stops them.
SHEPHERD_ROUTE_HANDLER(StopUnknownProcesses) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  c->StopUnknownProcesses(p.at("id"), [respond](Result<NodeView> r) { api::Reply(respond, r, RenderNode); });
}

SHEPHERD_ROUTE_HANDLER(DeleteNode) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  c->DeleteNode(p.at("id"), [respond](Result<NodeView> r) { api::Reply(respond, r, RenderNode); });
}

}  // namespace api

}  // namespace shepherd
