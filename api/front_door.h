// FrontDoor: the HttpServer's handler, on the I/O thread. It answers GET /healthz and GET /readyz itself
// (from an atomic readiness flag, never through the control thread, so probes answer whatever the control
// thread is doing). Every other request goes through a bounded RequestQueue in its class
// (api/request_queue.h): reports, heartbeats and writes to the control thread; reads (GET and HEAD, except
// agents' long polls) to the reader thread, which runs the route holding the ControlLock shared
// (control/control_lock.h), so a read never waits in the control thread's queue and never takes the control
// thread's time. A request whose class is full is answered at once: 429 problem+json with Retry-After,
// naming the class.
//
// Test hook (off unless FrontDoorOptions::test_hooks): POST /test/block-control?ms=N queues a write task
// that answers 200 as it begins and then blocks the control thread for N ms (at most 60 s); tests use it
// to show that probes, reads and queue bounds do not depend on the control thread's queue.
//
// Threading: Handle runs on the I/O thread; `ready` is read with acquire; `observe(route, method, status)`
// is called on the I/O thread for every answer the FrontDoor makes itself (probes; 429s with route
// "<class> queue").
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "api/http_server.h"
#include "api/http_types.h"
#include "api/request_queue.h"
#include "api/router.h"
#include "control/control_lock.h"

namespace shepherd {

// Whose body budget a request head draws on (api/http_server.h): heartbeats and reports from agents and
// ranks (or from anyone while auth is off) are kLiveness, viewers' requests kLow, the rest kStandard.
BodyClass BodyClassOf(const std::optional<Principal>& principal, bool auth_enabled, RequestClass c);

struct FrontDoorOptions {
  int retry_after_s = 1;    // the Retry-After of a 429
  bool test_hooks = false;  // POST /test/block-control (tests only; never in production)
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

 private:
  RequestQueue* control_;
  RequestQueue* reads_;
  ControlLock* lock_;
  const Router* router_;
  const std::atomic<bool>* ready_;
  const FrontDoorOptions options_;
  const std::function<void(std::string, std::string, int)> observe_;
};

}  // namespace shepherd
