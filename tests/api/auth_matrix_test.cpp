// The auth matrix: EVERY route of the route table x every role x {no token, wrong token, right token},
// through the real router, handlers and controller (in memory). Expected statuses are written out here from
// the roles docs/security.md gives each route, not read from the route table: 401 without or with a wrong
// token, 403 for a role the route is not given to, 2xx for one it is (restart: 409, no checkpoint qualifies).
#include <gtest/gtest.h>

#include <set>

#include "slurm/jobs.h"
#include "tests/api/api_harness.h"

namespace shepherd::testing {
namespace {

const char* kWrong = "Bearer wrong-token-0123456789";

struct Case {
  std::string method, target;
  Json body;
};

class AuthMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auth_.SetStatic(ParseTokens(R"({"tokens": [
      {"token": "admin-token-0123456789", "role": "admin", "name": "ops"},
      {"token": "operator-token-0123456789", "role": "operator", "name": "oncall"},
      {"token": "submitter-token-0123456789", "role": "submitter", "name": "sam"},
      {"token": "other-submitter-token-0123", "role": "submitter", "name": "kim"},
      {"token": "viewer-token-0123456789", "role": "viewer", "name": "vic"},
      {"token": "agent-n0-token-0123456789", "role": "agent", "node": "n0"},
      {"token": "agent-n1-token-0123456789", "role": "agent", "node": "n1"}]})")
                        .value());
    InstallAuth(&api_.router_, api_.controller_.get(), &auth_);
    for (const char* n : {"n0", "n1"}) {
      ASSERT_EQ(As(Bearer("admin"), "POST", "/v1/nodes", Node(n)).status, 201);
      ASSERT_EQ(As(Bearer(std::string("agent-") + n), "POST", std::string("/v1/nodes/") + n + "/heartbeat",
                   {{"processes", Json::array()}, {"gpu_faults", Json::array()}})
                    .status,
                200);
    }
    job_ = Submit("submitter");
    // The controller minted the credential of the job's first attempt when it placed it.
    rank_token_ = api_.controller_->view().rank_tokens().RankTokenFor(job_, 1, 0).value_or("");
    ASSERT_TRUE(api_.controller_->view().rank_tokens().Lookup(rank_token_));
    // A watched job of sam's bound to Slurm job 4242 (its own node): the Slurm reports route's target. The
    // matrix's rank credential is job_'s, so that route refuses it.
    ASSERT_EQ(As(Bearer("admin"), "POST", "/v1/nodes", Node("x0")).status, 201);
    Json watched = JobBody();
    watched.erase("command");
    watched.erase("env");
    watched["parallelism"]["dp"] = 1;
    watched["resources"]["gpus"] = 1;
    watched["external_id"] = "4242";
    ApiReply w = As(Bearer("submitter"), "POST", "/v1/jobs", watched);
    ASSERT_EQ(w.status, 201) << w.body.dump();
    ASSERT_EQ(w.body["state"], "launching");
  }

  static Json Node(const std::string& id) {
    return {
        {"id", id}, {"hostname", "host-" + id}, {"gpus", 4}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}};
  }
  static Json JobBody() {
    return Json::parse(R"({"name": "a", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
        "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 1, "pp": 1, "dp": 8}, "resources": {"gpus": 8, "gpus_per_node": 4},
        "command": ["python3", "train.py"], "env": {"FOO": "bar"}})");
  }
  std::string Bearer(const std::string& who) {
    if (who == "rank") return "Bearer " + rank_token_;
    if (who == "agent") return "Bearer agent-n0-token-0123456789";
    if (who == "agent-n1") return "Bearer agent-n1-token-0123456789";
    if (who == "agent-n0") return "Bearer agent-n0-token-0123456789";
    if (who == "other-submitter") return "Bearer other-submitter-token-0123";
    return "Bearer " + who + "-token-0123456789";
  }
  std::string Submit(const std::string& who) {
    ApiReply r = As(Bearer(who), "POST", "/v1/jobs", JobBody());
    EXPECT_EQ(r.status, 201) << r.body.dump();
    return r.body.value("id", "");
  }

  ApiReply As(const std::string& authorization, const std::string& method, const std::string& target,
              const Json& body = nullptr) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.request_id = "test";
    if (!authorization.empty()) req.headers.emplace_back("Authorization", authorization);
    if (!body.is_null()) {
      req.body = body.dump();
      req.headers.emplace_back("Content-Type", "application/json");
    }
    ApiReply out;
    api_.router_.Handle(req, [&](HttpResponse res) {
      out.status = res.status;
      out.body = Json::parse(res.body, nullptr, false);
    });
    api_.Drain();
    return out;
  }

  // A request for `rule` with fresh state where the route consumes it (a job to cancel, a node to delete).
  Case Make(const RouteRule& rule) {
    std::string p = rule.pattern;
    auto id = [&](const std::string& v) { p.replace(p.find("{id}"), 4, v); };
    Case c{rule.method, "", nullptr};
    if (p == "/v1/nodes") c.body = Node("n0");
    if (p == "/ui") p = "/ui/";
    if (p == "/ui/{file}") p = "/ui/app.js";
    if (p == "/v1/plan")
      c.body = Json::parse(R"({"model": {"parameters": 1e8, "layers": 4, "hidden": 512, "heads": 8,
          "seq_len": 512}, "training": {"global_batch_size": 32}, "parallelism": {"tp": 1, "pp": 1, "dp": 8},
          "resources": {"gpus": 8, "gpus_per_node": 4}})");
    if (p == "/v1/jobs" && rule.method == "POST") c.body = JobBody();
    if (p == "/v1/simulate") c.body = {{"nodes", 16}, {"days", 1}, {"seeds", 1}};
    if (p.find("/v1/nodes/{id}") == 0) {
      if (rule.method == "DELETE") {
        std::string fresh = "d" + std::to_string(++fresh_);
        EXPECT_EQ(As(Bearer("admin"), "POST", "/v1/nodes", Node(fresh)).status, 201);
        id(fresh);
      } else {
        id("n0");
      }
      if (rule.method == "PATCH") c.body = {{"schedulable", true}};
      if (p.find("/heartbeat") != std::string::npos)
        c.body = {{"processes", Json::array()}, {"gpu_faults", Json::array()}};
      if (p.find("/assignments") != std::string::npos) p += "?version=-1&wait=0";
    }
    if (p.find("/v1/jobs/{id}") == 0) {
      const bool consumes = p.find("/cancel") != std::string::npos || p.find("/restart") != std::string::npos;
      id(consumes ? Submit("submitter") : job_);
      if (p.find("/restart") != std::string::npos) c.body = {{"from", "last-known-good"}};
      if (p.find("/reports") != std::string::npos) c.body = {{"reports", Json::array()}};
      if (p.find("/slurm-order") != std::string::npos) c.body = {{"allocation", "41"}, {"attempt", 1}, {"order", 1}};
    }
    if (p.find("/v1/external/slurm/") ==
        0) {  // bound to sam's job of SetUp; creating: slurm_binding_api_test
      p.replace(p.find("{slurm_job_id}"), 14, "4242");
      c.body = {{"reports", Json::array()}};
    }
    c.target = p;
    return c;
  }

  ApiReply Run(const Case& c, const std::string& authorization) {
    return As(authorization, c.method, c.target, c.body);
  }

  // Slurm shows every job id as a running job of sam's (binding an external id asks it; who may bind
  // which id: slurm_binding_api_test).
  static ApiOptions SlurmShowsSams() {
    ApiOptions o;
    o.show_slurm_job = [](const std::string& id, std::function<void(Result<slurm::SlurmJob>)> done) {
      done(slurm::ParseJob("JobId=" + id + " UserId=sam(1000) JobState=RUNNING NodeList=n0"));
    };
    return o;
  }

  Authenticator auth_;
  ApiHarness api_{ControllerOptions{}, SlurmShowsSams()};
  std::string job_, rank_token_;
  int fresh_ = 0;
};

