// The real daemon against what a job, a database file or an agent's text could do: sbatch options that
// change who runs what or where files go, environment names that make an interpreter or a library load
// code, a zero-length or truncated database taken for a new one, a line feed in an exit's error forging a
// log line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kSubmitter = "submitter-token-0123456789";
constexpr const char* kAgentN0 = "agent-n0-token-0123456789";

std::string WriteFile(const std::string& path, const std::string& text, mode_t mode = 0600) {
  { std::ofstream(path, std::ios::trunc) << text; }
  ::chmod(path.c_str(), mode);
  return path;
}

std::vector<std::string> TokensArgs(const std::string& dir) {
  return {"--tokens-file", WriteFile(dir + "/tokens.json",
                                     std::string(R"({"tokens": [{"token": ")") + kAdmin +
                                         R"(", "role": "admin", "name": "ops"}, {"token": ")" + kSubmitter +
                                         R"(", "role": "submitter", "name": "alice"}, {"token": ")" +
                                         kAgentN0 + R"(", "role": "agent", "node": "n0"}]})")};
}

HttpResult Request(int port, const std::string& method, const std::string& target, const std::string& token,
                   const std::string& body = "") {
  Connection c(port);
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n";
  if (!body.empty())
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  if (!c.Send(req)) return {};
  return c.Read();
}

void RegisterN0(int port) {
  ASSERT_EQ(Request(port, "POST", "/v1/nodes", kAgentN0,
                    R"({"id": "n0", "hostname": "h0", "gpus": 1, "topology": {"spine": "s0", "leaf": "l0"}})")
                .status,
            201);
}

// A one-GPU job with `rest` (",\"key\": ..." fields) added.
std::string Job(const std::string& rest) {
  return R"({"name": "a", "model": {"parameters": 1e8, "layers": 4, "hidden": 512, "heads": 8, "seq_len": 512},
      "training": {"global_batch_size": 32}, "parallelism": {"tp": 1, "pp": 1, "dp": 1},
      "resources": {"gpus": 1, "gpus_per_node": 1})" +
         rest + "}";
}

std::vector<std::string> ErrorFields(const HttpResult& r) {
  std::vector<std::string> out;
  Json body = Json::parse(r.body, nullptr, false);
  if (body.is_object() && body.contains("errors"))
    for (const Json& e : body["errors"]) out.push_back(e.value("field", ""));
  return out;
}

// `--export=ALL,LD_PRELOAD=...` ran a preloaded library as the daemon's user; `--output=<the daemon's
// database> --open-mode=truncate` could empty it. Each is a 422 naming the element, as a submitter sends it.
TEST(JobPolicyHttp, SbatchArgsThatChangeWhoRunsWhatOrWhereFilesGoAre422) {
  TempDir dir;
  // A daemon that launches through Slurm (its Slurm commands fail here: nothing of these jobs reaches them).
  std::vector<std::string> args = TokensArgs(dir.path);
  for (const char* a : {"--slurm", "--config"}) args.push_back(a);
  args.push_back(WriteFile(dir.path + "/config.json",
                           R"({"slurm": {"slurm_conf": ")" + dir.path +
                               R"(/no-slurm.conf", "launch_poll_s": 60, "reconcile_interval_s": 60}})"));
  Daemon d(dir.path, args);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  RegisterN0(d.port());
  const std::string db = dir.path + "/shepherd.db";
  auto submit = [&](const Json& sbatch) {
    return Request(
        d.port(), "POST", "/v1/jobs", kSubmitter,
        Job(R"(, "command": ["python3", "train.py"], "launcher": "slurm", "slurm": {"sbatch_args": )" +
            sbatch.dump() + "}"));
  };
  const std::vector<std::vector<std::string>> attacks = {
      {"--account=ml", "--export=ALL,LD_PRELOAD=/tmp/evil.so"},
      {"--account=ml", "--output=" + db, "--open-mode=truncate"},
      {"--account=ml", "--output", db},
      {"--account=ml", "-o", db},
      {"--account=ml", "--error=" + db},
      {"--account=ml", "--uid=0"},
      {"--account=ml", "--chdir=/"},
      {"--account=ml", "--wrap=id"},
      {"--account=ml", "--get-user-env"},
      {"--account=ml", "--exp=ALL"},
      {"--account=ml", "--comment=x\ny"},
  };
  for (const auto& attack : attacks) {
    Json sbatch = attack;
    HttpResult r = submit(sbatch);
    EXPECT_EQ(r.status, 422) << sbatch.dump() << ": " << r.body;
    const std::vector<std::string> fields = ErrorFields(r);
    ASSERT_FALSE(fields.empty()) << r.body;
    EXPECT_EQ(fields[0], "slurm.sbatch_args[1]") << sbatch.dump() << ": " << r.body;
    for (const std::string& f : fields) EXPECT_EQ(f.rfind("slurm.sbatch_args[", 0), 0u) << r.body;
  }
  EXPECT_GT(std::filesystem::file_size(db), 0u);
  HttpResult ok =
      submit(Json::array({"--account=ml", "--partition", "gpu", "--time=01:00:00", "--exclusive"}));
  EXPECT_EQ(ok.status, 201) << ok.body;
}

