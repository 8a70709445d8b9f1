// Supervisor and process primitives with real processes (/bin/sh scripts).
#include "agent/process.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <thread>

#include "agent/supervisor.h"
#include "tests/agent/test_util.h"

namespace shepherd::agent {
namespace {

using namespace std::chrono_literals;
using testing::FileExists;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitFor;

SteadyTime Now() {
  return std::chrono::steady_clock::now();
}

RankAssignment Sh(int rank, const std::string& script, std::map<std::string, std::string> env = {},
                  int attempt = 1) {
  return {{"job-1", attempt, rank}, rank, {"/bin/sh", "-c", script}, std::move(env)};
}

class SupervisorTest : public ::testing::Test {
 protected:
  std::unique_ptr<Supervisor> Open(std::chrono::milliseconds grace = 10s) {
    return OpenWith({dir_.path(), grace});
  }
  std::unique_ptr<Supervisor> OpenWith(const SupervisorOptions& o) {
    auto s = Supervisor::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return std::move(*s);
  }
  // Polls until the entry for `key` has exited; returns it.
  std::optional<TrackedProcess> WaitExit(Supervisor& s, const RankKey& key,
                                         std::chrono::milliseconds t = 10s) {
    std::optional<TrackedProcess> out;
    WaitFor(
        [&] {
          s.Poll(Now());
          for (const TrackedProcess& p : s.processes())
            if (p.key == key && p.phase == ProcessPhase::kExited) out = p;
          return out.has_value();
        },
        t);
    return out;
  }
  pid_t PidOf(const Supervisor& s, const RankKey& key) {
    for (const TrackedProcess& p : s.processes())
      if (p.key == key) return p.pid;
    return 0;
  }
  // Leaves nothing running: stops every process group still tracked and reaps our children.
  void TearDown() override {
    for (pid_t pid : spawned_) {
      SignalGroup(pid, SIGKILL);
      ::waitpid(pid, nullptr, WNOHANG);
    }
  }
  void Track(pid_t pid) { spawned_.push_back(pid); }

  TempDir dir_;
  std::vector<pid_t> spawned_;
};

TEST_F(SupervisorTest, StartsWithEnvLogAndCwdAndReportsExitCode) {
  auto s = Open();
  std::string log = s->log_path({"job-1", 1, 0});
  std::ofstream(log) << "earlier run\n";
  s->SetDesired({Sh(0, "echo rank=$RANK pwd=$(pwd); echo oops >&2; exit 3", {{"RANK", "0"}})}, Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->exit.exit_code, 3);
  EXPECT_FALSE(p->exit.signal);
  EXPECT_EQ(ReadFile(log), "earlier run\nrank=0 pwd=" + dir_.path() + "\noops\n");
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].running);
  EXPECT_EQ(r[0].exit_code, 3);
}

