// The whole agent (registration, heartbeats, long poll, supervision) against FakeDaemon.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/agent.h"
#include "agent/process.h"
#include "tests/agent/fake_daemon.h"
#include "tests/agent/test_util.h"

namespace shepherd::agent {
namespace {

using namespace std::chrono_literals;
using testing::FakeDaemon;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitFor;

// The newest heartbeat entry for (job, attempt, rank), or null.
Json LatestEntry(const FakeDaemon& d, int attempt, int rank) {
  std::vector<Json> hbs = d.heartbeats();
  for (auto it = hbs.rbegin(); it != hbs.rend(); ++it)
    for (const Json& p : (*it)["processes"])
      if (p["attempt"] == attempt && p["rank"] == rank) return p;
  return nullptr;
}

// "running", "exited", or "" when not reported yet.
std::string StateOf(const FakeDaemon& d, int attempt, int rank) {
  Json p = LatestEntry(d, attempt, rank);
  return p.is_object() ? p.value("state", "") : "";
}

std::map<std::string, std::string> ParseEnvFile(const std::string& text) {
  std::map<std::string, std::string> env;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    std::size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

class AgentLoopTest : public ::testing::Test {
 protected:
  AgentOptions Options() {
    AgentOptions o;
    o.server = daemon_->url();
    o.node_id = "node-7";
    o.gpus = 2;
    o.topology = {{"spine", "s0"}, {"leaf", "l1"}};
    o.state_dir = dir_.path();
    o.heartbeat_interval = 100ms;
    o.stop_grace = 2s;
    o.long_poll_wait = 1s;
    o.supervise_interval = 20ms;
    o.token = "tok";
    return o;
  }
  void StartAgent(AgentOptions o) {
    auto a = Agent::Create(std::move(o));
    ASSERT_TRUE(a.ok()) << a.status().message();
    agent_ = std::move(*a);
    runner_ = std::thread([this] { EXPECT_TRUE(agent_->Run().ok()); });
  }
  void StopAgent() {
    if (!agent_) return;
    agent_->Stop();
    runner_.join();
    agent_.reset();
  }
  // A rank that counts its starts in starts-r<rank>, dumps its environment to env-r<rank> and runs `tail`.
  Json Rank(int attempt, int rank, const std::string& tail) {
    std::string env_file = dir_.file("env-r" + std::to_string(rank));
    std::string script = "echo $$ >> " + dir_.file("starts-r" + std::to_string(rank)) + "; env > " +
                         env_file + ".tmp && mv " + env_file + ".tmp " + env_file + "; " + tail;
    return {{"job", "job-1"},
            {"attempt", attempt},
            {"rank", rank},
            {"gpu", rank},
            {"command", {"/bin/sh", "-c", script}},
            {"env",
             {{"RANK", std::to_string(rank)},
              {"WORLD_SIZE", "2"},
              {"LOCAL_RANK", std::to_string(rank)},
              {"CUDA_VISIBLE_DEVICES", std::to_string(rank)},
              {"SHEPHERD_JOB", "job-1"},
              {"SHEPHERD_ATTEMPT", std::to_string(attempt)},
              {"SHEPHERD_RANK_COORDS", "0,0," + std::to_string(rank)}}}};
  }
  int Starts(int rank) {
    std::string s = ReadFile(dir_.file("starts-r" + std::to_string(rank)));
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
  }
  void TearDown() override {
    StopAgent();
    // Leave nothing behind, whatever the test did: kill every rank group it started, reap our children.
    for (int rank = 0; rank < 2; ++rank) {
      std::string s = ReadFile(dir_.file("starts-r" + std::to_string(rank)));
      for (std::size_t pos = 0; pos < s.size();) {
        std::size_t nl = s.find('\n', pos);
        pid_t pid = std::stoi(s.substr(pos, nl - pos));
        SignalGroup(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pos = nl + 1;
      }
    }
  }

  TempDir dir_;
  std::unique_ptr<FakeDaemon> daemon_ = std::make_unique<FakeDaemon>();
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
};

TEST_F(AgentLoopTest, RegistersStartsReportsAndStops) {
  StartAgent(Options());
  ASSERT_TRUE(WaitFor([&] { return !daemon_->registrations().empty(); }));
  Json reg = daemon_->registrations()[0];
  EXPECT_EQ(reg["id"], "node-7");
  EXPECT_EQ(reg["gpus"], 2);
  EXPECT_EQ(reg["topology"], Json::parse(R"({"spine": "s0", "leaf": "l1"})"));
  EXPECT_FALSE(reg.contains("spare"));

  daemon_->SetAssignments({Rank(1, 0, "exec sleep 100"), Rank(1, 1, "exit 3")});
  std::string env_file = dir_.file("env-r0");
  ASSERT_TRUE(WaitFor([&] { return testing::FileExists(env_file); }));
  std::map<std::string, std::string> env = ParseEnvFile(ReadFile(env_file));
  EXPECT_EQ(env["RANK"], "0");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(env["SHEPHERD_JOB"], "job-1");
  EXPECT_EQ(env["SHEPHERD_RANK_COORDS"], "0,0,0");
  EXPECT_EQ(env["PWD"], dir_.path());
  EXPECT_FALSE(env["PATH"].empty()) << "the agent's own environment is inherited";

  // Rank 1's exit is reported with its code and, once acknowledged, no longer reported nor restarted.
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 1) == "exited"; }));
  EXPECT_EQ(LatestEntry(*daemon_, 1, 1)["exit_code"], 3);
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0)["state"], "running");
  std::size_t seen = daemon_->heartbeats().size();
  ASSERT_TRUE(WaitFor([&] {
    std::vector<Json> hbs = daemon_->heartbeats();
    return hbs.size() > seen + 1 && hbs.back()["processes"].size() == 1;
  }));
  EXPECT_EQ(Starts(1), 1);
  EXPECT_EQ(ReadFile(dir_.file("logs/job-1-a1-r0.log")), "");

  // Withdrawn: SIGTERM, reported as an exit by signal.
  daemon_->SetAssignments(Json::array());
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "exited"; }));
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0)["signal"], SIGTERM);
  EXPECT_EQ(Starts(0), 1);
  for (const std::string& r : daemon_->requests()) {
    if (r.find("/assignments") != std::string::npos) {
      EXPECT_EQ(r.find("GET /v1/nodes/node-7/assignments?version="), 0u) << r;
    }
  }
}

