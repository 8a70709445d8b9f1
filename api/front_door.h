// FrontDoor: the HttpServer's handler, on the I/O thread. It answers GET /healthz and GET /readyz itself
// (from an atomic readiness flag, never through the control thread, so probes answer whatever the control
// thread is doing), and hands every other request to the control thread through the RequestQueue in its
// class (api/request_queue.h), where the Router runs it. A request whose class is full is answered at once:
// 429 problem+json with Retry-After, naming the class.
//
// Test hook (off unless FrontDoorOptions::test_hooks): POST /test/block-control?ms=N queues a write task
// that answers 200 as it begins and then blocks the control thread for N ms (at most 60 s); tests use it
// to show that probes and queue bounds do not depend on the control thread.
//
// Threading: Handle runs on the I/O thread; `ready` is read with acquire; `observe(route, method, status)`
// is called on the I/O thread for every answer the FrontDoor makes itself (probes; 429s with route
// "<class> queue"), e.g. to post it to the control thread's Metrics.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "api/http_types.h"
#include "api/request_queue.h"
#include "api/router.h"

namespace shepherd {

struct FrontDoorOptions {
  int retry_after_s = 1;    // the Retry-After of a 429
  bool test_hooks = false;  // POST /test/block-control (tests only; never in production)
};

class FrontDoor {
 public:
  // REQUIRES: every pointer outlives the FrontDoor; the router is only used on the control thread.
  FrontDoor(RequestQueue* queue, const Router* router, const std::atomic<bool>* ready,
            FrontDoorOptions options,
            std::function<void(std::string route, std::string method, int status)> observe = nullptr)
      : queue_(queue), router_(router), ready_(ready), options_(options), observe_(std::move(observe)) {}

  void Handle(HttpRequest request, Respond respond) const;

 private:
  RequestQueue* queue_;
  const Router* router_;
  const std::atomic<bool>* ready_;
  const FrontDoorOptions options_;
  const std::function<void(std::string, std::string, int)> observe_;
};

}  // namespace shepherd