// The agent's own environment (its credentials, proxies, hooks) never reaches a rank: only a documented
// list passes, PATH is fixed, and the assignment's env is laid over that.
TEST_F(SupervisorTest, RanksInheritOnlyTheDocumentedPartOfTheAgentsEnvironment) {
  ::setenv("SHEPHERD_AGENT_TEST_INHERITED", "from-agent", 1);
  ::setenv("https_proxy", "http://agent-proxy:3128", 1);
  ::setenv("LC_TIME", "C", 1);
  const std::string agent_path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  ::setenv("PATH", ("/agent/only/bin:" + agent_path).c_str(), 1);
  auto s = Open();
  s->SetDesired({Sh(0, "env > " + dir_.file("env.txt") + "; exit 0", {{"RANK", "0"}})}, Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  ASSERT_TRUE(WaitExit(*s, {"job-1", 1, 0}));
  ::unsetenv("SHEPHERD_AGENT_TEST_INHERITED");
  ::unsetenv("https_proxy");
  ::setenv("PATH", agent_path.c_str(), 1);
  std::string env = "\n" + ReadFile(dir_.file("env.txt"));
  EXPECT_EQ(env.find("SHEPHERD_AGENT_TEST_INHERITED"), std::string::npos) << env;
  EXPECT_EQ(env.find("https_proxy"), std::string::npos) << env;
  EXPECT_EQ(env.find("/agent/only/bin"), std::string::npos) << env;
  EXPECT_NE(env.find("\nPATH=" + std::string(kRankPath) + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nLC_TIME=C\n"), std::string::npos) << env;
  EXPECT_NE(env.find("\nRANK=0\n"), std::string::npos) << env;
}

TEST(RankEnvironment, RunAsSetsTheRanksOwnIdentity) {
  std::string agent_home = "HOME=/root", user = "USER=root", key = "AWS_SECRET_ACCESS_KEY=x", lang = "LANG=C";
  char* env[] = {agent_home.data(), user.data(), key.data(), lang.data(), nullptr};
  RunAs alice{1000, 1000, {}, "alice", "/home/alice"};
  std::map<std::string, std::string> got = RankBaseEnvironment(env, alice);
  std::map<std::string, std::string> want = {{"HOME", "/home/alice"},
                                             {"LANG", "C"},
                                             {"LOGNAME", "alice"},
                                             {"PATH", std::string(kRankPath)},
                                             {"USER", "alice"}};
  EXPECT_EQ(got, want);
}

// A Unix user created for one test, removed with it (needs root and useradd).
class TestUser {
 public:
  explicit TestUser(const std::string& name) : name_(name + "-" + std::to_string(::getpid() % 100000)) {
    ok_ = std::system(("useradd -M -N -s /usr/sbin/nologin " + name_ + " >/dev/null 2>&1").c_str()) == 0;
  }
  ~TestUser() {
    if (ok_) (void)!std::system(("userdel " + name_ + " >/dev/null 2>&1").c_str());
  }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  bool ok_ = false;
};

// Ranks of different submitters run as different users (the daemon's run_as mapping), so one job's rank
// cannot read another's token from /proc/<pid>/environ; a user the agent was not given is refused.
TEST_F(SupervisorTest, EachRankRunsAsItsAssignedUserFromTheAllowedSet) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create users and drop to them";
  TestUser alice("shtest-alice"), bob("shtest-bob");
  if (!alice.ok() || !bob.ok()) GTEST_SKIP() << "useradd is not available";
  Result<RunAs> a = LookUpUser(alice.name()), b = LookUpUser(bob.name());
  ASSERT_TRUE(a.ok() && b.ok());
  TempDir out;
  ASSERT_EQ(::chmod(out.path().c_str(), 0777), 0);
  auto s = OpenWith({.state_dir = dir_.path(), .run_as = *a, .allowed_run_as = {*a, *b}});
  auto rank = [&](int r, const std::string& user) {
    RankAssignment x = Sh(r, "id -un > " + out.path() + "/r" + std::to_string(r) + "; sleep 30",
                          {{"SHEPHERD_WORKDIR", "/"}});
    x.run_as = user;
    return x;
  };
  s->SetDesired({rank(0, bob.name()), rank(1, ""), rank(2, "root")}, Now());
  for (int r : {0, 1, 2})
    if (pid_t p = PidOf(*s, {"job-1", 1, r})) Track(p);
  ASSERT_TRUE(WaitFor([&] { return ReadFile(out.file("r0")) != "" && ReadFile(out.file("r1")) != ""; }));
  EXPECT_EQ(ReadFile(out.file("r0")), bob.name() + "\n");
  EXPECT_EQ(ReadFile(out.file("r1")), alice.name() + "\n");  // no user named: the agent's default
  // root is not one of the agent's users: never started, and the exit says why.
  auto refused = WaitExit(*s, {"job-1", 1, 2});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->pid, 0);
  EXPECT_NE(refused->error.find("user root"), std::string::npos) << refused->error;
  EXPECT_FALSE(FileExists(out.file("r2")));
  s->StopAll(Now(), 1s);
  WaitFor([&] {
    s->Poll(Now());
    return s->Report().size() == 3 && !s->Report()[0].running && !s->Report()[1].running;
  });
}

TEST_F(SupervisorTest, WorkdirFromJobEnvAndSignalExit) {
  TempDir work;
  auto s = Open();
  s->SetDesired({Sh(0, "pwd > out; kill -9 $$", {{"SHEPHERD_WORKDIR", work.path()}})}, Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->exit.exit_code);
  EXPECT_EQ(p->exit.signal, SIGKILL);
  EXPECT_EQ(ReadFile(work.file("out")), work.path() + "\n");
}

TEST_F(SupervisorTest, ExitedRankIsNeverRestartedAndAckedExitIsDroppedOnceUndesired) {
  auto s = Open();
  std::vector<RankAssignment> desired = {Sh(0, "echo started >> " + dir_.file("starts") + "; exit 1")};
  s->SetDesired(desired, Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  ASSERT_TRUE(WaitExit(*s, {"job-1", 1, 0}));
  s->AckExits({{"job-1", 1, 0}});
  EXPECT_TRUE(s->Report().empty());
  s->SetDesired(desired, Now());  // still desired: kept as a tombstone, not restarted
  s->Poll(Now());
  EXPECT_EQ(s->processes().size(), 1u);
  EXPECT_EQ(ReadFile(dir_.file("starts")), "started\n");
  s->SetDesired({}, Now());
  s->Poll(Now());
  EXPECT_TRUE(s->processes().empty());
}

TEST_F(SupervisorTest, ProgramIsFoundInTheRanksPath) {
  TempDir bin;
  std::ofstream(bin.file("my-rank")) << "#!/bin/sh\nexit 5\n";
  std::filesystem::permissions(bin.file("my-rank"), std::filesystem::perms::owner_all);
  auto s = Open();
  s->SetDesired(
      {{{"job-1", 1, 0}, 0, {"my-rank"}, {{"PATH", "/nonexistent:" + bin.path() + ":/usr/bin:/bin"}}}},
      Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->exit.exit_code, 5) << p->error;
}

TEST_F(SupervisorTest, SpawnFailureIsReportedAsExitWithError) {
  auto s = Open();
  s->SetDesired({{{"job-1", 1, 0}, 0, {"/nonexistent/shepherd-rank"}, {}}}, Now());
  EXPECT_EQ(s->Poll(Now()), 1);
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].running);
  EXPECT_EQ(r[0].pid, 0);
  EXPECT_NE(r[0].error.find("No such file"), std::string::npos) << r[0].error;
  EXPECT_EQ(s->Poll(Now()), 0);  // not retried
}