// A 429 with Retry-After holds heartbeats back for at least that long (plus at most half as jitter),
// instead of the 100 ms heartbeat interval.
TEST_F(AgentLoopTest, HonoursRetryAfterOnHeartbeats) {
  StartAgent(Options());
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() >= 2; }));
  daemon_->SetBusy(1);
  auto heartbeat_times = [&] {
    std::vector<std::chrono::steady_clock::time_point> out;
    std::vector<std::string> reqs = daemon_->requests();
    std::vector<std::chrono::steady_clock::time_point> times = daemon_->request_times();
    for (std::size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i].find("/heartbeat") != std::string::npos) out.push_back(times[i]);
    return out;
  };
  const std::size_t before = heartbeat_times().size();
  ASSERT_TRUE(WaitFor([&] { return heartbeat_times().size() >= before + 2; }));  // refused, then the next
  std::vector<std::chrono::steady_clock::time_point> t = heartbeat_times();
  const auto gap = t[before + 1] - t[before];
  EXPECT_GE(gap, 1000ms) << "the agent came back before Retry-After";
  EXPECT_LT(gap, 2500ms) << "jitter adds at most half of Retry-After (plus scheduling slack)";
  daemon_->SetBusy(std::nullopt);
  const std::size_t served = daemon_->heartbeats().size();
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() > served; }));
}

TEST_F(AgentLoopTest, SurvivesDaemonOutageAndReregistersWhenForgotten) {
  StartAgent(Options());
  daemon_->SetAssignments(Json::array({Rank(1, 0, "exec sleep 100")}));
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running"; }));
  int pid = LatestEntry(*daemon_, 1, 0)["pid"];

  daemon_->SetDown(true);
  std::size_t before = daemon_->requests().size();
  ASSERT_TRUE(WaitFor([&] { return daemon_->requests().size() > before + 5; }));  // heartbeats answered 503
  daemon_->SetDown(false);
  daemon_->ForgetNode();
  ASSERT_TRUE(WaitFor([&] { return daemon_->registrations().size() >= 2; }));
  std::size_t seen = daemon_->heartbeats().size();
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() > seen; }));
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0)["pid"], pid);
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0)["state"], "running");
  EXPECT_EQ(Starts(0), 1);

  // The daemon itself goes away and comes back on the same port: the rank is untouched.
  int port = daemon_->port();
  daemon_.reset();
  daemon_ = std::make_unique<FakeDaemon>(port);
  ASSERT_TRUE(WaitFor([&] { return !daemon_->registrations().empty() && !daemon_->heartbeats().empty(); }));
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0)["pid"], pid);
  EXPECT_EQ(Starts(0), 1);
}

