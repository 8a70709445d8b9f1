#include "api/front_door.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>

#include "api/problem.h"

namespace shepherd {
namespace {

// A body the FrontDoor parses: not empty (routes that take none may be sent an empty one), of the JSON
// media type (any other is the handler's 415).
bool IsJsonBody(const HttpRequest& r) {
  if (r.body.empty() || r.method == "GET" || r.method == "HEAD") return false;
  std::string ct = r.Header("Content-Type");
  std::string media = ct.substr(0, ct.find(';'));
  while (!media.empty() && media.back() == ' ') media.pop_back();
  for (auto& ch : media) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return media == "application/json";
}

HttpResponse ShuttingDown() {
  HttpResponse r = Problem(503, "the daemon is shutting down; retry against its successor");
  r.close = true;
  return r;
}

}  // namespace

BodyClass BodyClassOf(const std::optional<Principal>& principal, bool auth_enabled, RequestClass c) {
  if (!auth_enabled) return c == RequestClass::kPriority ? BodyClass::kLiveness : BodyClass::kStandard;
  if (!principal) return BodyClass::kLow;
  if (c == RequestClass::kPriority && (principal->role == Role::kAgent || principal->role == Role::kRank))
    return BodyClass::kLiveness;
  return principal->role == Role::kViewer ? BodyClass::kLow : BodyClass::kStandard;
}

void FrontDoor::Handle(HttpRequest request, Respond respond) const {
  const std::string path = PathOf(request.target);
  PathParams params;
  bool known = false;
  const RouteRule* route = FindRouteRule(request.method, path, &params, &known);
  auto answer = [&](const std::string& label, HttpResponse res) {
    if (observe_) observe_(label, request.method, res.status);
    respond(std::move(res));
  };
  if (route && route->probe == Probe::kLive)
    return answer(route->pattern, JsonResponse(200, {{"status", "ok"}}));
  if (route && route->probe == Probe::kReady) {
    if (options_.leads && !options_.leads())
      return answer(route->pattern, ProblemFrom(Unavailable("leadership lost: this replica follows again")));
    if (ready_->load(std::memory_order_acquire)) {
      Json body{{"status", "ready"}};
      if (!options_.role.empty()) body["role"] = options_.role;
      return answer(route->pattern, JsonResponse(200, body));
    }
    return answer(route->pattern, ProblemFrom(Unavailable("storage is not open or state is not recovered")));
  }
  if (options_.test_hooks && request.method == "POST" && path == "/test/block-control") {
    long ms = 0;
    if (auto q = ParseQuery(request.target); q.count("ms")) ms = std::strtol(q["ms"].c_str(), nullptr, 10);
    ms = std::clamp<long>(ms, 0, 60000);
    // Answers as the block begins (the answer goes out on the I/O thread), so the caller knows from then
    // on the control thread is busy for `ms`.
    if (!control_->Offer(RequestClass::kWrite, [ms, respond] {
          respond(JsonResponse(200, {{"blocking_ms", ms}}));
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        }))
      respond(Problem(429, "the write queue is full"));
    return;
  }
  const RequestClass c = QueueOf(route, request.method);
  auto shared = std::make_shared<HttpRequest>(std::move(request));
  if (!IsJsonBody(*shared) || !ready_->load(std::memory_order_acquire))  // not ready: the handler's 503
    return Enqueue(c, std::move(shared), std::move(respond));
  if (shared->body.size() <= options_.inline_parse_bytes || !options_.parse_on) {
    if (ParseBody(route, shared.get(), respond)) Enqueue(c, std::move(shared), std::move(respond));
    return;
  }
  options_.parse_on([this, c, route, shared = std::move(shared), respond = std::move(respond)]() mutable {
    if (stopping()) return respond(ShuttingDown());
    if (ParseBody(route, shared.get(), respond)) Enqueue(c, std::move(shared), std::move(respond));
  });
}

bool FrontDoor::ParseBody(const RouteRule* route, HttpRequest* request, const Respond& respond) const {
  // First the route's own reading of the text, where it has one (the agent heartbeat: the most frequent
  // body at fleet scale, read without building a tree); then, if it did not take the body, the tree.
  if (std::optional<HttpResponse> refused = router_->PrepareText(route, *request)) {
    if (observe_) observe_("prepare", request->method, refused->status);
    respond(std::move(*refused));
    return false;
  }
  if (request->prepared) return true;
  Result<Json> parsed = ParseJsonText(request->body, options_.json_limits);
  if (parsed.ok()) {
    request->json = std::make_shared<const Json>(std::move(parsed).value());
    if (std::optional<HttpResponse> refused = router_->Prepare(route, *request)) {
      if (observe_) observe_("prepare", request->method, refused->status);
      respond(std::move(*refused));
      return false;
    }
    return true;
  }
  if (observe_) observe_("json body", request->method, 400);
  respond(ProblemFrom(parsed.status()));
  return false;
}

void FrontDoor::Enqueue(RequestClass c, std::shared_ptr<HttpRequest> shared, Respond respond) const {
  const std::string method = shared->method;
  // The task owns the only other copy of `respond`; a refused task is dropped unrun, so answering here is
  // the one call.
  const bool offered =
      c == RequestClass::kRead
          ? reads_->Offer(c,
                          [router = router_, lock = lock_, stop = stopping_, shared, respond] {
                            if (stop->load(std::memory_order_acquire)) return respond(ShuttingDown());
                            std::shared_lock hold(*lock);
                            router->Handle(std::move(*shared), respond);
                          })
          : control_->Offer(
                c, [router = router_, stop = stopping_, release = options_.parse_on, shared, respond] {
                  if (stop->load(std::memory_order_acquire)) return respond(ShuttingDown());
                  std::shared_ptr<const Json> body = shared->json;
                  router->Handle(std::move(*shared), respond);
                  // A large parsed body takes milliseconds to free: the parser thread does it.
                  if (release && body && body.use_count() == 1) release([body = std::move(body)] {});
                });
  if (offered) return;
  if (observe_) observe_(std::string(ToString(c)) + " queue", method, 429);
  HttpResponse busy = Problem(
      429, std::string("the daemon's ") + ToString(c) + " queue is full; retry after the Retry-After delay",
      {{"queue", ToString(c)}});
  busy.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_s));
  respond(std::move(busy));
}

}  // namespace shepherd
