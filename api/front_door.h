// FrontDoor: the HttpServer's handler, on the I/O thread. It answers the probe routes (GET /healthz and GET
// /readyz: RouteRule::probe) itself, from an atomic readiness flag, never through the control thread, so
// probes answer whatever the control thread is doing. Every other request goes through a bounded
// RequestQueue in its route's class (RouteRule::queue, api/request_queue.h): reports, heartbeats and writes
// to the control thread; reads (GET and HEAD, except agents' long polls) to the reader thread, which runs
// the route holding the ControlLock shared (control/control_lock.h), so a read never waits in the control
// thread's queue and never takes the control thread's time. A request whose class is full is answered at
// once: 429 problem+json with Retry-After, naming the class.
//
// A JSON body (Content-Type application/json, not empty) is parsed here, before the request is queued, within
// FrontDoorOptions::json_limits (core/json.h: nesting, members, elements, values, repeated keys): a body
// that does not parse is answered 400 problem+json naming what is wrong and never reaches a queue; one that
// does travels with the request (HttpRequest::json), so handlers on the control thread never parse. Bodies
// up to inline_parse_bytes (every heartbeat, most reports) are parsed on the I/O thread; larger ones on the
// thread `parse_on` posts to, so a few large bodies never hold up the I/O thread's other connections.
//
// Stop(): from then on a request that is still waiting in a queue when its turn comes is answered 503
// (Connection: close) instead of being run, so a shutdown never waits behind a long queue of work no one
// has been answered for yet (none of it was acknowledged).
//
// Test hook (off unless FrontDoorOptions::test_hooks): POST /test/block-control?ms=N queues a write task
// that answers 200 as it begins and then blocks the control thread for N ms (at most 60 s); tests use it
// to show that probes, reads and queue bounds do not depend on the control thread's queue.
//
// Threading: Handle runs on the I/O thread, the parse of a large body on the `parse_on` thread; `ready` is
// read with acquire; `observe(route, method, status)` is called on either for every answer the FrontDoor
// makes itself (probes; 429s with route "<class> queue"; 400s with route "json body"); Stop() is
// thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/http_server.h"
#include "api/http_types.h"
#include "api/request_queue.h"
#include "api/router.h"
#include "control/control_lock.h"
#include "core/json.h"

namespace shepherd {

// Whose body budget a request head draws on (api/http_server.h): heartbeats and reports from agents and
// ranks (or from anyone while auth is off) are kLiveness, viewers' requests kLow, the rest kStandard.
BodyClass BodyClassOf(const std::optional<Principal>& principal, bool auth_enabled, RequestClass c);

struct FrontDoorOptions {
  int retry_after_s = 1;    // the Retry-After of a 429
  bool test_hooks = false;  // POST /test/block-control (tests only; never in production)
  JsonLimits json_limits;   // of request bodies
  std::size_t inline_parse_bytes = 64 * 1024;
  // Runs a function on the thread that parses bodies over inline_parse_bytes (thread-safe); nullptr: the
  // I/O thread parses them too. REQUIRES: that thread runs nothing posted after the FrontDoor is gone.
  std::function<void(std::function<void()>)> parse_on;
  // Named in /readyz's answer ("role") when not empty: a replica over an etcd store says it leads.
  std::string role;
  // A leader's term: when set and false, /readyz answers 503 ("leadership lost") from that moment, before
  // the term's server has stopped, so no prober ever sees two replicas ready as leader. Thread-safe.
  std::function<bool()> leads;
};

class FrontDoor {
 public:
  // `control` runs its tasks on the control thread (which holds `lock` exclusively while it runs them),
  // `reads` on the reader thread. REQUIRES: every pointer outlives the FrontDoor.
  FrontDoor(RequestQueue* control, RequestQueue* reads, ControlLock* lock, const Router* router,
            const std::atomic<bool>* ready, FrontDoorOptions options,
            std::function<void(std::string route, std::string method, int status)> observe = nullptr)
      : control_(control),
        reads_(reads),
        lock_(lock),
        router_(router),
        ready_(ready),
        options_(options),
        observe_(std::move(observe)) {}

  void Handle(HttpRequest request, Respond respond) const;
  void Stop() { stopping_->store(true, std::memory_order_release); }

 private:
  // Parses a JSON body into request->json; false (and `respond` answered 400) when it does not parse.
  bool ParseBody(const RouteRule* route, HttpRequest* request, const Respond& respond) const;
  // Queues the request in its class, or answers 429.
  void Enqueue(RequestClass c, std::shared_ptr<HttpRequest> request, Respond respond) const;
  bool stopping() const { return stopping_->load(std::memory_order_acquire); }

  RequestQueue* control_;
  RequestQueue* reads_;
  ControlLock* lock_;
  const Router* router_;
  const std::atomic<bool>* ready_;
  const FrontDoorOptions options_;
  const std::function<void(std::string, std::string, int)> observe_;
  // Shared with the queued tasks, which may outlive the FrontDoor.
  const std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace shepherd