// An agent restarted with fewer --gpus than the daemon's record of its node (the registration was refused,
// the agent serves the node as registered): a rank on a GPU the agent does not have is not started on it.
TEST_F(SupervisorTest, ARankOnAGpuTheAgentDoesNotHaveIsNotStarted) {
  SupervisorOptions o{dir_.path()};
  o.gpus = 2;
  auto s = OpenWith(o);
  s->SetDesired({{{"job-1", 1, 0}, 1, {"/bin/true"}, {}}, {{"job-1", 1, 1}, 3, {"/bin/true"}, {}}}, Now());
  ASSERT_TRUE(WaitExit(*s, {"job-1", 1, 0}));
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 2u);
  for (const ProcessReport& p : r) {
    EXPECT_FALSE(p.running);
    if (p.key.rank == 0) {
      EXPECT_NE(p.pid, 0);  // GPU 1 of 2: started
      EXPECT_TRUE(p.error.empty()) << p.error;
    } else {
      EXPECT_EQ(p.pid, 0);
      EXPECT_EQ(
          p.error,
          "GPU 3 is not one of this agent's 2 GPUs (--gpus 2): the daemon's record of the node has more; "
          "not started");
    }
  }
}

TEST_F(SupervisorTest, StopSendsSigterm) {
  auto s = Open();
  s->SetDesired({Sh(0, "exec sleep 100")}, Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  s->SetDesired({}, Now());
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->exit.signal, SIGTERM);
}