// A sitecustomize.py ran under a command allow-list through PYTHONPATH: the default policy refuses the
// interpreters' and loaders' hooks; a site that wants the Python client on PYTHONPATH allows it by name.
TEST(JobPolicyHttp, InterpreterAndLoaderHooksInEnvAre422UnlessTheSiteAllowsThem) {
  TempDir dir;
  std::vector<std::string> args = TokensArgs(dir.path);
  args.push_back("--config");
  args.push_back(WriteFile(dir.path + "/config.json",
                           R"({"job_policy": {"command_prefixes": [["/usr/bin/python3"]]}})"));
  Daemon d(dir.path, args);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  RegisterN0(d.port());
  for (const char* name : {"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "BASH_ENV", "ENV", "PERL5OPT",
                           "NODE_OPTIONS", "JAVA_TOOL_OPTIONS", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
                           "GCONV_PATH", "LD_AUDIT", "SLURM_CONF"}) {
    Json env = {{name, "/tmp/evil"}, {"NCCL_DEBUG", "INFO"}};
    HttpResult r = Request(d.port(), "POST", "/v1/jobs", kSubmitter,
                           Job(R"(, "command": ["/usr/bin/python3", "train.py"], "env": )" + env.dump()));
    EXPECT_EQ(r.status, 422) << name << ": " << r.body;
    EXPECT_EQ(ErrorFields(r), std::vector<std::string>{std::string("env.") + name}) << r.body;
  }

  TempDir allowing;
  std::vector<std::string> args2 = TokensArgs(allowing.path);
  args2.push_back("--config");
  args2.push_back(
      WriteFile(allowing.path + "/config.json", R"({"job_policy": {"allowed_env": ["PYTHONPATH"]}})"));
  Daemon d2(allowing.path, args2);
  ASSERT_TRUE(d2.WaitReady()) << d2.log();
  RegisterN0(d2.port());
  HttpResult ok = Request(d2.port(), "POST", "/v1/jobs", kSubmitter,
                          Job(R"(, "command": ["/usr/bin/python3", "-m", "shepherd_client.run", "train.py"],
                                 "env": {"PYTHONPATH": "/opt/shepherd/clients/python"})"));
  EXPECT_EQ(ok.status, 201) << ok.body;
}

// A zero-length database file started as a new, empty database: every job, node and credential gone
// without a word. It is refused now, untouched; a missing file is still created.
TEST(StartupSafety, AnEmptyOrTruncatedDatabaseFileIsRefusedUntouched) {
  TempDir dir;
  const std::string db = dir.path + "/shepherd.db";
  WriteFile(db, "", 0600);
  {
    Daemon d(dir.path, {"--db", db});
    EXPECT_FALSE(d.WaitReady(20s));
    auto code = d.Wait();
    ASSERT_TRUE(code.has_value());
    EXPECT_NE(*code, 0);
    EXPECT_NE(d.log().find("database " + db + " is an empty file (0 bytes)"), std::string::npos) << d.log();
  }
  EXPECT_EQ(std::filesystem::file_size(db), 0u);

  std::filesystem::remove(db);
  {
    Daemon d(dir.path, {"--db", db});
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes",
                   R"({"id": "n0", "hostname": "h0", "gpus": 1, "topology": {"spine": "s0", "leaf": "l0"}})")
                  .status,
              201);
    d.Signal(SIGTERM);
    ASSERT_EQ(d.Wait(), 0) << d.log();
  }
  const auto whole = std::filesystem::file_size(db);
  ASSERT_GE(whole, 3 * 4096u);
  std::filesystem::resize_file(db, whole / 2 / 4096 * 4096);  // an operator's copy cut short
  const auto cut = std::filesystem::file_size(db);
  {
    Daemon d(dir.path, {"--db", db});
    EXPECT_FALSE(d.WaitReady(20s));
    auto code = d.Wait();
    ASSERT_TRUE(code.has_value());
    EXPECT_NE(*code, 0);
    EXPECT_NE(d.log().find("database " + db + " is truncated"), std::string::npos) << d.log();
  }
  EXPECT_EQ(std::filesystem::file_size(db), cut);
}