// A rank's relayed reports (SHEPHERD_RELAY_DIR) ride on the heartbeats; a file goes only once a heartbeat
// carrying it was answered 200, so what a rank writes while the daemon is away arrives afterwards.
TEST_F(AgentLoopTest, RelayedReportsRideOnHeartbeatsAndStayUntilAnswered) {
  StartAgent(Options());
  daemon_->SetAssignments(Json::array({Rank(1, 0, "exec sleep 100")}));
  std::string env_file = dir_.file("env-r0");
  ASSERT_TRUE(WaitFor([&] { return testing::FileExists(env_file); }));
  const std::string relay = ParseEnvFile(ReadFile(env_file))["SHEPHERD_RELAY_DIR"];
  EXPECT_EQ(relay, dir_.path() + "/relay/job-1-a1-r0");
  struct stat st {};
  ASSERT_EQ(::stat(relay.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());  // the rank's user (the agent's own here)

  auto carried = [&](int step) {
    for (const Json& hb : daemon_->heartbeats())
      for (const Json& e : hb.value("reports", Json::array()))
        if (e["job"] == "job-1" && e["attempt"] == 1 && e["rank"] == 0)
          for (const Json& r : e["reports"])
            if (r["step"] == step) return true;
    return false;
  };
  const std::string file = relay + "/1764410000000-000001.json";
  daemon_->SetDown(true);
  std::ofstream(file) << R"({"reports": [{"rank": 0, "attempt": 1, "kind": "checkpoint", "step": 3,
                             "path": "/c/3"}]})";
  std::size_t before = daemon_->requests().size();
  ASSERT_TRUE(WaitFor([&] { return daemon_->requests().size() > before + 3; }));  // heartbeats answered 503
  EXPECT_TRUE(testing::FileExists(file));
  EXPECT_FALSE(carried(3));
  daemon_->SetDown(false);
  ASSERT_TRUE(WaitFor([&] { return carried(3); }));
  ASSERT_TRUE(WaitFor([&] { return !testing::FileExists(file); }));

  // Once the rank's exit is acknowledged and it is no longer desired, its directory goes.
  daemon_->SetAssignments(Json::array());
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "exited"; }));
  ASSERT_TRUE(WaitFor([&] { return !testing::FileExists(relay); }));
}

TEST_F(AgentLoopTest, RestartedAgentAdoptsItsRanks) {
  StartAgent(Options());
  daemon_->SetAssignments(Json::array({Rank(1, 0, "exec sleep 100")}));
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running"; }));
  int pid = LatestEntry(*daemon_, 1, 0)["pid"];
  StopAgent();
  ASSERT_TRUE(ProcessStartTime(pid)) << "stopping the agent must not stop its ranks";

  std::size_t seen = daemon_->heartbeats().size();
  StartAgent(Options());
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() > seen + 2; }));
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0)["pid"], pid);
  EXPECT_EQ(Starts(0), 1);

  daemon_->SetAssignments(Json::array());
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "exited"; }));
  EXPECT_TRUE(LatestEntry(*daemon_, 1, 0)["exit_code"].is_null()) << "adopted: exit code unknown";
}

