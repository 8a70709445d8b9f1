// The REST API (shared/API.md, docs/api.md): routes from HTTP to the Controller. Authentication and the
// route table's role and ownership checks happen in the Router before a handler runs (api/route_table.h);
// each handler then checks and returns early, in this order: readiness -> content type -> parse
// (depth-limited) -> validate (incl. the site's job policy) -> dispatch. Handlers run on the control thread.
#pragma once

#include <string>
#include <vector>

#include "api/metrics.h"
#include "api/router.h"
#include "core/job_policy.h"
#include "daemon/controller.h"

namespace shepherd {

struct ApiOptions {
  std::string version = "0.1.0";
  int max_json_depth = 64;
  JobPolicy job_policy;  // what a submitted job may run (core/job_policy.h)
};

// `clock` turns long-poll waits into deadlines. Also installs the job-owner lookup the route table's
// submitter rule needs (Router::SetAuth keeps `auth`; nullptr: auth off).
void InstallAuth(Router* router, Controller* controller, const Authenticator* auth);
void RegisterRoutes(Router* router, Controller* controller, Metrics* metrics, ApiOptions options,
                    const Clock* clock);

// Shared by handler files.
namespace api {
// Non-null response when the request must be refused before parsing (readiness, content type).
std::optional<HttpResponse> Precheck(const HttpRequest& req, const Controller& c, const ApiOptions& o,
                                     bool needs_body);
// Parses the body as JSON with the depth limit; a 400 problem otherwise.
Result<Json> Body(const HttpRequest& req, const ApiOptions& o);
// Sends `r` as JSON with `ok_status`, or its error as problem+json.
void Reply(const Respond& respond, const Result<Json>& r, int ok_status = 200);
}  // namespace api

}  // namespace shepherd
