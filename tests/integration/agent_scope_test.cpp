// What a rank gets from its node agent, on the real binaries (daemon and `shepherdd agent`): none of the
// agent's own environment beyond the documented list, its job owner's Unix user (daemon config `run_as`),
// and no credential in the text of its exit that any viewer reads (docs/security.md, "Agents and ranks").
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "core/json.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

Json J(const HttpResult& r) {
  return Json::parse(r.body.empty() ? "null" : r.body, nullptr, false);
}

std::string JobBody(const std::string& script, const std::string& workdir = "") {
  Json job = {
      {"name", "t"},
      {"model", {{"parameters", 1e8}, {"layers", 8}, {"hidden", 1024}, {"heads", 8}, {"seq_len", 1024}}},
      {"training", {{"global_batch_size", 8}}},
      {"parallelism", {{"tp", 1}, {"pp", 1}, {"dp", 1}}},
      {"resources", {{"gpus", 1}}},
      {"command", {"sh", "-c", script}}};
  if (!workdir.empty()) job["env"] = {{"SHEPHERD_WORKDIR", workdir}};
  return job.dump();
}

// A daemon (with `config`, when given) and one real agent (with `agent_args`) attached to it.
struct Node {
  TempDir dir, agent_dir;
  std::optional<Daemon> daemon;
  std::optional<AgentProcess> agent;
  int port = 0;

  // `server`: the agent's --server list, "{}" standing for the daemon's URL; empty: the daemon's URL.
  void Start(const Json& config = Json::object(), std::vector<std::string> agent_args = {},
             std::vector<std::string> daemon_args = {}, std::string server = "") {
    std::string path = dir.path + "/config.json";
    std::ofstream(path) << config.dump();
    daemon_args.insert(daemon_args.begin(), {"--config", path});
    daemon.emplace(dir.path, std::move(daemon_args));
    ASSERT_TRUE(daemon->WaitReady()) << daemon->log();
    port = daemon->port();
    ASSERT_EQ(::chmod(agent_dir.path.c_str(), 0755), 0);  // ranks of other users enter the state dir
    if (std::size_t at = server.find("{}"); at != std::string::npos)
      server.replace(at, 2, "http://127.0.0.1:" + std::to_string(port));
    agent.emplace(port, agent_dir.path, std::move(agent_args), server);
    ASSERT_TRUE(Eventually([&] {
      return J(Http(port, "GET", "/v1/nodes/n1")).value("agent_attached", false);
    })) << agent->log();
  }
  Json Failures() { return J(Http(port, "GET", "/v1/jobs/job-000001/failures")); }
};

// Before, every variable of the agent's environment reached every rank: its proxies, loader settings and
// whatever credentials the node's service manager gave it.
TEST(AgentScope, ARankInheritsNothingOfTheAgentsEnvironmentButTheDocumentedList) {
  ::setenv("SHEPHERD_TEST_AGENT_SECRET", "agent-only-value", 1);
  ::setenv("https_proxy", "http://agent-proxy:3128", 1);
  Node n;
  ASSERT_NO_FATAL_FAILURE(n.Start());
  ::unsetenv("SHEPHERD_TEST_AGENT_SECRET");
  ::unsetenv("https_proxy");
  std::string out = n.dir.path + "/rank-env";
  ASSERT_EQ(Http(n.port, "POST", "/v1/jobs",
                 JobBody("env > " + out + ".tmp && mv " + out + ".tmp " + out + "; exec sleep 300"))
                .status,
            201);
  ASSERT_TRUE(Eventually([&] { return !ReadFile(out).empty(); })) << n.agent->log();
  std::string env = "\n" + ReadFile(out);
  EXPECT_EQ(env.find("agent-only-value"), std::string::npos) << env;
  EXPECT_EQ(env.find("agent-proxy"), std::string::npos) << env;
  EXPECT_NE(env.find("\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"),
            std::string::npos)
      << env;
  EXPECT_NE(env.find("\nSHEPHERD_JOB=job-000001\n"), std::string::npos) << env;  // the assignment's env
}