// The documented roles (docs/security.md, "Roles and the route table"), written out per route (admin,
// operator, submitter, viewer, agent, rank).
const std::map<std::string, std::set<std::string>>& Expected() {
  static const std::set<std::string> people_read = {"admin", "operator", "submitter", "viewer"};
  static const std::map<std::string, std::set<std::string>> m = {
      {"GET /metrics", people_read},
      {"POST /v1/nodes", {"admin", "agent"}},
      {"GET /v1/nodes", people_read},
      {"GET /v1/nodes/{id}", {"admin", "operator", "submitter", "viewer", "agent"}},
      {"PATCH /v1/nodes/{id}", {"admin", "operator"}},
      {"DELETE /v1/nodes/{id}", {"admin"}},
      {"POST /v1/nodes/{id}/unknown-processes/stop", {"admin", "operator"}},
      {"POST /v1/nodes/{id}/heartbeat", {"admin", "agent"}},
      {"GET /v1/nodes/{id}/assignments", {"agent"}},
      {"POST /v1/plan", people_read},
      {"POST /v1/simulate", people_read},
      {"POST /v1/jobs", {"admin", "submitter"}},
      {"GET /v1/jobs", people_read},
      {"GET /v1/jobs/{id}", people_read},
      {"POST /v1/jobs/{id}/cancel", {"admin", "operator", "submitter"}},
      {"POST /v1/jobs/{id}/restart", {"admin", "operator", "submitter"}},
      {"GET /v1/jobs/{id}/placement", people_read},
      {"POST /v1/jobs/{id}/reports", {"admin", "rank"}},
      {"POST /v1/jobs/{id}/slurm-order", {"admin", "rank"}},
      // A submitter for its own job (and creates one); a rank for its own job only (this one is not).
      {"POST /v1/external/slurm/{slurm_job_id}/reports", {"admin", "submitter"}},
      {"GET /v1/jobs/{id}/health", people_read},
      {"GET /v1/jobs/{id}/steps", people_read},
      {"GET /v1/jobs/{id}/checkpoints", people_read},
      {"GET /v1/jobs/{id}/failures", people_read},
      {"GET /v1/failures", people_read},
      {"GET /v1/jobs/{id}/goodput", people_read},
      {"GET /v1/goodput", people_read},
      {"GET /v1/events", people_read},
      {"GET /v1/whoami", {"admin", "operator", "submitter", "viewer", "agent", "rank"}},
  };
  return m;
}

