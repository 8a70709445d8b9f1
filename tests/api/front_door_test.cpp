// FrontDoor without sockets: which queue a request goes to, and that a read runs holding the ControlLock
// shared (so it never runs inside a control-thread operation, and never takes the control thread's time).
// The queues' posts are collected; the test runs them as the two threads would.
#include "api/front_door.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/metrics.h"
#include "api/problem.h"

namespace shepherd {
namespace {

using Posted = std::deque<std::function<void()>>;

void RunAll(Posted* posted) {
  while (!posted->empty()) {
    auto f = std::move(posted->front());
    posted->pop_front();
    f();
  }
}

class FrontDoorTest : public ::testing::Test {
 protected:
  FrontDoorTest() {
    router_.Replace("GET", "/v1/nodes", [this](const HttpRequest&, const PathParams&, Respond respond) {
      // Held shared: the control thread cannot take it, another reader can.
      exclusive_while_reading_ = lock_.try_lock();
      if (exclusive_while_reading_) lock_.unlock();
      shared_while_reading_ = lock_.try_lock_shared();
      if (shared_while_reading_) lock_.unlock_shared();
      respond(JsonResponse(200, {{"read", true}}));
    });
    router_.Replace("POST", "/v1/jobs/{id}/reports",
                [this](const HttpRequest& req, const PathParams&, Respond respond) {
                  parsed_ = req.json;
                  respond(JsonResponse(202, {{"report", true}}));
                });
  }
  HttpResponse Post(FrontDoor& front, const std::string& body) {
    HttpRequest req;
    req.method = "POST";
    req.target = "/v1/jobs/job-1/reports";
    req.headers = {{"Content-Type", "application/json"}};
    req.body = body;
    last_ = HttpResponse{.status = 0};
    front.Handle(std::move(req), [this](HttpResponse r) { last_ = std::move(r); });
    return last_;  // status 0: queued, not answered yet
  }
  void Send(const std::string& method, const std::string& target) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    front_.Handle(std::move(req), [this](HttpResponse r) { answers_.push_back(r.status); });
  }

  Metrics metrics_;
  Router router_{&metrics_};
  ControlLock lock_;
  Posted control_posts_, read_posts_;
  RequestQueue control_{{}, [this](std::function<void()> f) { control_posts_.push_back(std::move(f)); }};
  RequestQueue reads_{{.read = 2}, [this](std::function<void()> f) { read_posts_.push_back(std::move(f)); }};
  std::atomic<bool> ready_{true};
  FrontDoor front_{&control_, &reads_, &lock_, &router_, &ready_, {}};
  std::vector<int> answers_;
  bool exclusive_while_reading_ = true, shared_while_reading_ = false;
  std::shared_ptr<const Json> parsed_;
  HttpResponse last_;
};

TEST_F(FrontDoorTest, ReadsGoToTheReaderHoldingTheLockSharedReportsToTheControlThread) {
  Send("GET", "/v1/nodes?limit=10");
  Send("POST", "/v1/jobs/job-1/reports");
  EXPECT_EQ(reads_.depth(RequestClass::kRead), 1u);
  EXPECT_EQ(control_.depth(RequestClass::kRead), 0u);
  EXPECT_EQ(control_.depth(RequestClass::kPriority), 1u);
  RunAll(&read_posts_);  // the reader thread
  EXPECT_EQ(answers_, std::vector<int>{200});
  EXPECT_FALSE(exclusive_while_reading_);
  EXPECT_TRUE(shared_while_reading_);
  EXPECT_TRUE(lock_.try_lock());  // released after the read
  lock_.unlock();
  RunAll(&control_posts_);
  EXPECT_EQ(answers_, (std::vector<int>{200, 202}));
}

TEST_F(FrontDoorTest, AFullReadQueueIsRefusedWithRetryAfterWhileWritesStillQueue) {
  Send("GET", "/v1/nodes");
  Send("GET", "/v1/nodes");
  HttpResponse refused;
  HttpRequest req;
  req.method = "GET";
  req.target = "/v1/nodes";
  front_.Handle(std::move(req), [&](HttpResponse r) { refused = std::move(r); });
  EXPECT_EQ(refused.status, 429);
  EXPECT_NE(refused.body.find("read"), std::string::npos) << refused.body;
  bool has_retry_after = false;
  for (const auto& [k, v] : refused.headers) has_retry_after = has_retry_after || k == "Retry-After";
  EXPECT_TRUE(has_retry_after);
  Send("POST", "/v1/jobs/job-1/reports");
  EXPECT_EQ(control_.depth(RequestClass::kPriority), 1u);
}

// Heartbeats and reports from agents and ranks draw on the liveness reserve; viewers on the low-role pool;
// a rank's or an agent's other requests, and everyone else's, on the standard one.
TEST(BodyClassOf, LivenessForAgentsAndRanksOnTheirRoutesLowForViewers) {
  auto who = [](Role role) { return std::optional<Principal>(Principal{role, "x", {}, {}, {}}); };
  EXPECT_EQ(BodyClassOf(who(Role::kAgent), true, RequestClass::kPriority), BodyClass::kLiveness);
  EXPECT_EQ(BodyClassOf(who(Role::kRank), true, RequestClass::kPriority), BodyClass::kLiveness);
  EXPECT_EQ(BodyClassOf(who(Role::kAdmin), true, RequestClass::kPriority), BodyClass::kStandard);
  EXPECT_EQ(BodyClassOf(who(Role::kAgent), true, RequestClass::kWrite), BodyClass::kStandard);
  EXPECT_EQ(BodyClassOf(who(Role::kViewer), true, RequestClass::kWrite), BodyClass::kLow);
  EXPECT_EQ(BodyClassOf(who(Role::kSubmitter), true, RequestClass::kWrite), BodyClass::kStandard);
  EXPECT_EQ(BodyClassOf(std::nullopt, true, RequestClass::kWrite), BodyClass::kLow);
  EXPECT_EQ(BodyClassOf(std::nullopt, false, RequestClass::kPriority), BodyClass::kLiveness);
  EXPECT_EQ(BodyClassOf(std::nullopt, false, RequestClass::kWrite), BodyClass::kStandard);
}

}  // namespace
}  // namespace shepherd

