// What each credential may say, against the real daemon over real HTTP: a rank's token speaks for that
// rank only, a step far beyond the job's is refused, /v1/plan applies the job policy, and one viewer
// cannot fill the planner's queue (docs/security.md, "Scopes").
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kAgentN0 = "agent-n0-token-0123456789";
constexpr const char* kSubmitter = "submitter-token-0123456789";
constexpr const char* kViewer = "viewer-token-0123456789";

std::string WriteTokens(const std::string& dir) {
  const std::string path = dir + "/tokens.json";
  std::ofstream(path, std::ios::trunc) << R"({"tokens": [
      {"token": ")" << kAdmin << R"(", "role": "admin", "name": "ops"},
      {"token": ")" << kSubmitter << R"(", "role": "submitter", "name": "sam"},
      {"token": ")" << kViewer << R"(", "role": "viewer", "name": "grafana"},
      {"token": ")" << kAgentN0 << R"(", "role": "agent", "node": "n0"}]})";
  ::chmod(path.c_str(), 0600);
  return path;
}

HttpResult As(int port, const std::string& token, const std::string& method, const std::string& target,
              const std::string& body = "") {
  Connection c(port, std::chrono::seconds(110));  // a planner search at the input limits, on a loaded machine
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n";
  if (!body.empty())
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  if (!c.Send(req)) return {};
  return c.Read();
}

std::string FirstField(const HttpResult& r) {
  Json j = Json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("errors") || j["errors"].empty()) return "";
  return j["errors"][0].value("field", "");
}

// A daemon with node n0 (4 GPUs, registered by its agent) running a job of 3 ranks launched by agents,
// and the SHEPHERD_TOKEN each rank's assignment carries.
class RankScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<Daemon>(dir_.path,
                                       std::vector<std::string>{"--tokens-file", WriteTokens(dir_.path)});
    ASSERT_TRUE(daemon_->WaitReady()) << daemon_->log();
    const std::string node =
        R"({"id": "n0", "hostname": "h0", "gpus": 4, "topology": {"spine": "s0", "leaf": "l0"}})";
    ASSERT_EQ(As(port(), kAgentN0, "POST", "/v1/nodes", node).status, 201);
    HttpResult job = As(port(), kAdmin, "POST", "/v1/jobs", R"({"name": "a", "model": {"parameters": 1e8,
        "layers": 4, "hidden": 512, "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 36},
        "parallelism": {"tp": 1, "pp": 1, "dp": 3}, "resources": {"gpus": 3, "gpus_per_node": 3},
        "command": ["/bin/true"]})");
    ASSERT_EQ(job.status, 201) << job.body;
    job_ = Json::parse(job.body)["id"];
    ASSERT_EQ(As(port(), kAgentN0, "POST", "/v1/nodes/n0/heartbeat", "{}").status, 200);
    HttpResult a = As(port(), kAgentN0, "GET", "/v1/nodes/n0/assignments?version=-1&wait=0");
    ASSERT_EQ(a.status, 200) << a.body;
    const Json assignments = Json::parse(a.body);
    for (const Json& r : assignments["ranks"]) tokens_[r["rank"].get<int>()] = r["env"]["SHEPHERD_TOKEN"];
    ASSERT_EQ(tokens_.size(), 3u) << a.body;
  }
  int port() const { return daemon_->port(); }
  HttpResult Report(const std::string& token, const Json& reports) {
    return As(port(), token, "POST", "/v1/jobs/" + job_ + "/reports", Json{{"reports", reports}}.dump());
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  std::string job_;
  std::map<int, std::string> tokens_;
};

