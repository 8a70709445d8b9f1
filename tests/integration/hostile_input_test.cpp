// The real daemon against bodies built to hold its control thread: a flat object of 100,000 keys (the
// repeated-key check was quadratic: 24 s on one body), an agent's heartbeat listing thousands of processes of
// a job placed on another node with tens of thousands of flight-recorder paths (merged into the job's hang
// finding one linear search at a time: 84 s and gigabytes per heartbeat), and SIGTERM while such bodies
// keep arriving. Meanwhile a running job's agent heartbeats must be answered in time.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPrompt = std::chrono::seconds(2);  // a heartbeat answer, on a loaded 2-core machine

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

long RssKiB(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

HttpResult Post(int port, const std::string& target, const std::string& body) {
  // Large bodies take a while to send and parse on a loaded machine: a longer receive timeout than Http's.
  Connection c(port, std::chrono::seconds(120));
  if (!c.Send("POST " + target +
              " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body))
    return {};
  return c.Read();
}

std::string FlatObject(int keys, const std::string& last = "") {
  std::string text = "{";
  for (int i = 0; i < keys; ++i) text += "\"key" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  return text + (last.empty() ? "\"end\":0" : last) + "}";
}

Json Node(const std::string& id) {
  return {{"id", id}, {"hostname", id}, {"gpus", 1}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}};
}

// An agent heartbeat listing `count` processes of `job`'s attempt `attempt`, each with `dumps`
// flight-recorder paths of its own, each path padded by `pad` characters.
std::string FloodHeartbeat(const std::string& job, int attempt, int count, int dumps, int pad = 0) {
  std::string out = "{\"processes\": [";
  for (int p = 0; p < count; ++p) {
    out += std::string(p ? "," : "") + "{\"job\": \"" + job + "\", \"attempt\": " + std::to_string(attempt) +
           ", \"rank\": " + std::to_string(p % 2) + ", \"pid\": " + std::to_string(1000 + p) +
           ", \"state\": \"running\", \"flight_recorder\": [";
    for (int d = 0; d < dumps; ++d)
      out += std::string(d ? "," : "") + "{\"path\": \"/fr/" + std::string(pad, 'x') + "/p" +
             std::to_string(p) + "/nccl_trace_" + std::to_string(d) + "\", \"size\": 1}";
    out += "]}";
  }
  return out + "], \"gpu_faults\": []}";
}

// The largest heartbeat the daemon accepts: 256 processes of 8 dumps each (kMaxHeartbeatProcesses,
// kMaxHeartbeatDumps), paths long enough to come close to the 4 MiB body limit.
std::string LargestHeartbeat(const std::string& job, int attempt) {
  return FloodHeartbeat(job, attempt, 256, 8, 1950);
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Agents are silent for as long as a test's floods take (ThreadSanitizer makes them 5-15x slower): a node
    // lost meanwhile would end the hung job's attempts (and with them what a rank's dumps may be added to).
    {
      std::ofstream(dir_.path + "/config.json")
          << R"({"tick_interval_s": 0.1, "node_heartbeat_timeout_s": 60})";
    }
    daemon_ =
        std::make_unique<Daemon>(dir_.path, std::vector<std::string>{"--config", dir_.path + "/config.json"});
    ASSERT_TRUE(daemon_->WaitReady()) << daemon_->log();
    for (const char* n : {"n0", "n1", "n2"})
      ASSERT_EQ(Http(daemon_->port(), "POST", "/v1/nodes", Node(n).dump()).status, 201) << n;
  }

  // Answer status and seconds of one agent heartbeat of n0 (no processes).
  std::pair<int, double> Heartbeat(const std::string& node = "n0", const Json& processes = Json::array()) {
    const auto t0 = Clock::now();
    HttpResult r = Post(daemon_->port(), "/v1/nodes/" + node + "/heartbeat",
                        Json{{"processes", processes}, {"gpu_faults", Json::array()}}.dump());
    return {r.status, Since(t0)};
  }

  // A DP = 2 job on two of the nodes whose attempt 1 hangs on rank 1 (rank 0 waits in an all-reduce rank 1
  // never entered): its hang finding, attempt 1, without dumps. (Hangs are judged once the daemon has
  // listened for the heartbeat timeout, 2 s here.)
  Json HungJob() {
    Json spec = Json::parse(R"({"name": "h", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
        "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 1, "pp": 1, "dp": 2}, "resources": {"gpus": 2, "gpus_per_node": 1},
        "command": ["python3", "train.py"],
        "policy": {"startup_grace_s": 0, "restart_backoff_s": 0, "heartbeat_interval_s": 0.5,
                   "heartbeat_timeout_s": 2, "hang_timeout_s": 0.5}})");
    HttpResult r = Http(daemon_->port(), "POST", "/v1/jobs", spec.dump());
    if (r.status != 201) {
      ADD_FAILURE() << r.status << " " << r.body;
      return nullptr;
    }
    job_ = Json::parse(r.body)["id"];
    Json placement = Json::parse(Http(daemon_->port(), "GET", "/v1/jobs/" + job_ + "/placement").body);
    for (int rank = 0; rank < 2; ++rank) rank_node_.push_back(placement["ranks"][rank]["node"]);
    for (const char* n : {"n0", "n1", "n2"})
      if (n != rank_node_[0] && n != rank_node_[1]) other_node_ = n;
    Json hang;
    const double since = static_cast<double>(std::time(nullptr));
    bool first = true;
    Eventually(
        [&] {
          for (int rank = 0; rank < 2; ++rank) {
            Heartbeat(rank_node_[rank], Json::array({{{"job", job_},
                                                      {"attempt", 1},
                                                      {"rank", rank},
                                                      {"pid", 10 + rank},
                                                      {"state", "running"}}}));
          }
          Json batch = Json::array();
          for (int rank = 0; rank < 2; ++rank) {
            if (first) batch.push_back({{"rank", rank}, {"attempt", 1}, {"kind", "step"}, {"step", 1}});
            Json hb = {{"rank", rank}, {"attempt", 1}, {"kind", "heartbeat"}, {"step", 1}};
            if (rank == 0)
              hb["collective"] = {{"seq", 5}, {"op", "all_reduce"}, {"group", "dp"}, {"since", since}};
            batch.push_back(hb);
          }
          Http(daemon_->port(), "POST", "/v1/jobs/" + job_ + "/reports", Json{{"reports", batch}}.dump());
          first = false;  // a step report ends the rank's collective: one, then heartbeats only
          Json found = Json::parse(
              Http(daemon_->port(), "GET", "/v1/failures?kind=hang&job=" + job_).body)["failures"];
          if (found.empty()) return false;
          hang = found[0];
          return true;
        },
        std::chrono::seconds(60));
    return hang;
  }

  Json HangFinding() {
    Json found =
        Json::parse(Http(daemon_->port(), "GET", "/v1/failures?kind=hang&job=" + job_).body)["failures"];
    return found.empty() ? Json(nullptr) : found[0];
  }

  TempDir dir_;
  std::unique_ptr<Daemon> daemon_;
  std::string job_;
  std::vector<std::string> rank_node_;  // of the hung job's attempt 1, by rank
  std::string other_node_;              // the node none of its ranks run on
};