// A SIGKILL is the OOM killer's only if the node's OOM-kill count (/proc/vmstat oom_kill; a file written by
// the test here) rose shortly before; a `kill -9` leaves the count alone.
TEST_F(SupervisorTest, SigkillIsAnOomKillOnlyWhenTheNodesOomCountRose) {
  const std::string vmstat = dir_.file("vmstat");
  std::ofstream(vmstat) << "nr_free_pages 1000\noom_kill 5\nnr_zone_active_anon 7\n";
  SupervisorOptions o{dir_.path()};
  o.vmstat_path = vmstat;
  auto s = OpenWith(o);
  const std::string go0 = dir_.file("go0"), go1 = dir_.file("go1");
  s->SetDesired({Sh(0, "while [ ! -f " + go0 + " ]; do sleep 0.02; done; kill -9 $$"),
                 Sh(1, "while [ ! -f " + go1 + " ]; do sleep 0.02; done; kill -9 $$")},
                Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  Track(PidOf(*s, {"job-1", 1, 1}));
  s->Poll(Now());
  std::ofstream(go0) << "";  // killed by hand: the count stays at 5
  auto by_hand = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(by_hand);
  EXPECT_EQ(by_hand->exit.signal, SIGKILL);
  EXPECT_EQ(by_hand->oom_kill, false);

  std::ofstream(vmstat) << "nr_free_pages 1000\noom_kill 6\nnr_zone_active_anon 7\n";  // the kernel's kill
  std::ofstream(go1) << "";
  auto oom = WaitExit(*s, {"job-1", 1, 1});
  ASSERT_TRUE(oom);
  EXPECT_EQ(oom->oom_kill, true);
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].oom_kill, false);
  EXPECT_EQ(r[1].oom_kill, true);
  s.reset();
  // Kept across an agent restart until the daemon acknowledges the exit.
  SupervisorOptions again{dir_.path()};
  again.vmstat_path = vmstat;
  r = OpenWith(again)->Report();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].oom_kill, false);
  EXPECT_EQ(r[1].oom_kill, true);
}

TEST_F(SupervisorTest, OomKillIsNotReportedWhenUnknownOrForTheAgentsOwnSigkill) {
  SupervisorOptions o{dir_.path(), 300ms};
  o.vmstat_path = dir_.file("no-such-vmstat");
  auto s = OpenWith(o);
  s->SetDesired({Sh(0, "kill -9 $$")}, Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  auto unknown = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->exit.signal, SIGKILL);
  EXPECT_FALSE(unknown->oom_kill);  // the count cannot be read: not known

  // The agent's own SIGKILL (a stop whose TERM was ignored), even while the count rises.
  const std::string vmstat = dir_.file("vmstat");
  std::ofstream(vmstat) << "oom_kill 1\n";
  o.vmstat_path = vmstat;
  s.reset();
  s = OpenWith(o);
  const std::string ready = dir_.file("ready");
  s->SetDesired({Sh(1, "trap '' TERM; echo ready > " + ready + "; while :; do sleep 0.05; done")}, Now());
  Track(PidOf(*s, {"job-1", 1, 1}));
  ASSERT_TRUE(WaitFor([&] { return ReadFile(ready) == "ready\n"; }));
  s->Poll(Now());
  std::ofstream(vmstat) << "oom_kill 2\n";
  s->SetDesired({}, Now());
  auto stopped = WaitExit(*s, {"job-1", 1, 1});
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->exit.signal, SIGKILL);
  EXPECT_FALSE(stopped->oom_kill);
}

TEST_F(SupervisorTest, StopEscalatesToSigkillWhenTermIsIgnored) {
  auto s = Open(300ms);
  std::string ready = dir_.file("ready");
  s->SetDesired({Sh(0, "trap '' TERM; echo ready > " + ready + "; while :; do sleep 0.05; done")}, Now());
  pid_t pid = PidOf(*s, {"job-1", 1, 0});
  Track(pid);
  ASSERT_TRUE(WaitFor([&] { return ReadFile(ready) == "ready\n"; }));
  s->SetDesired({}, Now());
  s->Poll(Now());
  EXPECT_TRUE(ProcessStartTime(pid)) << "still alive during the grace period";
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->exit.signal, SIGKILL);
}

TEST_F(SupervisorTest, StoppedRankGetsSigcontAndActsOnTerm) {
  auto s = Open(60s);  // a long grace: the exit must come from TERM + CONT, not from SIGKILL
  std::string ready = dir_.file("ready");
  s->SetDesired({Sh(0, "trap 'exit 7' TERM; echo ready > " + ready + "; while :; do sleep 0.05; done")},
                Now());
  pid_t pid = PidOf(*s, {"job-1", 1, 0});
  Track(pid);
  ASSERT_TRUE(WaitFor([&] { return ReadFile(ready) == "ready\n"; }));
  ASSERT_TRUE(SignalGroup(pid, SIGSTOP));
  s->SetDesired({}, Now());
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->exit.exit_code, 7);
}

