// /metrics as Prometheus sees it: the real shepherdd on port 0 with an inventory and a job whose rank goes
// silent (heartbeat_lost, a restart), scraped every second by Debian's real /usr/bin/prometheus with a viewer
// token as its bearer token; PromQL over Prometheus's HTTP API must return the job's attempt, the spare
// pool and the restart by its cause. And the example Grafana dashboard names only series a scrape has.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kViewer = "viewer-token-0123456789";

std::string WriteFile(const std::string& path, const std::string& text, mode_t mode = 0600) {
  { std::ofstream(path, std::ios::trunc) << text; }
  ::chmod(path.c_str(), mode);
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One GET: the body of a 200, else empty. Content-Length framing (Prometheus gives its small API answers
// one; nothing here is chunked).
std::string Get(int port, const std::string& target, const std::string& token = "") {
  Connection c(port, std::chrono::seconds(10));
  if (!c.ok()) return "";
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (!c.Send(req + "\r\n")) return "";
  HttpResult r = c.Read();
  return r.status == 200 ? r.body : "";
}

HttpResult Post(int port, const std::string& target, const std::string& body) {
  Connection c(port);
  std::string req = "POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kAdmin +
                    "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\n\r\n" + body;
  if (!c.Send(req)) return {};
  return c.Read();
}

// A port nothing listens on now (bound and released): Prometheus is told to listen there.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string UrlEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

// A child process killed (and reaped) when the test ends, whatever happens.
struct Child {
  pid_t pid = -1;
  ~Child() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

// The instant vector of `query`: labels (one chosen label's value, "" for none) → value. Empty while
// Prometheus has no answer.
std::map<std::string, double> Query(int port, const std::string& query, const std::string& by = "") {
  std::map<std::string, double> out;
  const std::string body = Get(port, "/api/v1/query?query=" + UrlEncode(query));
  if (body.empty()) return out;
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return out;
  for (const Json& r : j["data"]["result"]) {
    const std::string key = by.empty() ? "" : r["metric"].value(by, "");
    out[key] = std::stod(r["value"][1].get<std::string>());
  }
  return out;
}

std::string Tokens() {
  return std::string(R"({"tokens": [{"token": ")") + kAdmin + R"(", "role": "admin", "name": "ops"},
      {"token": ")" +
         kViewer + R"(", "role": "viewer", "name": "prometheus"}]})";
}

// Registers one 2-GPU node for the job and two 1-GPU spares (too small for its 2 ranks per node, so a
// restart stays on n0 and the spare pool stays 2), submits a 2-rank job and lets rank 1 fall silent: after
// the grace it is lost (heartbeat_lost) and recovery restarts the job (attempt 2, launching until its ranks
// report again). Returns the job's id; "" (with a test failure) when something went wrong.
std::string StartJobThatRestarts(const Daemon& d) {
  EXPECT_EQ(
      Post(d.port(), "/v1/nodes", R"({"id": "n0", "gpus": 2, "topology": {"spine": "s0", "leaf": "l0"}})")
          .status,
      201);
  for (const char* s : {"s0", "s1"})
    EXPECT_EQ(Post(d.port(), "/v1/nodes",
                   std::string(R"({"id": ")") + s +
                       R"(", "gpus": 1, "spare": true, "topology": {"spine": "s0", "leaf": "l0"}})")
                  .status,
              201);
  HttpResult job = Post(d.port(), "/v1/jobs", R"({"name": "prom", "model": {"parameters": 1e6,
      "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000}, "training": {"global_batch_size": 8},
      "parallelism": {"tp": 1, "pp": 1, "dp": 2}, "resources": {"gpus": 2, "gpus_per_node": 2},
      "command": ["python3", "train.py"],
      "policy": {"heartbeat_interval_s": 0.1, "heartbeat_timeout_s": 0.5, "startup_grace_s": 0.5,
                 "restart_backoff_s": 0, "launch_timeout_s": 3600}})");
  EXPECT_EQ(job.status, 201) << job.body;
  if (job.status != 201) return "";
  const std::string id = Json::parse(job.body)["id"];
  EXPECT_EQ(Post(d.port(), "/v1/jobs/" + id + "/reports",
                 R"({"reports": [{"rank": 0, "attempt": 1, "kind": "step", "step": 7, "step_time_s": 0.25,
                     "loss": 2.0, "node": "n0"}]})")
                .status,
            202);
  const bool restarted = Eventually([&] {
    Json j = Json::parse(Get(d.port(), "/v1/jobs/" + id, kViewer), nullptr, false);
    return j.is_object() && j.value("attempt", 0) == 2;
  });
  EXPECT_TRUE(restarted) << d.log();
  return restarted ? id : "";
}