namespace shepherd {
namespace {

TEST_F(FrontDoorTest, JsonBodiesAreParsedBeforeQueueingAndBadOnesNeverQueue) {
  // A flat object over the member limit, a repeated key, malformed text: 400 at once, nothing queued.
  std::string flat = "{";
  for (int i = 0; i < 5000; ++i) flat += "\"k" + std::to_string(i) + "\":1,";
  flat += "\"end\":1}";
  for (const std::string& bad : {flat, std::string(R"({"reports": [], "reports": []})"), std::string("{")}) {
    HttpResponse r = Post(front_, bad);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(control_.depth(RequestClass::kPriority), 0u) << bad.substr(0, 40);
  }
  EXPECT_NE(Post(front_, flat).body.find("has more than 4096 members"), std::string::npos);
  // A good one travels parsed; the handler does not parse it again.
  EXPECT_EQ(Post(front_, R"({"reports": [{"rank": 0}]})").status, 0);
  RunAll(&control_posts_);
  ASSERT_NE(parsed_, nullptr);
  EXPECT_EQ((*parsed_)["reports"][0]["rank"], 0);
}

// A route's prepare step runs before the request is queued: its typed value travels with the request, and
// its refusal is answered at once, the handler never run.
TEST(FrontDoorReadyz, ALeaderWhoseTermEndedIsNotReadyAtOnce) {
  Metrics metrics;
  Router router{&metrics};
  ControlLock lock;
  RequestQueue control{{}, [](std::function<void()>) {}};
  RequestQueue reads{{}, [](std::function<void()>) {}};
  std::atomic<bool> ready{true};
  std::atomic<bool> leads{true};
  FrontDoorOptions options;
  options.role = "leader";
  options.leads = [&leads] { return leads.load(); };
  FrontDoor front(&control, &reads, &lock, &router, &ready, options);
  auto readyz = [&] {
    HttpResponse got{.status = 0};
    HttpRequest req;
    req.method = "GET";
    req.target = "/readyz";
    front.Handle(std::move(req), [&got](HttpResponse r) { got = std::move(r); });
    return got;
  };
  HttpResponse r = readyz();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body)["role"], "leader");
  leads = false;  // the term ended; the control thread has not stopped the server yet
  r = readyz();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("leadership lost"), std::string::npos) << r.body;
}