// A fleet operator grew n2 to 4 GPUs in the daemon and restarted its agent with the old --gpus 2: the
// registration got 409 (a busy node's GPU count cannot shrink), the agent sent no heartbeat, and 10 s later
// the node was lost, failed and its ranks stopped. A refused agent serves the node as registered.
TEST_F(AgentLoopTest, ARefusedRegistrationStillHeartbeatsAndKeepsTheRanks) {
  daemon_->SetLease(5);
  StartAgent(Options());
  daemon_->SetAssignments(Json::array({Rank(1, 0, "exec sleep 100")}));
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running"; }));
  int pid = LatestEntry(*daemon_, 1, 0)["pid"];
  StopAgent();
  daemon_->SetRegisterConflict(true);
  std::size_t registered = daemon_->registrations().size(), seen = daemon_->heartbeats().size();
  StartAgent(Options());
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() > seen + 3; }));
  EXPECT_EQ(daemon_->registrations().size(), registered + 1) << "offered once, then again only after 60 s";
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0)["pid"], pid);
  EXPECT_EQ(StateOf(*daemon_, 1, 0), "running");
  EXPECT_EQ(Starts(0), 1);
}

// An ML engineer found 951 progress pages of cancelled and killed ranks in /dev/shm: the client's helper
// removes its page's name when it exits, not when the rank's group is killed with it.
TEST_F(AgentLoopTest, AnExitedRanksProgressPageIsRemoved) {
  const std::string page = "/dev/shm/shepherd-job-1-a1-r0-" + std::to_string(::getpid()) + ".page";
  const std::string other = "/dev/shm/shepherd-job-1-a1-r10-" + std::to_string(::getpid()) + ".page";
  std::ofstream(page) << "x";
  std::ofstream(other) << "x";
  StartAgent(Options());
  daemon_->SetAssignments(Json::array({Rank(1, 0, "exec sleep 100")}));
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running"; }));
  EXPECT_TRUE(std::filesystem::exists(page));
  daemon_->SetAssignments(Json::array());
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "exited"; }));
  EXPECT_FALSE(std::filesystem::exists(page));
  EXPECT_TRUE(std::filesystem::exists(other)) << "another rank's page stays";
  std::filesystem::remove(other);
}

TEST_F(AgentLoopTest, ReportsGpuFaultsAndSpareFlag) {
  std::ofstream(dir_.file("gpu_faults.json"))
      << R"([{"gpu": 1, "kind": "ecc_uncorrectable", "detail": "x"}])";
  AgentOptions o = Options();
  o.spare = true;
  StartAgent(o);
  ASSERT_TRUE(WaitFor([&] { return !daemon_->heartbeats().empty(); }));
  EXPECT_EQ(daemon_->registrations()[0]["spare"], true);
  Json hb = daemon_->heartbeats()[0];
  EXPECT_EQ(hb["gpu_faults"][0]["kind"], "ecc_uncorrectable");
  EXPECT_EQ(hb["agent"]["pid"], ::getpid());
}

