// Ranks of a user's srun job bound by SLURM_JOB_ID through the real daemon (`--slurm`, with a stand-in for
// Slurm's scontrol in PATH) over HTTP: a submitter binds only a job Slurm shows running as its own user's;
// 64 ranks whose first reports arrive at once create exactly one job (the control thread serialises the
// creation), and it is durable across a daemon restart.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

constexpr const char* kAdmin = "admin-token-0123456789";
constexpr const char* kSubmitter = "submitter-token-0123456789";

HttpResult As(int port, const std::string& token, const std::string& method, const std::string& target,
              const std::string& body = "") {
  Connection c(port);
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n";
  if (!body.empty())
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  if (!c.Send(req)) return {};
  return c.Read();
}

// A stand-in for Slurm's scontrol: eight idle nodes of 8 GPUs, no topology, and the jobs whose records are
// files in <dir>/jobs (any other id: "Invalid job id", as scontrol says for an unknown job). PATH points the
// daemon at it while the object lives.
class FakeSlurm {
 public:
  explicit FakeSlurm(const std::string& dir) : bin_(dir + "/bin"), jobs_(dir + "/jobs") {
    ::mkdir(bin_.c_str(), 0755);
    ::mkdir(jobs_.c_str(), 0755);
    std::string nodes;
    for (int n = 0; n < 8; ++n)
      nodes += "NodeName=n" + std::to_string(n) +
               " CPUTot=8 RealMemory=1024 Gres=gpu:8 State=IDLE Partitions=debug\n";
    const std::string script = bin_ + "/scontrol";
    std::ofstream(script)
        << "#!/bin/sh\n"
        << "case \"$1 $2\" in\n"
        << "  'show nodes') printf '" << nodes << "' ;;\n"
        << "  'show topology') printf 'SwitchName=l0 Level=0 LinkSpeed=1 Nodes=n[0-7]\\nSwitchName=s0 "
           "Level=1 LinkSpeed=1 Nodes=n[0-7] Switches=l0\\n' ;;\n"
        << "  'show step') exit 0 ;;\n"
        << "  'show job') if [ -f '" << jobs_ << "'/\"$3\" ]; then cat '" << jobs_
        << "'/\"$3\"; else echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1; fi ;;\n"
        << "  *) echo \"unexpected: $*\" >&2; exit 1 ;;\n"
        << "esac\n";
    ::chmod(script.c_str(), 0755);
    const char* path = std::getenv("PATH");
    old_path_ = path ? path : "/usr/bin:/bin";
    ::setenv("PATH", (bin_ + ":" + old_path_).c_str(), 1);
  }
  ~FakeSlurm() { ::setenv("PATH", old_path_.c_str(), 1); }
  void Job(const std::string& id, const std::string& user, const std::string& state) {
    std::ofstream(jobs_ + "/" + id) << "JobId=" << id << " JobName=big-srun UserId=" << user
                                    << "(1000) JobState=" << state << " Reason=None Requeue=1 Restarts=0"
                                    << " ExitCode=0:0 NodeList=n[0-7]\n";
  }

 private:
  std::string bin_, jobs_, old_path_;
};