TEST_F(HostileInputTest, AHundredThousandKeysAre400AtOnceWhileHeartbeatsAreAnswered) {
  const std::string flat = FlatObject(100000);                      // 1.5 MB, all keys distinct
  const std::string repeat = FlatObject(100000, "\"key99999\":1");  // the one repeat at the very end
  std::vector<HttpResult> answers(4);
  std::vector<double> took(4);
  std::vector<std::thread> attackers;
  for (int i = 0; i < 4; ++i)
    attackers.emplace_back([&, i] {
      const auto t0 = Clock::now();
      answers[i] = Post(daemon_->port(), i % 2 ? "/v1/nodes" : "/v1/jobs", i < 2 ? flat : repeat);
      took[i] = Since(t0);
    });
  // Heartbeats while the bodies arrive and are refused: each answered promptly.
  double worst = 0;
  for (int i = 0; i < 10; ++i) {
    auto [status, seconds] = Heartbeat();
    EXPECT_EQ(status, 200);
    worst = std::max(worst, seconds);
  }
  for (auto& t : attackers) t.join();
  std::printf("100k-key bodies: slowest heartbeat %.3f s, longest control hold %.4f s\n", worst,
              Metric(daemon_->port(), "shepherd_control_hold_seconds_max"));
  EXPECT_LT(worst, std::chrono::duration<double>(kPrompt).count()) << "the slowest heartbeat answer, s";
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(answers[i].status, 400) << i << " " << answers[i].body;
    Json problem = Json::parse(answers[i].body);
    ASSERT_EQ(problem["errors"].size(), 1u) << problem.dump();
    EXPECT_EQ(problem["errors"][0]["field"], "$");
    EXPECT_EQ(problem["errors"][0]["message"], "has more than 4096 members");
    EXPECT_LT(took[i], 10.0) << "answered in s";
  }
  EXPECT_LT(Metric(daemon_->port(), "shepherd_control_hold_seconds_max"), 0.5);
}