TEST_F(SupervisorTest, GroupLeftoversAreKilledWhenTheLeaderExits) {
  auto s = Open();
  std::string child = dir_.file("child");
  s->SetDesired({Sh(0, "sleep 100 & echo $! > " + child + "; exit 0")}, Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  ASSERT_TRUE(WaitExit(*s, {"job-1", 1, 0}));
  pid_t orphan = std::stoi(ReadFile(child));
  EXPECT_TRUE(WaitFor([&] { return !ProcessStartTime(orphan); }));
}

TEST_F(SupervisorTest, StaleAttemptStopsBeforeTheNewAttemptStarts) {
  auto s = Open(10s);
  std::string ready = dir_.file("ready");
  s->SetDesired(
      {Sh(0, "trap 'sleep 0.3; exit 0' TERM; echo ready > " + ready + "; while :; do sleep 0.05; done")},
      Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  ASSERT_TRUE(WaitFor([&] { return ReadFile(ready) == "ready\n"; }));
  s->SetDesired({Sh(0, "exec sleep 100", {}, 2)}, Now());
  EXPECT_EQ(PidOf(*s, {"job-1", 2, 0}), 0) << "must wait for attempt 1 to leave GPU 0";
  ASSERT_TRUE(WaitExit(*s, {"job-1", 1, 0}));
  s->Poll(Now());
  pid_t second = PidOf(*s, {"job-1", 2, 0});
  EXPECT_GT(second, 0);
  Track(second);
}

TEST_F(SupervisorTest, RestartedSupervisorAdoptsRunningRanks) {
  pid_t pid;
  {
    auto s = Open();
    s->SetDesired({Sh(0, "exec sleep 100")}, Now());
    pid = PidOf(*s, {"job-1", 1, 0});
    Track(pid);
  }  // the "agent" goes away; the rank keeps running
  ASSERT_TRUE(ProcessStartTime(pid));
  auto s = Open();
  ASSERT_EQ(s->processes().size(), 1u);
  EXPECT_TRUE(s->processes()[0].adopted);
  EXPECT_EQ(s->processes()[0].phase, ProcessPhase::kRunning);
  s->SetDesired({Sh(0, "exec sleep 100")}, Now());
  EXPECT_EQ(s->processes().size(), 1u) << "adopted rank must not be started twice";
  s->SetDesired({}, Now());
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->exit.exit_code);  // not our child: unknown
  EXPECT_FALSE(p->exit.signal);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);  // the test process is the real parent here
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST_F(SupervisorTest, RankThatDiedWhileAgentWasDownIsReportedExited) {
  pid_t pid;
  {
    auto s = Open();
    s->SetDesired({Sh(0, "exec sleep 100")}, Now());
    pid = PidOf(*s, {"job-1", 1, 0});
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  auto s = Open();
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].running);
  EXPECT_FALSE(r[0].exit_code);
  EXPECT_EQ(r[0].pid, pid);
  s->SetDesired({Sh(0, "exec sleep 100")}, Now());
  EXPECT_EQ(s->processes().size(), 1u) << "an exited rank is not restarted after an agent restart";
}

TEST_F(SupervisorTest, PersistsUnackedExitsAcrossRestart) {
  {
    auto s = Open();
    s->SetDesired({Sh(0, "exit 4")}, Now());
    Track(PidOf(*s, {"job-1", 1, 0}));
    ASSERT_TRUE(WaitExit(*s, {"job-1", 1, 0}));
  }
  auto s = Open();
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].exit_code, 4);
}

TEST_F(SupervisorTest, FlightRecorderDumpsAreListedWithTheExit) {
  auto s = Open();
  // The rank writes a dump the way PyTorch does: $TORCH_FR_DUMP_TEMP_FILE followed by its rank.
  s->SetDesired({Sh(3, "printf 12345 > \"${TORCH_FR_DUMP_TEMP_FILE}3\"; exit 1", {{"RANK", "3"}})}, Now());
  Track(PidOf(*s, {"job-1", 1, 3}));
  auto p = WaitExit(*s, {"job-1", 1, 3});
  ASSERT_TRUE(p);
  std::string expected = dir_.path() + "/flight-recorder/job-1-a1-r3/nccl_trace_rank_3";
  ASSERT_EQ(p->dumps.size(), 1u);
  EXPECT_EQ(p->dumps[0].path, expected);
  EXPECT_EQ(p->dumps[0].size, 5u);
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  Json body = HeartbeatBody({1, "t"}, Json::array(), r);
  EXPECT_EQ(body["processes"][0]["flight_recorder"],
            Json::parse(R"([{"path": ")" + expected + R"(", "size": 5}])"));
}