// A line feed in an exit's `error` (a heartbeat's text) wrote a log line of its own: one line now, with
// the line feed escaped.
TEST(LogHygiene, AnExitErrorCannotForgeALogLine) {
  TempDir dir;
  Daemon d(dir.path, TokensArgs(dir.path));
  ASSERT_TRUE(d.WaitReady()) << d.log();
  ASSERT_EQ(Request(d.port(), "POST", "/v1/nodes", kAgentN0,
                    R"({"id": "n0", "hostname": "h0", "gpus": 1, "topology": {"spine": "s0", "leaf": "l0"}})")
                .status,
            201);
  ASSERT_EQ(Request(d.port(), "POST", "/v1/nodes/n0/heartbeat", kAgentN0, "{}").status, 200);
  HttpResult job = Request(d.port(), "POST", "/v1/jobs", kAdmin, Job(R"(, "command": ["/bin/true"])"));
  ASSERT_EQ(job.status, 201) << job.body;
  const std::string id = Json::parse(job.body)["id"];
  int attempt = 0;
  ASSERT_TRUE(Eventually([&] {
    HttpResult a = Request(d.port(), "GET", "/v1/nodes/n0/assignments?version=-1&wait=0", kAgentN0);
    Json ranks = Json::parse(a.body, nullptr, false).value("ranks", Json::array());
    if (ranks.empty()) return false;
    attempt = ranks[0].value("attempt", 0);
    return attempt > 0;
  })) << d.log();
  const std::string forged = "[2026-01-01 00:00:00.000] [info] job " + id + " succeeded";
  Json exit = {{"job", id},
               {"attempt", attempt},
               {"rank", 0},
               {"pid", 0},
               {"state", "exited"},
               {"exit_code", nullptr},
               {"error", "boom\n" + forged}};
  Json beat = {{"processes", Json::array({exit})}};
  ASSERT_EQ(Request(d.port(), "POST", "/v1/nodes/n0/heartbeat", kAgentN0, beat.dump()).status, 200);
  ASSERT_TRUE(Eventually([&] { return d.log().find("boom") != std::string::npos; })) << d.log();
  const std::string log = d.log();
  EXPECT_NE(log.find("boom\\n" + forged), std::string::npos) << log;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    EXPECT_NE(line.rfind("[2026-01-01", 0), 0u) << "a forged line: " << line;
}

}  // namespace
}  // namespace shepherd::testing