TEST_F(HostileInputTest, AHeartbeatForRanksOfAnotherNodeChangesNoFindingAndIsCounted) {
  Json hang = HungJob();
  ASSERT_TRUE(hang.is_object()) << daemon_->log();
  ASSERT_EQ(hang["attempt"], 1);
  ASSERT_FALSE(hang.contains("flight_recorder"));
  const long rss_before = RssKiB(daemon_->pid());
  // The agent of a node none of the job's ranks run on sends the largest heartbeat the daemon accepts.
  const std::string flood = LargestHeartbeat(job_, 1);
  ASSERT_LT(flood.size(), std::size_t{4} << 20);
  ASSERT_GT(flood.size(), std::size_t{4} << 19);
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    HttpResult r = Post(daemon_->port(), "/v1/nodes/" + other_node_ + "/heartbeat", flood);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_LT(Since(t0), 10.0) << "the flood heartbeat's answer, s";
    auto [status, seconds] = Heartbeat(rank_node_[1]);
    EXPECT_EQ(status, 200);
    EXPECT_LT(seconds, std::chrono::duration<double>(kPrompt).count()) << "a heartbeat after the flood, s";
  }
  std::printf("foreign flood: RSS %+ld KiB, longest control hold %.4f s\n",
              RssKiB(daemon_->pid()) - rss_before,
              Metric(daemon_->port(), "shepherd_control_hold_seconds_max"));
  Json after = HangFinding();
  EXPECT_FALSE(after.contains("flight_recorder")) << after.dump().substr(0, 300);
  EXPECT_EQ(Metric(daemon_->port(), "shepherd_heartbeat_ignored_total{what=\"flight_recorder\"}"), 3 * 2048);
  EXPECT_GE(Metric(daemon_->port(), "shepherd_heartbeat_ignored_total{what=\"process\"}"), 3 * 256);
  EXPECT_LT(RssKiB(daemon_->pid()) - rss_before, 300 * 1024) << "RSS growth, KiB";
  EXPECT_LT(Metric(daemon_->port(), "shepherd_control_hold_seconds_max"), 0.5);

  // The agent of rank 0's own node still adds that rank's dumps, at most 4 of them.
  Json dumps = Json::array();
  for (int d = 0; d < 8; ++d) dumps.push_back({{"path", "/fr/r0/trace_" + std::to_string(d)}, {"size", 1}});
  auto [status, seconds] = Heartbeat(rank_node_[0], Json::array({{{"job", job_},
                                                                  {"attempt", 1},
                                                                  {"rank", 0},
                                                                  {"pid", 10},
                                                                  {"state", "running"},
                                                                  {"flight_recorder", dumps}}}));
  EXPECT_EQ(status, 200);
  after = HangFinding();
  ASSERT_TRUE(after.contains("flight_recorder")) << after.dump();
  EXPECT_EQ(after["flight_recorder"].size(), 4u);
  EXPECT_EQ(after["flight_recorder"][0]["path"], "/fr/r0/trace_0");
  EXPECT_EQ(Metric(daemon_->port(), "shepherd_heartbeat_ignored_total{what=\"flight_recorder\"}"),
            3 * 2048 + 4);
}

// A heartbeat of 1,000 processes with 64 dumps each (4 MiB) held the control thread 18 ms validating and
// converting entries the daemon then ignored. Beyond 256 processes or 8 dumps per process it is refused,
// naming the field, before anything of it is converted; the largest accepted one holds the thread briefly.
TEST_F(HostileInputTest, AHeartbeatBeyondTheProcessAndDumpBoundsIs422NamingTheField) {
  auto first_field = [](const HttpResult& r) {
    Json j = Json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("errors") && !j["errors"].empty() ? j["errors"][0].value("field", "")
                                                                         : std::string();
  };
  HttpResult many = Post(daemon_->port(), "/v1/nodes/n2/heartbeat", FloodHeartbeat("job-000001", 1, 257, 0));
  EXPECT_EQ(many.status, 422) << many.body.substr(0, 300);
  EXPECT_EQ(first_field(many), "processes") << many.body.substr(0, 300);
  HttpResult dumps = Post(daemon_->port(), "/v1/nodes/n2/heartbeat", FloodHeartbeat("job-000001", 1, 1, 9));
  EXPECT_EQ(dumps.status, 422) << dumps.body.substr(0, 300);
  EXPECT_EQ(first_field(dumps), "processes[0].flight_recorder") << dumps.body.substr(0, 300);
  HttpResult flood =
      Post(daemon_->port(), "/v1/nodes/n2/heartbeat", FloodHeartbeat("job-000001", 1, 1000, 64));
  EXPECT_EQ(flood.status, 422);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(Post(daemon_->port(), "/v1/nodes/n2/heartbeat", LargestHeartbeat("job-000001", 1)).status, 200);
  const double hold = Metric(daemon_->port(), "shepherd_control_hold_seconds_max");
  std::printf("largest accepted heartbeat: longest control hold %.4f s\n", hold);
  EXPECT_LT(hold, 0.5);
}