// Waits (bounded) until the daemon's inventory holds `n` nodes (the first Slurm sync imports them).
bool WaitForNodes(int port, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = As(port, kAdmin, "GET", "/v1/nodes");
    if (r.status == 200) {
      Json j = Json::parse(r.body, nullptr, false);
      if (j.is_object() && j["nodes"].size() == n) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(SlurmBinding, SixtyFourRanksReportingAtOnceCreateExactlyOneJob) {
  TempDir dir;
  FakeSlurm slurm(dir.path);
  slurm.Job("8675309", "sam", "RUNNING");
  slurm.Job("555", "kim", "RUNNING");
  slurm.Job("556", "sam", "COMPLETED");
  const std::string tokens = dir.path + "/tokens.json";
  std::ofstream(tokens) << R"({"tokens": [{"token": ")" << kAdmin << R"(", "role": "admin", "name": "ops"},
      {"token": ")" << kSubmitter
                        << R"(", "role": "submitter", "name": "sam"}]})";
  ::chmod(tokens.c_str(), 0600);
  const std::vector<std::string> args{"--tokens-file", tokens, "--slurm"};
  auto daemon = std::make_unique<Daemon>(dir.path, args);
  ASSERT_TRUE(daemon->WaitReady()) << daemon->log();
  ASSERT_TRUE(WaitForNodes(daemon->port(), 8)) << daemon->log();

  // A submitter cannot bind a Slurm job id that Slurm does not show yet, another user's job, or one that
  // ended: each would lock that job's own ranks out of being watched.
  const std::string first =
      Json{{"slurm", {{"ntasks", 1}}}, {"reports", {{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}}}}}
          .dump();
  auto future = As(daemon->port(), kSubmitter, "POST", "/v1/external/slurm/8675310/reports", first);
  EXPECT_EQ(future.status, 404) << future.body;
  EXPECT_NE(future.body.find("slurm_job_id"), std::string::npos) << future.body;
  auto kims = As(daemon->port(), kSubmitter, "POST", "/v1/external/slurm/555/reports", first);
  EXPECT_EQ(kims.status, 403) << kims.body;
  EXPECT_NE(kims.body.find("kim"), std::string::npos) << kims.body;
  EXPECT_EQ(As(daemon->port(), kSubmitter, "POST", "/v1/external/slurm/556/reports", first).status, 403);
  EXPECT_EQ(Json::parse(As(daemon->port(), kAdmin, "GET", "/v1/jobs").body)["jobs"].size(), 0u);

  // 64 ranks, one connection each, released together.
  std::atomic<bool> go{false};
  std::vector<HttpResult> answers(64);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 64; ++r)
    ranks.emplace_back([&, r] {
      Json body = {
          {"slurm", {{"ntasks", 64}, {"job_name", "big-srun"}}},
          {"reports",
           {{{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}, {"node", "n" + std::to_string(r / 8)}}}}};
      while (!go.load()) std::this_thread::yield();
      answers[r] = As(daemon->port(), kSubmitter, "POST", "/v1/external/slurm/8675309/reports", body.dump());
    });
  go = true;
  for (auto& t : ranks) t.join();

  int created = 0;
  std::set<std::string> jobs;
  for (int r = 0; r < 64; ++r) {
    ASSERT_EQ(answers[r].status, 202) << "rank " << r << ": " << answers[r].body;
    Json a = Json::parse(answers[r].body);
    EXPECT_EQ(a["accepted"], 1) << a.dump();
    created += a["created"].get<bool>() ? 1 : 0;
    jobs.insert(a["job"].get<std::string>());
  }
  EXPECT_EQ(created, 1);
  ASSERT_EQ(jobs.size(), 1u);
  auto listed = As(daemon->port(), kAdmin, "GET", "/v1/jobs?external_id=8675309");
  ASSERT_EQ(listed.status, 200) << listed.body;
  Json found = Json::parse(listed.body)["jobs"];
  ASSERT_EQ(found.size(), 1u) << found.dump();
  EXPECT_EQ(found[0]["id"], *jobs.begin());
  EXPECT_EQ(found[0]["owner"], "sam");
  EXPECT_EQ(found[0]["plan"]["dp"], 64);
  EXPECT_EQ(Json::parse(As(daemon->port(), kAdmin, "GET", "/v1/jobs").body)["jobs"].size(), 1u);

  // An admin binds another user's job (created; the fleet is full, so its reports wait for an attempt).
  As(daemon->port(), kAdmin, "POST", "/v1/external/slurm/555/reports", first);
  Json bound = Json::parse(As(daemon->port(), kAdmin, "GET", "/v1/jobs?external_id=555").body)["jobs"];
  ASSERT_EQ(bound.size(), 1u) << bound.dump();
  EXPECT_EQ(bound[0]["owner"], "ops");

  // Durable: after a restart the id still binds to the same job (no second one is created).
  daemon.reset();
  daemon = std::make_unique<Daemon>(dir.path, args);
  ASSERT_TRUE(daemon->WaitReady()) << daemon->log();
  Json again = {{"slurm", {{"ntasks", 64}}},
                {"reports", {{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}, {"node", "n0"}}}}};
  auto r = As(daemon->port(), kSubmitter, "POST", "/v1/external/slurm/8675309/reports", again.dump());
  ASSERT_EQ(r.status, 202) << r.body << daemon->log();
  EXPECT_EQ(Json::parse(r.body)["created"], false);
  EXPECT_EQ(Json::parse(r.body)["job"], *jobs.begin());
}

}  // namespace
}  // namespace shepherd::testing