// Replicated daemon: a rank must learn every replica, not only the one that launched it, to fail over.
TEST(AgentScope, ALaunchedRankGetsEveryReplicasUrl) {
  Node n;
  // Spaces and a trailing '/' are the operator's: the rank gets the list as the clients read it.
  ASSERT_NO_FATAL_FAILURE(n.Start({{"client_urls", " http://10.0.0.1:8080, http://10.0.0.2:8080/"}}));
  std::string out = n.dir.path + "/rank-env";
  ASSERT_EQ(Http(n.port, "POST", "/v1/jobs",
                 JobBody("env > " + out + ".tmp && mv " + out + ".tmp " + out + "; exec sleep 300"))
                .status,
            201);
  ASSERT_TRUE(Eventually([&] { return !ReadFile(out).empty(); })) << n.agent->log();
  std::string env = "\n" + ReadFile(out);
  EXPECT_NE(env.find("\nSHEPHERD_URL=http://10.0.0.1:8080,http://10.0.0.2:8080\n"), std::string::npos) << env;
}

// The real agent with --server listing a dead replica first: it attaches through the second, runs the rank,
// and keeps talking to the replica that answers.
TEST(AgentScope, AnAgentWhoseFirstReplicaIsDeadAttachesThroughTheNext) {
  Node n;
  ASSERT_NO_FATAL_FAILURE(n.Start(Json::object(), {}, {}, "http://127.0.0.1:1,{}"));
  std::string out = n.dir.path + "/rank-env";
  ASSERT_EQ(Http(n.port, "POST", "/v1/jobs",
                 JobBody("env > " + out + ".tmp && mv " + out + ".tmp " + out + "; exec sleep 300"))
                .status,
            201);
  ASSERT_TRUE(Eventually([&] { return !ReadFile(out).empty(); })) << n.agent->log();
  ASSERT_TRUE(Eventually([&] {
    return J(Http(n.port, "GET", "/v1/jobs/job-000001")).value("state", "") == "running";
  })) << n.agent->log();
  const std::string log = n.agent->log();
  EXPECT_NE(log.find("http://127.0.0.1:" + std::to_string(n.port) + " answers now"), std::string::npos)
      << log;
}

// --client-urls overrides the configuration; a bad list is a one-line refusal naming the flag, or the key.
TEST(AgentScope, ClientUrlsAreCheckedAtStartUp) {
  TempDir dir;
  Daemon bad_flag(dir.path, {"--client-urls", "http://a:1,ftp://b:2"});
  EXPECT_EQ(bad_flag.Wait(), 2);
  EXPECT_NE(bad_flag.log().find(
                "--client-urls http://a:1,ftp://b:2: server URL must start with http://: ftp://b:2"),
            std::string::npos)
      << bad_flag.log();
  TempDir dir2;
  std::ofstream(dir2.path + "/config.json") << R"({"client_urls": "http://a:1,,http://b:2"})";
  Daemon bad_key(dir2.path, {"--config", dir2.path + "/config.json"});
  EXPECT_EQ(bad_key.Wait(), 2);
  EXPECT_NE(bad_key.log().find("client_urls"), std::string::npos) << bad_key.log();
  EXPECT_NE(bad_key.log().find("empty entry"), std::string::npos) << bad_key.log();

  // The flag wins over the key; the launched rank's environment says so.
  Node n;
  ASSERT_NO_FATAL_FAILURE(n.Start({{"client_urls", "http://from-config:1"}}, {},
                                  {"--client-urls", "http://r1:8080,http://r2:8080"}));
  std::string out = n.dir.path + "/rank-env";
  ASSERT_EQ(Http(n.port, "POST", "/v1/jobs",
                 JobBody("env > " + out + ".tmp && mv " + out + ".tmp " + out + "; exec sleep 300"))
                .status,
            201);
  ASSERT_TRUE(Eventually([&] { return !ReadFile(out).empty(); })) << n.agent->log();
  EXPECT_NE(("\n" + ReadFile(out)).find("\nSHEPHERD_URL=http://r1:8080,http://r2:8080\n"), std::string::npos);
}