// The attack: rank 0's token sent parameter hashes "from" ranks 0-2 that disagree (an SDC verdict), which
// cordoned a healthy node and restarted the job. Each rank now holds its own credential: the batch is
// refused naming the first report of another rank, and nothing is recorded.
TEST_F(RankScopeTest, ARankTokenReportsForItsOwnRankOnly) {
  std::set<std::string> distinct;
  for (const auto& [rank, token] : tokens_) distinct.insert(token);
  EXPECT_EQ(distinct.size(), 3u) << "each rank its own SHEPHERD_TOKEN";
  Json forged = Json::array();
  for (int r = 0; r < 3; ++r)
    forged.push_back({{"rank", r},
                      {"attempt", 1},
                      {"kind", "param_hash"},
                      {"step", 100},
                      {"hash", r == 0 ? "aaaa" : "bbbb"}});
  HttpResult refused = Report(tokens_.at(0), forged);
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(FirstField(refused), "reports[1].rank") << refused.body;
  // Every rank may still report for itself.
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(
        Report(tokens_.at(r), Json::array({{{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}}})).status,
        202);
  EXPECT_EQ(Report(tokens_.at(2), Json::array({{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}}})).status,
            403);
  HttpResult failures = As(port(), kAdmin, "GET", "/v1/jobs/" + job_ + "/failures");
  ASSERT_EQ(failures.status, 200);
  EXPECT_TRUE(Json::parse(failures.body)["failures"].empty()) << failures.body;
  HttpResult job = As(port(), kAdmin, "GET", "/v1/jobs/" + job_);
  EXPECT_EQ(Json::parse(job.body)["attempt"], 1) << job.body;
  HttpResult node = As(port(), kAdmin, "GET", "/v1/nodes/n0");
  EXPECT_EQ(Json::parse(node.body)["schedulable"], true) << node.body;
  // A token edited to name another rank is no credential.
  std::string edited = tokens_.at(0);
  const std::size_t dot = edited.find('.');
  ASSERT_NE(dot, std::string::npos);
  edited.replace(dot + 1, 1, "1");
  EXPECT_EQ(Report(edited, Json::array({{{"rank", 1}, {"attempt", 1}, {"kind", "heartbeat"}}})).status, 401);
}

// A step far beyond the job's (2^53, or a million past the highest any rank reported) is 422 naming it,
// and the job's step does not move.
TEST_F(RankScopeTest, AStepFarBeyondTheJobsIsRefusedAndChangesNothing) {
  auto step = [&](int rank, long long s) {
    return Report(
        tokens_.at(rank),
        Json::array({{{"rank", rank}, {"attempt", 1}, {"kind", "step"}, {"step", s}, {"loss", 2.0}}}));
  };
  ASSERT_EQ(step(0, 10).status, 202);
  for (long long far : {10LL + 1'000'001, 1LL << 53}) {
    HttpResult r = step(1, far);
    EXPECT_EQ(r.status, 422) << far << ": " << r.body;
    EXPECT_EQ(FirstField(r), "reports[0].step") << r.body;
  }
  EXPECT_EQ(step(1, 10 + 1'000'000).status, 202) << "within the bound";
  HttpResult health = As(port(), kAdmin, "GET", "/v1/jobs/" + job_ + "/health");
  ASSERT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(Json::parse(health.body)["checks"]["hang"]["job_step"], 10 + 1'000'000) << health.body;
}

// One rank token held about 10,000 connections. A token naming one rank holds at most
// max_connections_per_rank (16): its oldest idle connections are closed as new ones arrive, the newest keep
// working, and the job's other ranks are not affected.
TEST_F(RankScopeTest, APerRankTokenHoldsSixteenConnections) {
  const std::string request = [&] {
    const std::string body =
        Json{{"reports", Json::array({{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}}})}}.dump();
    return "POST /v1/jobs/" + job_ + "/reports HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
           tokens_.at(0) +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  }();
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < 40; ++i) {
    conns.push_back(std::make_unique<Connection>(port(), std::chrono::seconds(3)));
    ASSERT_TRUE(conns.back()->Send(request)) << i;
    HttpResult r = conns.back()->Read();
    ASSERT_EQ(r.status, 202) << "connection " << i << ": " << r.body;
  }
  int closed = 0;
  while (closed < 24 && conns[closed]->WaitClosed()) ++closed;
  EXPECT_EQ(closed, 24) << "the rank's oldest idle connections are closed beyond its cap of 16";
  for (int i = 24; i < 40; ++i) {
    ASSERT_TRUE(conns[i]->Send(request)) << i;
    EXPECT_EQ(conns[i]->Read().status, 202) << "connection " << i << " is within the cap";
  }
  EXPECT_EQ(Report(tokens_.at(1), Json::array({{{"rank", 1}, {"attempt", 1}, {"kind", "heartbeat"}}})).status,
            202);
}

