// Agent routes (docs/agent-protocol.md) and the forced restart.
#include "api/handlers.h"
#include "api/problem.h"

namespace shepherd {

void RegisterAgentRoutes(Router* router, Controller* c, ApiOptions o, const Clock* clock) {
  router->Add("POST", "/v1/nodes/{id}/heartbeat",
              [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
                if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
                auto body = api::Body(req, o);
                if (!body.ok()) return respond(ProblemFrom(body.status()));
                c->NodeHeartbeat(p.at("id"), *body, [respond](Result<Json> r) { api::Reply(respond, r); });
              });
  router->Add(
      "GET", "/v1/nodes/{id}/assignments",
      [c, o, clock](const HttpRequest& req, const PathParams& p, Respond respond) {
        if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
        auto q = ParseQuery(req.target);
        char* end = nullptr;
        long long version = q.count("version") ? std::strtoll(q["version"].c_str(), &end, 10) : -1;
        double wait = q.count("wait") ? std::strtod(q["wait"].c_str(), &end) : 30;
        if (!(wait >= 0 && wait <= 300))
          return respond(ProblemFrom(InvalidContent("invalid query", {{"wait", "must be 0-300 seconds"}})));
        c->WatchAssignments(p.at("id"), version, clock->Now() + Seconds(wait),
                            [respond](Result<Json> r) { api::Reply(respond, r); });
      });
  router->Add(
      "POST", "/v1/jobs/{id}/restart", [c, o](const HttpRequest& req, const PathParams& p, Respond respond) {
        if (auto r = api::Precheck(req, *c, o, true)) return respond(*r);
        auto body = api::Body(req, o);
        if (!body.ok()) return respond(ProblemFrom(body.status()));
        std::vector<FieldError> errs;
        std::string from = "last-known-good", reason;
        std::vector<std::string> replace;
        if (!body->is_object())
          errs.push_back({"$", "must be an object"});
        else
          for (auto& [k, v] : body->items()) {
            if (k == "from" && v.is_string() && !v.get_ref<const std::string&>().empty())
              from = v;
            else if (k == "reason" && v.is_string())
              reason = v;
            else if (k == "replace_nodes" && v.is_array()) {
              for (const Json& n : v)
                if (n.is_string())
                  replace.push_back(n);
                else
                  errs.push_back({"replace_nodes", "must be an array of node ids"});
            } else
              errs.push_back({k, k == "from" || k == "reason" || k == "replace_nodes" ? "has the wrong type"
                                                                                      : "unknown field"});
          }
        if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid restart request", errs)));
        c->RestartJob(p.at("id"), from, replace, reason,
                      [respond](Result<Json> r) { api::Reply(respond, r, 202); });
      });
}

}  // namespace shepherd
