// The whole API in process: Router + handlers + Controller over an in-memory store and a FakeClock. Requests
// are plain HttpRequest values; store completions are drained after each call, as the io thread would.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "api/handlers.h"
#include "api/router.h"
#include "tests/fakes/fake_clock.h"

namespace shepherd::testing {

struct ApiReply {
  int status = 0;
  Json body;
};

class ApiHarness {
 public:
  explicit ApiHarness(ControllerOptions options = {}, ApiOptions api_options = {})
      : store_(NewMemoryStore()), router_(&metrics_) {
    controller_ = std::make_unique<Controller>(
        store_.get(), &clock_, [this](std::function<void()> f) { posted_.push_back(std::move(f)); },
        std::move(options));
    (void)controller_->Recover();
    Drain();
#ifdef SHEPHERD_TEST_UI_DIR
    api_options.ui_dir = SHEPHERD_TEST_UI_DIR;  // the source tree's dashboard files
#endif
    RegisterRoutes(&router_, controller_.get(), &metrics_, std::move(api_options), &clock_);
  }

  ApiReply Call(const std::string& method, const std::string& target, const Json& body = nullptr) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.request_id = "test";
    if (!body.is_null()) {
      req.body = body.dump();
      req.headers.emplace_back("Content-Type", "application/json");
      // As the FrontDoor: the route's own reading of the text first (the agent heartbeat's, core/json_lite.h),
      // so every test of a route that has one runs through it. A body it refuses goes to the handler as
      // before (the refusals themselves are compared in heartbeat_text_test.cpp).
      HttpRequest text = req;
      if (!router_.PrepareText(text) && text.prepared) req.prepared = text.prepared;
    }
    ApiReply out;
    router_.Handle(req, [&](HttpResponse res) {
      out.status = res.status;
      out.body = res.content_type.rfind("text/plain", 0) == 0 ? Json(res.body) : Json::parse(res.body);
    });
    Drain();
    return out;
  }
  ApiReply Post(const std::string& t, const Json& b) {
    return Call("POST", t, b);
  }
  ApiReply Get(const std::string& t) {
    return Call("GET", t);
  }

  void Drain() {
    while (!posted_.empty()) {
      auto f = std::move(posted_.front());
      posted_.pop_front();
      f();
    }
  }
  void Tick() {
    controller_->Tick();
    Drain();
  }

  FakeClock clock_;
  std::deque<std::function<void()>> posted_;
  std::unique_ptr<Store> store_;
  Metrics metrics_;
  Router router_;
  std::unique_ptr<Controller> controller_;
};

}  // namespace shepherd::testing