TEST_F(AuthMatrixTest, EveryRouteEveryRoleEveryToken) {
  const std::vector<std::string> roles = {"admin", "operator", "submitter", "viewer", "agent", "rank"};
  std::size_t checked = 0;
  for (const RouteRule& rule : RouteTable()) {
    const std::string name = rule.method + " " + rule.pattern;
    if (rule.is_public) {
      for (const std::string& a : {std::string(), std::string(kWrong), Bearer("viewer")})
        EXPECT_EQ(Run(Make(rule), a).status, 200) << name << " with '" << a << "'";
      continue;
    }
    ASSERT_TRUE(Expected().count(name)) << name << " has no expectation: add it to this test";
    EXPECT_EQ(Run(Make(rule), "").status, 401) << name << " without a token";
    EXPECT_EQ(Run(Make(rule), kWrong).status, 401) << name << " with a wrong token";
    for (const std::string& role : roles) {
      ApiReply r = Run(Make(rule), Bearer(role));
      const bool allowed = Expected().at(name).count(role) > 0;
      if (!allowed) {
        EXPECT_EQ(r.status, 403) << name << " as " << role << ": " << r.body.dump();
      } else if (rule.pattern == "/v1/jobs/{id}/restart") {
        EXPECT_EQ(r.status, 409) << name << " as " << role << ": " << r.body.dump();  // no checkpoint yet
      } else {
        EXPECT_GE(r.status, 200) << name << " as " << role << ": " << r.body.dump();
        EXPECT_LT(r.status, 300) << name << " as " << role << ": " << r.body.dump();
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, Expected().size() * roles.size());
}

TEST_F(AuthMatrixTest, EveryRegisteredRouteIsInTheTable) {
  // The router dispatches from the table: every entry is answered by its handler, bound by RegisterRoutes
  // (never 404/405 for admin).
  for (const RouteRule& rule : RouteTable()) {
    if (rule.is_public) continue;
    Case c = Make(rule);
    int s = Run(c, Bearer(rule.roles.front() == Role::kAgent ? "agent" : "admin")).status;
    EXPECT_NE(s, 404) << rule.method << " " << rule.pattern;
    EXPECT_NE(s, 405) << rule.method << " " << rule.pattern;
  }
}

TEST_F(AuthMatrixTest, UnknownRoutesNeedATokenBeforeTheir404Or405) {
  EXPECT_EQ(As("", "GET", "/v1/nothing").status, 401);
  EXPECT_EQ(As(kWrong, "GET", "/v1/nothing").status, 401);
  EXPECT_EQ(As(Bearer("viewer"), "GET", "/v1/nothing").status, 404);
  EXPECT_EQ(As("", "PUT", "/v1/jobs").status, 401);
  EXPECT_EQ(As(Bearer("viewer"), "PUT", "/v1/jobs").status, 405);
}

// A dashboard's viewer token read every job's env (WANDB_API_KEY and the like). Env values are for the
// job's owner, operators and admins; others see the names.
TEST_F(AuthMatrixTest, EnvValuesAreForTheOwnerOperatorsAndAdmins) {
  std::string sams = Submit("submitter");
  for (const char* who : {"submitter", "operator", "admin"}) {
    EXPECT_EQ(As(Bearer(who), "GET", "/v1/jobs/" + sams).body["spec"]["env"]["FOO"], "bar") << who;
  }
  for (const char* who : {"viewer", "other-submitter"}) {
    EXPECT_EQ(As(Bearer(who), "GET", "/v1/jobs/" + sams).body["spec"]["env"]["FOO"], "<redacted>") << who;
    int with_env = 0;
    const Json list = As(Bearer(who), "GET", "/v1/jobs").body["jobs"];
    for (const Json& j : list)
      for (const auto& [name, value] : j["spec"]["env"].items()) {
        EXPECT_EQ(value, "<redacted>") << who << " " << j["id"] << " " << name;
        ++with_env;
      }
    EXPECT_GT(with_env, 0) << who;
  }
}

// Two Authorization headers: the first used to speak silently. Which credential a request carries is not the
// server's to guess.
TEST_F(AuthMatrixTest, TwoAuthorizationHeadersAre400) {
  HttpRequest req;
  req.method = "GET";
  req.target = "/v1/jobs";
  req.request_id = "test";
  req.headers = {{"Authorization", Bearer("viewer")}, {"authorization", Bearer("admin")}};
  int status = 0;
  api_.router_.Handle(req, [&](HttpResponse res) { status = res.status; });
  api_.Drain();
  EXPECT_EQ(status, 400);
}

TEST_F(AuthMatrixTest, ViewerCannotCancel) {
  EXPECT_EQ(As(Bearer("viewer"), "POST", "/v1/jobs/" + job_ + "/cancel").status, 403);
  EXPECT_EQ(As(Bearer("viewer"), "GET", "/v1/jobs/" + job_).body["state"], "launching");
}

TEST_F(AuthMatrixTest, SubmitterCannotCancelAnothersJobAndTheRecordsNameWhoActed) {
  std::string theirs = Submit("other-submitter");
  EXPECT_EQ(As(Bearer("viewer"), "GET", "/v1/jobs/" + theirs).body["owner"], "kim");
  ApiReply refused = As(Bearer("submitter"), "POST", "/v1/jobs/" + theirs + "/cancel");
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.body["detail"], "job " + theirs + " is not sam's: a submitter may POST /v1/jobs/" +
                                        theirs + "/cancel for its own jobs only");
  EXPECT_EQ(As(Bearer("submitter"), "POST", "/v1/jobs/" + theirs + "/restart", {{"from", "latest"}}).status,
            403);
  EXPECT_EQ(As(Bearer("other-submitter"), "POST", "/v1/jobs/" + theirs + "/cancel").status, 200);
  // The record says who cancelled it, and who forced a restart.
  EXPECT_EQ(As(Bearer("viewer"), "GET", "/v1/jobs/" + theirs).body["reason"], "cancelled by kim (submitter)");
  for (int r = 0; r < 8; ++r) {  // each rank reports its part with its own credential
    Json ckpt =
        Json::array({{{"rank", r}, {"attempt", 1}, {"kind", "checkpoint"}, {"step", 20}, {"path", "/c/20"}}});
    const std::string token = *api_.controller_->view().rank_tokens().RankTokenFor(job_, 1, r);
    ASSERT_EQ(As("Bearer " + token, "POST", "/v1/jobs/" + job_ + "/reports", {{"reports", ckpt}}).status,
              202);
  }
  ApiReply restart = As(Bearer("operator"), "POST", "/v1/jobs/" + job_ + "/restart", {{"from", "latest"}});
  ASSERT_EQ(restart.status, 202) << restart.body.dump();
  Json f = As(Bearer("viewer"), "GET", "/v1/jobs/" + job_ + "/failures").body["failures"];
  ASSERT_EQ(f.size(), 1u) << f.dump();
  EXPECT_EQ(f[0]["detail"], "forced by oncall (operator)");
}

// A watched job's findings cordon or drain the nodes its ranks say they ran on: a submitter's job could name
// any node of the fleet (a tester cordoned another user's node with forged heartbeats). Only an admin's job
// may act on nodes; a submitter's may requeue its own Slurm job or record.
TEST_F(AuthMatrixTest, OnlyAnAdminsJobMayCordonOrDrainNodes) {
  for (const char* fix : {"cordon", "slurm-drain", "hook"}) {
    Json body = JobBody();
    body.erase("command");
    body["policy"] = {{"external_remediation", fix}};
    ApiReply r = As(Bearer("submitter"), "POST", "/v1/jobs", body);
    EXPECT_EQ(r.status, 403) << fix << r.body.dump();
    EXPECT_EQ(r.body["errors"][0]["field"], "policy.external_remediation") << r.body.dump();
    r = As(Bearer("admin"), "POST", "/v1/jobs", body);
    EXPECT_EQ(r.status, 201) << fix << r.body.dump();
    ASSERT_EQ(As(Bearer("admin"), "POST", "/v1/jobs/" + r.body.value("id", "") + "/cancel").status, 200);
  }
  Json requeue = JobBody();
  requeue.erase("command");
  requeue["policy"] = {{"external_remediation", "requeue"}};
  requeue["external_id"] = "4343";
  ApiReply r = As(Bearer("submitter"), "POST", "/v1/jobs", requeue);
  EXPECT_EQ(r.status, 201) << r.body.dump();
}

TEST_F(AuthMatrixTest, RankTokenCannotCancelOrRegisterOrReportForAnotherJob) {
  std::string other = Submit("submitter");
  const std::string rank = Bearer("rank");
  EXPECT_EQ(As(rank, "POST", "/v1/jobs/" + other + "/cancel").status, 403);
  EXPECT_EQ(As(rank, "POST", "/v1/jobs/" + job_ + "/cancel").status, 403);
  EXPECT_EQ(As(rank, "POST", "/v1/nodes", Node("evil")).status, 403);
  EXPECT_EQ(As(rank, "PATCH", "/v1/nodes/n1", {{"schedulable", false}}).status, 403);
  EXPECT_EQ(As(rank, "POST", "/v1/jobs", JobBody()).status, 403);
  EXPECT_EQ(As(rank, "POST", "/v1/jobs/" + other + "/reports", {{"reports", Json::array()}}).status, 403);
  EXPECT_EQ(As(rank, "POST", "/v1/jobs/" + job_ + "/reports", {{"reports", Json::array()}}).status, 202);
  Json wrong_attempt =
      Json::array({{{"rank", 0}, {"attempt", 2}, {"kind", "step"}, {"step", 1}, {"loss", 1.0}}});
  ApiReply r = As(rank, "POST", "/v1/jobs/" + job_ + "/reports", {{"reports", wrong_attempt}});
  EXPECT_EQ(r.status, 403) << "a rank credential names its attempt";
  EXPECT_EQ(r.body["errors"][0]["field"], "reports[0].attempt") << r.body.dump();
  // Rank 0's credential speaks for rank 0 only, also inside a batch that starts with its own report.
  Json other_rank =
      Json::array({{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}},
                   {{"rank", 3}, {"attempt", 1}, {"kind", "step"}, {"step", 1}, {"loss", 1.0}}});
  r = As(rank, "POST", "/v1/jobs/" + job_ + "/reports", {{"reports", other_rank}});
  EXPECT_EQ(r.status, 403) << "a rank credential names its rank";
  EXPECT_EQ(r.body["errors"][0]["field"], "reports[1].rank") << r.body.dump();
  ASSERT_EQ(As(Bearer("admin"), "POST", "/v1/jobs/" + job_ + "/cancel").status, 200);  // the attempt ended
  EXPECT_EQ(As(rank, "POST", "/v1/jobs/" + job_ + "/reports", {{"reports", Json::array()}}).status, 401);
}