// A rank printed another job's token (read from /proc/*/environ) and the failure's log_tail, readable by
// any viewer, published it.
TEST(AgentScope, ATokenARankPrintsNeverReachesTheFailuresLogTail) {
  Node n;
  ASSERT_NO_FATAL_FAILURE(n.Start());
  const std::string stolen(64, 'd');
  ASSERT_EQ(
      Http(n.port, "POST", "/v1/jobs",
           JobBody("echo 'found SHEPHERD_TOKEN=" + stolen + "'; echo 'Bearer Zm9vYmFyYmF6cXV4eHl6'; exit 3"))
          .status,
      201);
  ASSERT_TRUE(Eventually([&] {
    Json f = n.Failures();
    return f.is_object() && f.contains("failures") && !f["failures"].empty();
  })) << n.agent->log();
  Json failures = n.Failures();
  std::string text = failures.dump();
  EXPECT_EQ(text.find(stolen), std::string::npos) << text;
  EXPECT_EQ(text.find("Zm9vYmFyYmF6cXV4eHl6"), std::string::npos) << text;
  EXPECT_NE(text.find("found SHEPHERD_TOKEN=[redacted]"), std::string::npos) << text;
}

// A Unix user created for one test, removed with it (needs root and useradd).
struct TestUser {
  explicit TestUser(const std::string& base) : name(base + "-" + std::to_string(::getpid() % 100000)) {
    ok = std::system(("useradd -M -N -s /usr/sbin/nologin " + name + " >/dev/null 2>&1").c_str()) == 0;
  }
  ~TestUser() {
    if (ok) (void)!std::system(("userdel " + name + " >/dev/null 2>&1").c_str());
  }
  std::string name;
  bool ok = false;
};

// Ranks of all jobs ran as one user, so one submitter's rank read another job's token from
// /proc/<pid>/environ. The daemon's run_as maps the job's owner to a user; the agent runs the rank as that
// user because it is one of its --run-as users.
TEST(AgentScope, ARankRunsAsTheUserTheDaemonMapsItsOwnerTo) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create users and drop to them";
  TestUser fallback("shtest-rank"), carol("shtest-carol");
  if (!fallback.ok || !carol.ok) GTEST_SKIP() << "useradd is not available";
  Node n;
  ASSERT_NO_FATAL_FAILURE(
      n.Start({{"run_as", {{"*", carol.name}}}}, {"--run-as", fallback.name, "--run-as", carol.name}));
  TempDir out;
  ASSERT_EQ(::chmod(out.path.c_str(), 0777), 0);
  ASSERT_EQ(
      Http(n.port, "POST", "/v1/jobs", JobBody("id -un > " + out.path + "/who; exec sleep 300", "/")).status,
      201);
  Json assignments = J(Http(n.port, "GET", "/v1/nodes/n1/assignments?version=0&wait=0&keep=1"));
  ASSERT_EQ(assignments["ranks"].size(), 1u) << assignments.dump();
  EXPECT_EQ(assignments["ranks"][0]["run_as"], carol.name);
  ASSERT_TRUE(Eventually([&] { return !ReadFile(out.path + "/who").empty(); })) << n.agent->log();
  EXPECT_EQ(ReadFile(out.path + "/who"), carol.name + "\n");
}

TEST(AgentScope, ABadRunAsMappingStopsTheDaemonNamingTheField) {
  TempDir dir;
  std::string path = dir.path + "/config.json";
  std::ofstream(path) << Json{{"run_as", {{"alice", "-rf"}}}}.dump();
  Daemon d(dir.path, {"--config", path});
  EXPECT_EQ(d.Wait(), 2) << d.log();
  EXPECT_NE(d.log().find("run_as.alice"), std::string::npos) << d.log();
}

}  // namespace
}  // namespace shepherd::testing
