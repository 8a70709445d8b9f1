// Ranks of a user's srun job bound by SLURM_JOB_ID through the real daemon over HTTP: 64 ranks whose first
// reports arrive at once create exactly one job (the control thread serialises the creation), and it is
// durable across a daemon restart.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
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

TEST(SlurmBinding, SixtyFourRanksReportingAtOnceCreateExactlyOneJob) {
  TempDir dir;
  const std::string tokens = dir.path + "/tokens.json";
  std::ofstream(tokens) << R"({"tokens": [{"token": ")" << kAdmin << R"(", "role": "admin", "name": "ops"},
      {"token": ")" << kSubmitter
                        << R"(", "role": "submitter", "name": "sam"}]})";
  ::chmod(tokens.c_str(), 0600);
  auto daemon = std::make_unique<Daemon>(dir.path, std::vector<std::string>{"--tokens-file", tokens});
  ASSERT_TRUE(daemon->WaitReady()) << daemon->log();
  for (int n = 0; n < 8; ++n)
    ASSERT_EQ(
        As(daemon->port(), kAdmin, "POST", "/v1/nodes",
           Json{{"id", "n" + std::to_string(n)}, {"gpus", 8}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}
               .dump())
            .status,
        201);

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

  // Durable: after a restart the id still binds to the same job (no second one is created).
  daemon.reset();
  daemon = std::make_unique<Daemon>(dir.path, std::vector<std::string>{"--tokens-file", tokens});
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