TEST_F(AgentLoopTest, StopIsPromptDuringALongPoll) {
  AgentOptions o = Options();
  o.long_poll_wait = 30s;
  StartAgent(o);
  ASSERT_TRUE(WaitFor([&] {
    int polls = 0;
    for (const std::string& r : daemon_->requests()) polls += r.find("wait=30") != std::string::npos;
    return polls > 0;
  }));
  auto start = std::chrono::steady_clock::now();
  StopAgent();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// Replicated daemon: the first replica dies; a rank exits while it is down. The exit is kept and reported
// to the second replica, which acknowledges it; the other rank keeps running (the second replica renews
// the lease) and nothing restarts.
TEST_F(AgentLoopTest, AnExitReportedWhileTheFirstReplicaIsDownIsAcknowledgedByTheSecond) {
  FakeDaemon second;
  second.KnowNode();  // replicated state: every replica knows the node
  daemon_->SetLease(3);
  second.SetLease(3);
  const std::string go = dir_.file("go");
  const Json ranks = {Rank(1, 0, "exec sleep 100"),
                      Rank(1, 1, "while [ ! -f " + go + " ]; do sleep 0.05; done; exit 3")};
  daemon_->SetAssignments(ranks);
  second.SetAssignments(ranks);  // the same version (1) on both
  AgentOptions o = Options();
  o.server = daemon_->url() + "," + second.url();
  StartAgent(o);
  ASSERT_TRUE(
      WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running" && StateOf(*daemon_, 1, 1) == "running"; }));
  const int pid = LatestEntry(*daemon_, 1, 0)["pid"];
  EXPECT_TRUE(second.heartbeats().empty()) << "the first replica answers: the second is not asked";

  daemon_.reset();  // connections refused from here on
  std::ofstream(go) << "1";
  ASSERT_TRUE(WaitFor([&] { return StateOf(second, 1, 1) == "exited"; }));
  EXPECT_EQ(LatestEntry(second, 1, 1)["exit_code"], 3);
  // Acknowledged there: later heartbeats carry only the running rank.
  std::size_t seen = second.heartbeats().size();
  ASSERT_TRUE(WaitFor([&] {
    std::vector<Json> hbs = second.heartbeats();
    return hbs.size() > seen + 1 && hbs.back()["processes"].size() == 1;
  }));
  // Past the 3 s lease the first replica granted: the second one renews it, rank 0 runs on untouched.
  const std::size_t renewed = second.heartbeats().size();
  ASSERT_TRUE(WaitFor([&] { return second.heartbeats().size() > renewed + 35; }));  // >= 3.5 s at 100 ms
  EXPECT_EQ(LatestEntry(second, 1, 0)["state"], "running");
  EXPECT_EQ(LatestEntry(second, 1, 0)["pid"], pid);
  EXPECT_TRUE(::kill(pid, 0) == 0);
  EXPECT_EQ(Starts(0), 1);
  EXPECT_EQ(Starts(1), 1);
  EXPECT_TRUE(second.registrations().empty()) << "the node was known: no registration needed";
}

// A follower answers with a redirect to the leader: the agent registers and heartbeats there, and asks the
// leader directly from then on (the leader is not in --server: it is learned).
TEST_F(AgentLoopTest, FollowsAFollowersRedirectToTheLeader) {
  FakeDaemon leader;
  daemon_->SetRedirect(leader.url());
  StartAgent(Options());
  ASSERT_TRUE(WaitFor([&] { return !leader.registrations().empty() && leader.heartbeats().size() > 5; }));
  EXPECT_EQ(leader.registrations()[0]["id"], "node-7");
  EXPECT_TRUE(daemon_->registrations().empty() && daemon_->heartbeats().empty());
  // One redirect per client (the supervision thread's and the poll thread's), then the leader directly.
  EXPECT_LE(daemon_->requests().size(), 2u);
}

TEST(AgentCreate, ValidatesOptions) {
  AgentOptions o;
  o.server = "http://127.0.0.1:1";
  EXPECT_EQ(Agent::Create(o).status().code(), Code::kInvalidArgument);  // no node id
  o.node_id = "n";
  EXPECT_EQ(Agent::Create(o).status().code(), Code::kInvalidArgument);  // no gpus
  o.gpus = 1;
  o.server = "ftp://x";
  EXPECT_EQ(Agent::Create(o).status().code(), Code::kInvalidArgument);
  o.server = "http://127.0.0.1:1,,http://127.0.0.1:2";
  Status s = Agent::Create(o).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--server"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace shepherd::agent

namespace shepherd::agent {
namespace {

bool Alive(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

// Fencing: cut off from the daemon past its lease, the agent has stopped every rank by the expiry, even one
// that ignores SIGTERM; it does not restart them when the daemon answers again.
TEST_F(AgentLoopTest, RanksAreStoppedWhenTheLeaseRunsOut) {
  constexpr auto kLease = 2s;
  daemon_->SetLease(std::chrono::duration<double>(kLease).count());
  AgentOptions o = Options();
  o.fence_grace = 500ms;
  StartAgent(o);
  daemon_->SetAssignments({Rank(1, 0, "exec sleep 100"), Rank(1, 1, "trap '' TERM; sleep 100 & wait")});
  ASSERT_TRUE(
      WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running" && StateOf(*daemon_, 1, 1) == "running"; }));
  pid_t pid0 = LatestEntry(*daemon_, 1, 0)["pid"], pid1 = LatestEntry(*daemon_, 1, 1)["pid"];

  std::size_t answered = daemon_->heartbeats().size();
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() > answered; }));
  daemon_->SetDown(true);  // unreachable from here on: the last lease was granted before this moment
  auto down_at = std::chrono::steady_clock::now();
  // Not before the lease is nearly out (one heartbeat interval of slack for when it was granted).
  std::this_thread::sleep_until(down_at + kLease - o.fence_grace - o.heartbeat_interval - 200ms);
  EXPECT_TRUE(Alive(pid0) && Alive(pid1)) << "ranks stopped long before the lease ran out";
  ASSERT_TRUE(WaitFor([&] { return !Alive(pid0) && !Alive(pid1); }));
  double stopped_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - down_at).count();
  EXPECT_LE(stopped_after, std::chrono::duration<double>(kLease).count() + 1.0);  // scheduling slack

  daemon_->SetDown(false);
  ASSERT_TRUE(
      WaitFor([&] { return StateOf(*daemon_, 1, 0) == "exited" && StateOf(*daemon_, 1, 1) == "exited"; }));
  EXPECT_EQ(LatestEntry(*daemon_, 1, 1)["signal"], SIGKILL);
  // Their exits say the agent's fence stopped them: the daemon then blames neither the ranks nor the node.
  EXPECT_EQ(LatestEntry(*daemon_, 1, 0).value("fenced", false), true);
  EXPECT_EQ(LatestEntry(*daemon_, 1, 1).value("fenced", false), true);
  EXPECT_EQ(Starts(0), 1);  // fenced ranks are not restarted: that is the daemon's decision
  EXPECT_EQ(Starts(1), 1);
}

// A daemon that sheds (429 with Retry-After) is busy, not gone: the agent holds off and retries, and its
// ranks keep running on the lease the last answer granted; a 200 after the busy spell renews it. No fence.
TEST_F(AgentLoopTest, ABusyDaemonNeverFencesRanksBeforeTheLease) {
  daemon_->SetLease(6.0);
  AgentOptions o = Options();
  o.fence_grace = 500ms;
  StartAgent(o);
  daemon_->SetAssignments(Json::array({Rank(1, 0, "exec sleep 100")}));
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running"; }));
  pid_t pid = LatestEntry(*daemon_, 1, 0)["pid"];
  const std::size_t answered = daemon_->heartbeats().size();
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() > answered; }));  // a fresh 6 s lease
  daemon_->SetBusy(1);
  auto heartbeat_requests = [&] {
    std::size_t n = 0;
    for (const std::string& r : daemon_->requests()) n += r.find("/heartbeat") != std::string::npos;
    return n;
  };
  const std::size_t before = heartbeat_requests();
  ASSERT_TRUE(WaitFor([&] { return heartbeat_requests() >= before + 3; }));  // three refused (~2-4 s)
  EXPECT_TRUE(Alive(pid)) << "a busy daemon is not a reason to fence";
  daemon_->SetBusy(std::nullopt);
  const std::size_t served = daemon_->heartbeats().size();
  ASSERT_TRUE(WaitFor([&] { return daemon_->heartbeats().size() > served; }));
  EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(StateOf(*daemon_, 1, 0), "running");
  EXPECT_EQ(Starts(0), 1);
}

}  // namespace
}  // namespace shepherd::agent

