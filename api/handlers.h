// The REST API (shared/API.md, docs/api.md): routes from HTTP to the Controller. Each handler checks and
// returns early, in this order: auth -> readiness -> content type -> parse (depth-limited) -> validate ->
// dispatch. Handlers run on the control thread.
#pragma once

#include <string>
#include <vector>

#include "api/metrics.h"
#include "api/problem.h"
#include "api/router.h"
#include "control/controller.h"

namespace shepherd {

struct ApiOptions {
  std::vector<std::string> tokens;  // when not empty, /v1/* needs "Authorization: Bearer <token>"
  std::string version = SHEPHERD_VERSION;
  int max_json_depth = 64;
};

// `clock` turns long-poll waits into deadlines.
void RegisterRoutes(Router* router, Controller* controller, Metrics* metrics, ApiOptions options,
                    const Clock* clock);

// Shared by handler files.
namespace api {
// Non-null response when the request must be refused before parsing (auth, readiness, content type).
std::optional<HttpResponse> Precheck(const HttpRequest& req, const Controller& c, const ApiOptions& o,
                                     bool needs_body);
// Parses the body as JSON with the depth limit; a 400 problem otherwise.
Result<Json> Body(const HttpRequest& req, const ApiOptions& o);
// Sends `r` as JSON with `ok_status`, or its error as problem+json.
void Reply(const Respond& respond, const Result<Json>& r, int ok_status = 200);
// Sends render(value) as JSON with `ok_status`, or the error as problem+json.
template <typename T, typename Render>
void Reply(const Respond& respond, const Result<T>& r, Render render, int ok_status = 200) {
  if (!r.ok()) return respond(ProblemFrom(r.status()));
  respond(JsonResponse(ok_status, render(*r)));
}
}  // namespace api

}  // namespace shepherd