TEST_F(SupervisorTest, UsersFlightRecorderPathWinsAndNoDumpMeansNoField) {
  TempDir mine;
  auto s = Open();
  s->SetDesired({Sh(0, "echo $TORCH_FR_DUMP_TEMP_FILE > " + mine.file("seen"),
                    {{"TORCH_FR_DUMP_TEMP_FILE", mine.file("fr_")}})},
                Now());
  Track(PidOf(*s, {"job-1", 1, 0}));
  auto p = WaitExit(*s, {"job-1", 1, 0});
  ASSERT_TRUE(p);
  EXPECT_EQ(ReadFile(mine.file("seen")), mine.file("fr_") + "\n");
  EXPECT_TRUE(p->dumps.empty());
  Json body = HeartbeatBody({1, "t"}, Json::array(), s->Report());
  EXPECT_FALSE(body["processes"][0].contains("flight_recorder"));
}

}  // namespace
}  // namespace shepherd::agent

namespace shepherd::agent {
namespace {

// Ranks drop to the --run-as user before exec (a job must not be root on every node).
TEST(RunAs, RankRunsAsTheConfiguredUserNotRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "dropping privileges needs root";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user 'nobody'";
  testing::TempDir dir;
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo uid=$(id -u) gid=$(id -g) groups=$(id -G)"};
  spec.log_path = dir.file("rank.log");
  spec.cwd = "/";
  spec.run_as = *nobody;
  Result<pid_t> pid = SpawnProcessGroup(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << testing::ReadFile(spec.log_path);
  const std::string log = testing::ReadFile(spec.log_path);
  EXPECT_NE(log.find("uid=" + std::to_string(nobody->uid) + " "), std::string::npos) << log;
  EXPECT_EQ(log.find("uid=0 "), std::string::npos) << log;
  EXPECT_EQ(log.find(" 0 "), std::string::npos) << "root group kept: " << log;
}

// Under --run-as the flight-recorder directory the agent makes for a rank was root's (0755): the rank could
// write no dump and PyTorch could make no pipe, so a hang left no evidence. The rank's user owns it.
TEST(RunAs, TheRanksUserOwnsItsFlightRecorderDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "dropping privileges needs root";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user 'nobody'";
  testing::TempDir dir;
  ::chmod(dir.path().c_str(), 0755);  // a state directory the rank's user may traverse, as in deploy/
  SupervisorOptions o{dir.path()};
  o.run_as = *nobody;
  auto s = Supervisor::Open(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  RankAssignment a{{"job-1", 1, 0}, 0, {"/bin/sh", "-c", "echo dump > ${TORCH_FR_DUMP_TEMP_FILE}0"}, {}};
  (*s)->SetDesired({a}, std::chrono::steady_clock::now());
  std::optional<TrackedProcess> exited;
  for (int i = 0; i < 1000 && !exited; ++i) {  // bounded polling for the exit, not a correctness wait
    (*s)->Poll(std::chrono::steady_clock::now());
    for (const TrackedProcess& p : (*s)->processes())
      if (p.phase == ProcessPhase::kExited) exited = p;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(exited);
  EXPECT_EQ(exited->exit.exit_code, 0) << testing::ReadFile((*s)->log_path(a.key));
  const std::string dump = dir.path() + "/flight-recorder/job-1-a1-r0/nccl_trace_rank_0";
  EXPECT_EQ(testing::ReadFile(dump), "dump\n");
}

TEST(RunAs, LookUpUserAcceptsNamesAndUids) {
  auto root = LookUpUser("0");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->uid, 0u);
  EXPECT_FALSE(LookUpUser("no-such-user-shepherd").ok());
}

}  // namespace
}  // namespace shepherd::agent