// A 4 MB batch of 18,437 reports held the control thread 13 ms (each report is converted and ingested
// there). A batch holds at most 1,000 reports: one more is 422 naming `reports`, nothing ingested.
TEST_F(HostileInputTest, AReportBatchOfMoreThanAThousandIs422NamingReports) {
  Json hang = HungJob();
  ASSERT_TRUE(hang.is_object()) << daemon_->log();
  auto batch = [&](int count, long long first_step) {
    Json reports = Json::array();
    for (int i = 0; i < count; ++i)
      reports.push_back({{"rank", i % 2},
                         {"attempt", 1},
                         {"kind", "step"},
                         {"step", first_step + i / 2},
                         {"loss", 2.0},
                         {"step_time_s", 0.5},
                         {"grad_norm", 1.0},
                         {"lr", 0.001}});
    return Json{{"reports", reports}}.dump();
  };
  HttpResult over = Post(daemon_->port(), "/v1/jobs/" + job_ + "/reports", batch(1001, 2));
  EXPECT_EQ(over.status, 422) << over.body.substr(0, 300);
  Json problem = Json::parse(over.body, nullptr, false);
  ASSERT_TRUE(problem.is_object()) << over.body.substr(0, 300);
  EXPECT_EQ(problem["errors"][0]["field"], "reports") << over.body.substr(0, 300);
  for (int i = 0; i < 3; ++i) {
    HttpResult r = Post(daemon_->port(), "/v1/jobs/" + job_ + "/reports", batch(1000, 2 + 500LL * i));
    EXPECT_EQ(r.status, 202) << r.body.substr(0, 300);
  }
  std::printf("largest accepted report batch: longest control hold %.4f s\n",
              Metric(daemon_->port(), "shepherd_control_hold_seconds_max"));
  EXPECT_LT(Metric(daemon_->port(), "shepherd_control_hold_seconds_max"), 0.5);
}

TEST_F(HostileInputTest, SigtermDuringAFloodExitsWithinSeconds) {
  Json hang = HungJob();
  ASSERT_TRUE(hang.is_object()) << daemon_->log();
  const std::string flood = LargestHeartbeat(job_, 1);
  const std::string flat = FlatObject(100000);
  std::atomic<bool> stop{false};
  std::vector<std::thread> attackers;
  for (int i = 0; i < 6; ++i)
    attackers.emplace_back([&, i] {
      while (!stop.load())
        Post(daemon_->port(), i % 2 ? "/v1/nodes/" + other_node_ + "/heartbeat" : "/v1/nodes",
             i % 2 ? flood : flat);
    });
  // Let the flood build up: the daemon is answering attack bodies.
  Eventually(
      [&] {
        return Metric(daemon_->port(), "shepherd_heartbeat_ignored_total{what=\"flight_recorder\"}") > 0;
      },
      std::chrono::seconds(30));
  const auto t0 = Clock::now();
  daemon_->Signal(SIGTERM);
  std::optional<int> code = daemon_->Wait(std::chrono::seconds(20));
  const double exit_s = Since(t0);
  stop = true;
  for (auto& t : attackers) t.join();
  std::printf("SIGTERM under flood: exit after %.3f s\n", exit_s);
  ASSERT_TRUE(code.has_value()) << "no exit within 20 s of SIGTERM";
  EXPECT_EQ(*code, 0) << daemon_->log().substr(0, 2000);
  EXPECT_LT(exit_s, 5.0) << "seconds from SIGTERM to exit";
}

}  // namespace
}  // namespace shepherd::testing