// The attack: a spec /v1/jobs refuses for the site's policy was planned by /v1/plan all the same.
TEST(Scopes, PlanAppliesTheJobPolicyOfSubmits) {
  TempDir dir;
  Daemon d(dir.path, {"--tokens-file", WriteTokens(dir.path)});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const std::string spec =
      R"({"name": "a", "model": {"parameters": 1e8, "layers": 4, "hidden": 512, "heads": 8,
      "seq_len": 512}, "training": {"global_batch_size": 32}, "parallelism": {"tp": 1, "pp": 1, "dp": 1},
      "resources": {"gpus": 1, "gpus_per_node": 1}, "command": ["/bin/sh", "-c", "id"],
      "env": {"LD_PRELOAD": "/tmp/evil.so"}})";
  HttpResult submitted = As(d.port(), kSubmitter, "POST", "/v1/jobs", spec);
  HttpResult planned = As(d.port(), kSubmitter, "POST", "/v1/plan", spec);
  ASSERT_EQ(submitted.status, 422) << submitted.body;
  EXPECT_EQ(planned.status, 422) << planned.body;
  EXPECT_EQ(Json::parse(planned.body)["errors"], Json::parse(submitted.body)["errors"]) << planned.body;
}

// The attack: a viewer queued 16 long `auto` searches, and everyone's submits waited behind them. A viewer
// holds one place in the planner's queue (all viewers two); its next search is 429 with Retry-After while a
// submitter still gets its own in.
TEST(Scopes, AViewerHoldsOnePlaceInThePlannersQueue) {
  TempDir dir;
  Daemon d(dir.path, {"--tokens-file", WriteTokens(dir.path)});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const Json slow = {{"model",
                      {{"layers", 4096},
                       {"hidden", 4096},
                       {"heads", 32},
                       {"seq_len", 4096},
                       {"moe", {{"experts", 1 << 16}, {"top_k", 8}}}}},
                     {"training", {{"global_batch_size", 1 << 20}}},
                     {"parallelism", "auto"},
                     {"resources", {{"gpus", 1 << 20}}}};
  auto searches = [&] {
    HttpResult m = As(d.port(), kAdmin, "GET", "/metrics");
    const std::string key = "\nshepherd_planner_searches ";
    const std::size_t at = m.body.find(key);
    return at == std::string::npos ? -1.0 : std::stod(m.body.substr(at + key.size()));
  };
  HttpResult first, theirs;
  std::thread viewer([&] { first = As(d.port(), kViewer, "POST", "/v1/plan", slow.dump()); });
  ASSERT_TRUE(Eventually([&] { return searches() == 1; })) << "the search never showed on /metrics";
  HttpResult second = As(d.port(), kViewer, "POST", "/v1/plan", slow.dump());
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_EQ(second.headers["retry-after"], "1");
  const Json quick = {{"model", {{"layers", 4}, {"hidden", 512}, {"heads", 8}, {"seq_len", 512}}},
                      {"training", {{"global_batch_size", 32}}},
                      {"parallelism", "auto"},
                      {"resources", {{"gpus", 8}}}};
  std::thread submitter([&] { theirs = As(d.port(), kSubmitter, "POST", "/v1/plan", quick.dump()); });
  EXPECT_TRUE(Eventually([&] { return searches() == 2; })) << "the submitter's search was not queued";
  viewer.join();
  submitter.join();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(theirs.status, 200) << theirs.body;
}