TEST(PrometheusScrape, PromQlSeesTheJobsAttemptSparesAndRestartsByCause) {
  ASSERT_EQ(::access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: install Debian's prometheus (scripts/dev.sh deps)";
  TempDir dir;
  WriteFile(dir.path + "/config.json", R"({"tick_interval_s": 0.05})", 0644);
  Daemon d(dir.path, {"--tokens-file", WriteFile(dir.path + "/tokens.json", Tokens()), "--config",
                      dir.path + "/config.json"});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const std::string id = StartJobThatRestarts(d);
  ASSERT_FALSE(id.empty());

  const int prom_port = FreePort();
  ASSERT_GT(prom_port, 0);
  WriteFile(dir.path + "/viewer.token", kViewer);
  const std::string target = "'127.0.0.1:" + std::to_string(d.port()) + "'";
  WriteFile(dir.path + "/prometheus.yml",
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
            "  - job_name: shepherd\n    scrape_interval: 1s\n    honor_labels: true\n"
            "    authorization:\n      type: Bearer\n"
            "      credentials_file: " +
                dir.path + "/viewer.token\n    static_configs:\n      - targets: [" + target +
                "]\n"
                "  - job_name: shepherd_no_token\n    scrape_interval: 1s\n    static_configs:\n"
                "      - targets: [" +
                target + "]\n",
            0644);
  Child prom;
  prom.pid = SpawnWithLog({kPrometheus, "--config.file=" + dir.path + "/prometheus.yml",
                           "--storage.tsdb.path=" + dir.path + "/tsdb",
                           "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"},
                          dir.path + "/prometheus.log");
  ASSERT_GT(prom.pid, 0);

  const std::string job_sel = "{job=\"" + id + "\"}";
  std::map<std::string, double> attempt, spares, restarts, up, up_no_token, state;
  const bool seen = Eventually(
      [&] {
        attempt = Query(prom_port, "shepherd_job_attempt" + job_sel);
        spares = Query(prom_port, "shepherd_nodes{state=\"spare\"}");
        restarts = Query(prom_port, "sum by (cause) (shepherd_job_restarts_total" + job_sel + ")", "cause");
        up = Query(prom_port, "up{job=\"shepherd\"}");
        up_no_token = Query(prom_port, "up{job=\"shepherd_no_token\"}");
        state = Query(prom_port, "shepherd_job_state" + job_sel, "state");
        return attempt[""] == 2 && spares[""] == 2 && restarts["heartbeat_lost"] == 1 && up[""] == 1 &&
               up_no_token.count("") && state.count("launching");
      },
      std::chrono::seconds(90));
  EXPECT_TRUE(seen) << "prometheus log:\n"
                    << ReadFile(dir.path + "/prometheus.log") << "\ndaemon:\n"
                    << d.log();
  EXPECT_EQ(attempt[""], 2);
  EXPECT_EQ(spares[""], 2);
  EXPECT_EQ(restarts["heartbeat_lost"], 1);
  EXPECT_EQ(restarts.size(), 1u);
  EXPECT_EQ(up[""], 1) << "the viewer token is a scrape's bearer token";
  EXPECT_EQ(up_no_token[""], 0) << "/metrics needs a token when the daemon has tokens";
  EXPECT_EQ(state.size(), 1u);
  EXPECT_EQ(state.count("launching"), 1u);
}

// Every metric name in an `expr` of deploy/grafana-dashboard.json appears in a real scrape (a job that ran
// and restarted, so the per-job series exist, the step time included).
TEST(GrafanaDashboard, EveryExpressionNamesSeriesTheDaemonExposes) {
  const std::string text = ReadFile(std::string(SHEPHERD_SOURCE_DIR) + "/deploy/grafana-dashboard.json");
  Json dash = Json::parse(text, nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << "deploy/grafana-dashboard.json is not valid JSON";
  std::vector<std::string> exprs;
  std::function<void(const Json&)> walk = [&](const Json& j) {
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) {
        if (k == "expr" && v.is_string()) exprs.push_back(v);
        walk(v);
      }
    } else if (j.is_array()) {
      for (const Json& v : j) walk(v);
    }
  };
  walk(dash);
  ASSERT_GE(exprs.size(), 6u);

  TempDir dir;
  WriteFile(dir.path + "/config.json", R"({"tick_interval_s": 0.05})", 0644);
  Daemon d(dir.path, {"--tokens-file", WriteFile(dir.path + "/tokens.json", Tokens()), "--config",
                      dir.path + "/config.json"});
  ASSERT_TRUE(d.WaitReady()) << d.log();
  ASSERT_FALSE(StartJobThatRestarts(d).empty());
  const std::string scrape = Get(d.port(), "/metrics", kViewer);
  ASSERT_FALSE(scrape.empty());
  std::set<std::string> exposed;
  const std::regex sample_name(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ])");
  std::istringstream lines(scrape);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, sample_name)) exposed.insert(m[1]);
  }
  const std::regex metric(R"(\bshepherd_[a-zA-Z0-9_]+)");
  for (const std::string& e : exprs)
    for (auto it = std::sregex_iterator(e.begin(), e.end(), metric); it != std::sregex_iterator(); ++it)
      EXPECT_TRUE(exposed.count(it->str())) << it->str() << " (in " << e << ") is not in a scrape";
}

}  // namespace
}  // namespace shepherd::testing