TEST_F(AuthMatrixTest, AgentForN1CannotSpeakForN0) {
  const std::string n1 = Bearer("agent-n1");
  Json forged = {{"processes", Json::array()},
                 {"gpu_faults", Json::array({{{"gpu", 0}, {"kind", "ecc"}, {"detail", "forged"}}})}};
  EXPECT_EQ(As(n1, "POST", "/v1/nodes/n0/heartbeat", forged).status, 403);
  EXPECT_EQ(As(n1, "GET", "/v1/nodes/n0/assignments?version=-1&wait=0").status, 403);
  Json reregister = Node("n0");
  reregister["hostname"] = "attacker.example";
  EXPECT_EQ(As(n1, "POST", "/v1/nodes", reregister).status, 403);
  EXPECT_EQ(As(Bearer("viewer"), "GET", "/v1/nodes/n0").body["hostname"], "host-n0");
  Json uncordon = Node("n1");
  uncordon["schedulable"] = true;
  EXPECT_EQ(As(n1, "POST", "/v1/nodes", uncordon).status, 403);  // agents do not lift cordons
}

TEST_F(AuthMatrixTest, LowerCaseBearerIsAccepted) {
  EXPECT_EQ(As("bearer viewer-token-0123456789", "GET", "/v1/jobs").status, 200);
}

TEST_F(AuthMatrixTest, AssignmentsAreForTheNodesOwnAgentOnly) {
  EXPECT_EQ(As(Bearer("admin"), "GET", "/v1/nodes/n0/assignments?version=-1&wait=0").status, 403);
  ASSERT_EQ(As(Bearer("agent-n0"), "POST", "/v1/nodes/n0/heartbeat", {{"processes", Json::array()}}).status,
            200);  // answered after the node's first heartbeat
  EXPECT_EQ(As(Bearer("agent-n0"), "GET", "/v1/nodes/n0/assignments?version=-1&wait=0").status, 200);
}

}  // namespace
}  // namespace shepherd::testing