// The attack: an admin's watched job (no command) with external_remediation "cordon" trusted its ranks'
// `node` field, so a rank holding the job's token named an unrelated node of the fleet and a finding
// cordoned it. Remediation acts only on the nodes the job's launcher lists (here, without --slurm: the
// nodes Shepherd's inventory holds for the job); the finding says what was not done and why.
TEST(Scopes, AWatchedJobsRankCannotGetANodeItDoesNotRunOnCordoned) {
  TempDir dir;
  Daemon d(dir.path, {"--tokens-file", WriteTokens(dir.path)});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const auto node = [](const std::string& id) {
    return Json{{"id", id}, {"gpus", 4}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}.dump();
  };
  for (int n = 0; n < 2; ++n)
    ASSERT_EQ(As(d.port(), kAdmin, "POST", "/v1/nodes", node("n" + std::to_string(n))).status, 201);
  HttpResult created =
      As(d.port(), kAdmin, "POST", "/v1/jobs", R"({"name": "ext", "model": {"parameters": 1e8,
      "layers": 4, "hidden": 512, "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
      "parallelism": {"tp": 1, "pp": 1, "dp": 8}, "resources": {"gpus": 8, "gpus_per_node": 4},
      "policy": {"heartbeat_timeout_s": 600, "startup_grace_s": 600, "external_remediation": "cordon"}})");
  ASSERT_EQ(created.status, 201) << created.body;
  const Json job = Json::parse(created.body);
  const std::string id = job["id"], token = job["rank_token"];
  ASSERT_EQ(As(d.port(), kAdmin, "POST", "/v1/nodes", node("victim")).status, 201);
  std::map<int, std::string> placed;
  const HttpResult placement = As(d.port(), kAdmin, "GET", "/v1/jobs/" + id + "/placement");
  ASSERT_EQ(placement.status, 200) << placement.body;
  const Json ranks = Json::parse(placement.body)["ranks"];
  for (const Json& r : ranks) placed[r["rank"].get<int>()] = r["node"].get<std::string>();
  ASSERT_EQ(placed.size(), 8u) << placement.body;
  ASSERT_NE(placed[6], "victim");

  // Rank 5 names "victim", rank 6 its own node; their parameter hashes are the odd ones out (a majority
  // verdict blames the nodes their ranks reported).
  Json beats = Json::array(), hashes = Json::array();
  for (int r = 0; r < 8; ++r) {
    beats.push_back(
        {{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}, {"node", r == 5 ? "victim" : placed[r]}});
    hashes.push_back({{"rank", r},
                      {"attempt", 1},
                      {"kind", "param_hash"},
                      {"step", 100},
                      {"hash", r == 5 || r == 6 ? "bbbb" : "aaaa"}});
  }
  const std::string reports = "/v1/jobs/" + id + "/reports";
  ASSERT_EQ(As(d.port(), token, "POST", reports, Json{{"reports", beats}}.dump()).status, 202);
  ASSERT_EQ(As(d.port(), token, "POST", reports, Json{{"reports", hashes}}.dump()).status, 202);

  std::string actions;
  ASSERT_TRUE(Eventually([&] {
    HttpResult fs = As(d.port(), kAdmin, "GET", "/v1/jobs/" + id + "/failures");
    Json j = Json::parse(fs.body, nullptr, false);
    actions.clear();
    if (!j.is_object()) return false;
    for (const Json& f : j["failures"])
      for (const Json& a : f["actions"]) actions += a.get<std::string>() + "\n";
    return actions.find("would cordon victim") != std::string::npos;
  })) << actions
      << d.log();
  EXPECT_NE(actions.find("would cordon victim, not done: not among the nodes the job's launcher lists"),
            std::string::npos)
      << actions;
  EXPECT_EQ(Json::parse(As(d.port(), kAdmin, "GET", "/v1/nodes/victim").body)["state"], "available")
      << "a node the job does not run on";
  EXPECT_NE(actions.find("cordon " + placed[6] + " (external_remediation: cordon)"), std::string::npos)
      << actions;
  EXPECT_EQ(Json::parse(As(d.port(), kAdmin, "GET", "/v1/nodes/" + placed[6]).body)["state"], "cordoned");
}

}  // namespace
}  // namespace shepherd::testing