namespace shepherd::agent {
namespace {

// A follower renewing leases (docs/agent-protocol.md, "Lease"): the leader is gone (connections refused),
// the follower redirects ordinary heartbeats to it and answers renew-only ones itself.
class RenewOnlyTest : public AgentLoopTest {
 protected:
  void SetUp() override {
    daemon_->SetLease(2);
    follower_.KnowNode();
    follower_.SetLease(2);
    follower_.SetRedirect(daemon_->url());
    follower_.SetRenewAnswer(Json{{"renew_only", true}, {"lease_s", 2}, {"ack_exits", Json::array()}});
  }
  AgentOptions TwoReplicas() {
    AgentOptions o = Options();
    o.server = daemon_->url() + "," + follower_.url();
    o.fence_grace = 500ms;
    return o;
  }
  FakeDaemon follower_;
};

// Its answer renews the lease and takes nothing: the exit stays in every heartbeat and the relayed batch
// file stays on disk until a leader's answer takes them.
TEST_F(RenewOnlyTest, AFollowersRenewalKeepsTheLeaseAndTakesNoExitNorRelayedReport) {
  const std::string go = dir_.file("go");
  const Json ranks = {Rank(1, 0, "exec sleep 100"),
                      Rank(1, 1, "while [ ! -f " + go + " ]; do sleep 0.05; done; exit 3")};
  daemon_->SetAssignments(ranks);
  StartAgent(TwoReplicas());
  ASSERT_TRUE(
      WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running" && StateOf(*daemon_, 1, 1) == "running"; }));
  const int pid = LatestEntry(*daemon_, 1, 0)["pid"];
  ASSERT_TRUE(WaitFor([&] { return !ReadFile(dir_.file("env-r0")).empty(); }));
  const std::string relay = ParseEnvFile(ReadFile(dir_.file("env-r0")))["SHEPHERD_RELAY_DIR"];
  ASSERT_FALSE(relay.empty());

  daemon_.reset();  // the leader is gone: ordinary heartbeats fail, renew-only ones reach the follower
  // A batch the rank wrote for its agent to relay (as the client writes it: a temporary name, then linked).
  std::ofstream(relay + "/.b") << R"({"reports":[{"step":2}]})";
  std::filesystem::rename(relay + "/.b", relay + "/1700000000000-000002.json");
  std::ofstream(go) << "1";
  ASSERT_TRUE(WaitFor([&] {
    std::vector<Json> rs = follower_.renewals();
    if (rs.empty()) return false;
    for (const Json& p : rs.back()["processes"])
      if (p["rank"] == 1 && p["state"] == "exited") return true;
    return false;
  }));
  // Past the 2 s lease the leader granted, on the follower's renewals alone: rank 0 runs on, the exit is
  // resent with every renewal (never acknowledged), the batch stays on disk and rides along each time.
  const std::size_t seen = follower_.renewals().size();
  ASSERT_TRUE(WaitFor([&] { return follower_.renewals().size() > seen + 30; }));  // >= 3 s at 100 ms
  EXPECT_TRUE(::kill(pid, 0) == 0);
  EXPECT_EQ(Starts(0), 1);
  std::vector<Json> rs = follower_.renewals();
  for (std::size_t i = seen; i < rs.size(); ++i) {
    bool exit_listed = false;
    for (const Json& p : rs[i]["processes"])
      exit_listed = exit_listed || (p["rank"] == 1 && p["state"] == "exited");
    EXPECT_TRUE(exit_listed) << "renewal " << i << " dropped the unacknowledged exit";
    ASSERT_TRUE(rs[i].contains("reports")) << "renewal " << i;
  }
  EXPECT_TRUE(std::filesystem::exists(relay + "/1700000000000-000002.json"));
  EXPECT_TRUE(follower_.heartbeats().empty()) << "renew-only heartbeats are all the follower answered";

  // A leader answers again (here: the follower becomes it): the exit is acknowledged and the file goes.
  follower_.SetRenewAnswer(std::nullopt);
  follower_.SetRedirect("");
  ASSERT_TRUE(WaitFor([&] {
    std::vector<Json> hbs = follower_.heartbeats();
    return hbs.size() > 2 && hbs.back()["processes"].size() == 1;
  }));
  EXPECT_FALSE(std::filesystem::exists(relay + "/1700000000000-000002.json"));
  EXPECT_TRUE(::kill(pid, 0) == 0);
}

// A follower whose view shows the node lost answers node_lost: every rank stops at once (SIGTERM, then
// SIGKILL fence_grace later), long before the lease the leader granted would end.
TEST_F(RenewOnlyTest, ANodeLostAnswerStopsEveryRankAtOnce) {
  daemon_->SetLease(30);
  daemon_->SetAssignments(Json::array({Rank(1, 0, "exec sleep 100")}));
  StartAgent(TwoReplicas());
  ASSERT_TRUE(WaitFor([&] { return StateOf(*daemon_, 1, 0) == "running"; }));
  const int pid = LatestEntry(*daemon_, 1, 0)["pid"];
  follower_.SetRenewAnswer(Json{{"renew_only", true}, {"node_lost", true}, {"ack_exits", Json::array()}});
  daemon_.reset();
  const auto cut = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return !follower_.renewals().empty(); }));
  ASSERT_TRUE(WaitFor([&] { return ::kill(pid, 0) != 0; }));  // reaped by the agent
  EXPECT_LT(std::chrono::steady_clock::now() - cut, 10s) << "the 30 s lease was not waited for";
}

}  // namespace
}  // namespace shepherd::agent