TEST(FrontDoorPrepare, TheRoutesPrepareStepRunsBeforeQueueingAndItsRefusalNeverQueues) {
  Metrics metrics;
  Router router{&metrics};
  std::shared_ptr<const void> seen;
  int handled = 0;
  router.Replace(
      "POST", "/v1/nodes/{id}/heartbeat",
      [&](const HttpRequest& req, const PathParams&, Respond respond) {
        ++handled;
        seen = req.prepared;
        respond(JsonResponse(200, {}));
      },
      [](HttpRequest& req) -> std::optional<HttpResponse> {
        if (!(*req.json)["ok"].get<bool>()) return Problem(422, "refused by prepare");
        req.prepared = std::make_shared<const int>(7);
        return std::nullopt;
      });
  ControlLock lock;
  Posted control_posts, read_posts;
  RequestQueue control{{}, [&](std::function<void()> f) { control_posts.push_back(std::move(f)); }};
  RequestQueue reads{{}, [&](std::function<void()> f) { read_posts.push_back(std::move(f)); }};
  std::atomic<bool> ready{true};
  FrontDoor front{&control, &reads, &lock, &router, &ready, {}};
  std::vector<int> answers;  // every answer, in order (a queued request is answered when it runs)
  auto post = [&](const std::string& body) {
    HttpRequest req;
    req.method = "POST";
    req.target = "/v1/nodes/n0/heartbeat";
    req.headers = {{"Content-Type", "application/json"}};
    req.body = body;
    const std::size_t before = answers.size();
    front.Handle(std::move(req), [&answers](HttpResponse r) { answers.push_back(r.status); });
    return answers.size() > before ? answers.back() : 0;  // 0: queued, not answered yet
  };
  EXPECT_EQ(post(R"({"ok": false})"), 422);
  EXPECT_EQ(control.depth(RequestClass::kPriority) + control.depth(RequestClass::kWrite), 0u);
  EXPECT_EQ(post(R"({"ok": true})"), 0);  // queued
  RunAll(&control_posts);
  EXPECT_EQ(answers, (std::vector<int>{422, 200}));
  EXPECT_EQ(handled, 1);
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(*std::static_pointer_cast<const int>(seen), 7);
}

TEST_F(FrontDoorTest, LargeBodiesAreParsedWhereParseOnRuns) {
  Posted parse_posts;
  FrontDoorOptions options;
  options.inline_parse_bytes = 16;
  options.parse_on = [&parse_posts](std::function<void()> f) { parse_posts.push_back(std::move(f)); };
  FrontDoor front(&control_, &reads_, &lock_, &router_, &ready_, options);
  Post(front, R"({"reports": []})");  // 15 bytes: inline
  EXPECT_EQ(control_.depth(RequestClass::kPriority), 1u);
  EXPECT_TRUE(parse_posts.empty());
  Post(front, R"({"reports": [{"rank": 1}]})");
  EXPECT_EQ(control_.depth(RequestClass::kPriority), 1u);  // waiting for the parser thread
  ASSERT_EQ(parse_posts.size(), 1u);
  RunAll(&parse_posts);
  EXPECT_EQ(control_.depth(RequestClass::kPriority), 2u);
  RunAll(&control_posts_);
  ASSERT_NE(parsed_, nullptr);
  EXPECT_EQ((*parsed_)["reports"][0]["rank"], 1);
}

TEST_F(FrontDoorTest, AfterStopQueuedRequestsAreAnswered503WithoutRunning) {
  Send("POST", "/v1/jobs/job-1/reports");
  Send("GET", "/v1/nodes");
  front_.Stop();
  RunAll(&control_posts_);
  RunAll(&read_posts_);
  EXPECT_EQ(answers_, (std::vector<int>{503, 503}));
  EXPECT_TRUE(shared_while_reading_ == false) << "the read did not run";
}

}  // namespace
}  // namespace shepherd

namespace shepherd {
namespace {

TEST(ControlHoldMetric, HistogramAndLongestHold) {
  Metrics m;
  m.ObserveControlHold(0.002);
  m.ObserveControlHold(0.3);
  m.ObserveControlHold(0.0004);
  const std::string out = m.Exposition("test");
  EXPECT_NE(out.find("shepherd_control_hold_seconds_max 0.29999999999999999\n"), std::string::npos) << out;
  EXPECT_NE(out.find("shepherd_control_hold_seconds_bucket{le=\"0.001\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("shepherd_control_hold_seconds_bucket{le=\"0.005\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("shepherd_control_hold_seconds_bucket{le=\"0.1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("shepherd_control_hold_seconds_bucket{le=\"0.5\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("shepherd_control_hold_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("shepherd_control_hold_seconds_count 3\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace shepherd
