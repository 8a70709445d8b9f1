// The fence keeper (agent/fence_keeper.h): its lease file, its steps, and the real keeper process stopping
// the listed ranks by the lease while the agent (here: the test process) does nothing.
#include "agent/fence_keeper.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <fstream>

#include "agent/process.h"
#include "core/json.h"
#include "tests/agent/test_util.h"

namespace shepherd::agent {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

TEST(FenceKeeper, LeaseFileRoundTripsAndIsClearedOrIgnoredWhenMalformed) {
  TempDir dir;
  EXPECT_FALSE(ReadLease(dir.path()));
  Lease lease{Clock::now() + 3s, 2000ms};
  ASSERT_TRUE(WriteLease(dir.path(), lease).ok());
  std::optional<Lease> back = ReadLease(dir.path());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->until, lease.until);
  EXPECT_EQ(back->grace, 2000ms);
  ClearLease(dir.path());
  EXPECT_FALSE(ReadLease(dir.path()));
  std::ofstream(dir.file("lease")) << "soon\n";
  EXPECT_FALSE(ReadLease(dir.path()));
}

TEST(FenceKeeper, TermsAtExpiryMinusGraceKillsAtExpiryOncePerLease) {
  Clock::time_point t0{};
  Lease lease{t0 + 10s, 2s};
  FenceProgress p;
  EXPECT_EQ(NextFenceStep(std::nullopt, t0 + 100s, p), FenceStep::kNone);  // no lease: nothing to enforce
  EXPECT_EQ(NextFenceStep(lease, t0 + 7999ms, p), FenceStep::kNone);
  EXPECT_EQ(NextFenceStep(lease, t0 + 8s, p), FenceStep::kTerm);
  EXPECT_EQ(NextFenceStep(lease, t0 + 9s, p), FenceStep::kNone);
  EXPECT_EQ(NextFenceStep(lease, t0 + 10s, p), FenceStep::kKill);
  EXPECT_EQ(NextFenceStep(lease, t0 + 11s, p), FenceStep::kNone);
  // Renewed (the agent heard from the daemon again): a new lease, enforced afresh.
  Lease renewed{t0 + 20s, 2s};
  EXPECT_EQ(NextFenceStep(renewed, t0 + 12s, p), FenceStep::kNone);
  // Woken only past the expiry (a keeper that was itself delayed): straight to SIGKILL, no TERM after it.
  EXPECT_EQ(NextFenceStep(renewed, t0 + 25s, p), FenceStep::kKill);
  EXPECT_EQ(NextFenceStep(renewed, t0 + 26s, p), FenceStep::kNone);
}

pid_t Spawn(const std::string& script, const std::string& dir) {
  Result<pid_t> pid =
      SpawnProcessGroup({{"/bin/sh", "-c", script}, {}, dir + "/rank.log", dir, std::nullopt});
  EXPECT_TRUE(pid.ok()) << pid.status().message();
  return pid.ok() ? *pid : -1;
}

Json Entry(pid_t pid, const std::string& state, std::uint64_t start) {
  return {{"job", "job-1"}, {"attempt", 1},        {"rank", pid},   {"gpu", 0},
          {"pid", pid},     {"start_time", start}, {"state", state}};
}

void Reap(pid_t pid) {
  SignalGroup(pid, SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return PollChildExit(pid).has_value(); }));
}

// A zombie leader (exited, its stopped agent has not reaped it) still counts: its group may hold the rank's
// other processes, and its id cannot have been reused.
TEST(FenceKeeper, ListsOnlyRunningRanksWithTheirRecordedStartTime) {
  TempDir dir;
  pid_t a = Spawn("exec sleep 100", dir.path()), b = Spawn("exec sleep 100", dir.path());
  pid_t z = Spawn("sleep 100 & exit 0", dir.path());
  // z's shell may already have exited (a zombie: ProcessStartTime says nullopt) on a loaded machine; its
  // stat still has the start time.
  std::uint64_t sa = *ProcessStartTime(a), sb = *ProcessStartTime(b), sz = ReadProcStat(z)->start_time;
  ASSERT_TRUE(WaitFor([&] { return !ProcessStartTime(z); }));  // a zombie: exited, not reaped
  Json j = {{"processes",
             {Entry(a, "running", sa), Entry(b, "running", sb + 1), Entry(b, "exited", sb),
              Entry(z, "running", sz), Entry(999999999, "running", 1)}}};
  std::ofstream(dir.file("processes.json")) << j.dump();
  // b: another start time = a reused pid.
  EXPECT_EQ(RunningRankGroups(dir.path()), (std::vector<pid_t>{a, z}));
  Reap(a);
  Reap(b);
  Reap(z);
}

// The agent is stopped (it never renews nor fences): the keeper stops the ranks the agent listed, even one
// that ignores SIGTERM, not before expiry - grace and by the expiry; a process it did not list is left alone.
TEST(FenceKeeper, KeeperStopsListedRanksByTheLeaseAndNothingElse) {
  TempDir dir;
  pid_t plain = Spawn("exec sleep 100", dir.path());
  pid_t stubborn = Spawn("trap '' TERM; sleep 100 & wait", dir.path());
  pid_t unlisted = Spawn("exec sleep 100", dir.path());
  std::uint64_t s_plain = *ProcessStartTime(plain), s_stubborn = *ProcessStartTime(stubborn);
  std::uint64_t s_unlisted = *ProcessStartTime(unlisted);
  Json j = {{"processes", {Entry(plain, "running", s_plain), Entry(stubborn, "running", s_stubborn)}}};
  std::ofstream(dir.file("processes.json")) << j.dump();
  Lease lease{Clock::now() + 1500ms, 500ms};
  ASSERT_TRUE(WriteLease(dir.path(), lease).ok());

  Result<pid_t> keeper = StartFenceKeeper(dir.path(), 20ms);
  ASSERT_TRUE(keeper.ok()) << keeper.status().message();
  std::this_thread::sleep_until(lease.until - lease.grace - 200ms);  // checks it is not early
  EXPECT_TRUE(ProcessAlive(plain, s_plain)) << "stopped long before expiry - grace";
  EXPECT_TRUE(ProcessAlive(stubborn, s_stubborn));
  ASSERT_TRUE(WaitFor([&] { return !ProcessAlive(plain, s_plain) && !ProcessAlive(stubborn, s_stubborn); }));
  double late_s = std::chrono::duration<double>(Clock::now() - lease.until).count();
  EXPECT_LE(late_s, 1.0);  // scheduling slack on a loaded machine
  EXPECT_TRUE(ProcessAlive(unlisted, s_unlisted)) << "the keeper stopped a process the agent did not list";

  ::kill(*keeper, SIGKILL);
  ::waitpid(*keeper, nullptr, 0);
  Reap(plain);
  Reap(stubborn);
  Reap(unlisted);
}

// An agent that starts a keeper and is then killed (SIGKILL, a crash): the keeper's pid.
pid_t KeeperOfAnAgentThatDies(const std::string& dir) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t agent = ::fork();
  if (agent == 0) {  // the "agent": one thread, as StartFenceKeeper requires
    Result<pid_t> keeper = StartFenceKeeper(dir, 20ms);
    pid_t k = keeper.ok() ? *keeper : -1;
    (void)!::write(fds[1], &k, sizeof k);
    ::raise(SIGKILL);
  }
  ::close(fds[1]);
  pid_t keeper = -1;
  EXPECT_EQ(::read(fds[0], &keeper, sizeof keeper), static_cast<ssize_t>(sizeof keeper));
  ::close(fds[0]);
  ::waitpid(agent, nullptr, 0);
  return keeper;
}

// One listed rank, a lease of 1.5 s (grace 0.5 s), and the keeper of an agent that has died.
struct OrphanedKeeper {
  OrphanedKeeper() {
    rank = Spawn("exec sleep 100", dir.path());
    started = *ProcessStartTime(rank);
    std::ofstream(dir.file("processes.json"))
        << Json{{"processes", {Entry(rank, "running", started)}}}.dump();
    lease = {Clock::now() + 1500ms, 500ms};
    EXPECT_TRUE(WriteLease(dir.path(), lease).ok());
    keeper = KeeperOfAnAgentThatDies(dir.path());
    keeper_started = keeper > 0 ? ProcessStartTime(keeper).value_or(0) : 0;
  }
  ~OrphanedKeeper() { Reap(rank); }
  bool KeeperGone() const { return !ProcessAlive(keeper, keeper_started); }

  TempDir dir;
  pid_t rank = -1, keeper = -1;
  std::uint64_t started = 0, keeper_started = 0;
  Lease lease;
};

// A tester killed an agent (kill -9): its keeper died with it, the ranks ran on unfenced, and once the
// node's lease expired the daemon started their replacements on the spare: two attempts of one job ran at
// once, writing one checkpoint directory. The keeper now outlives its agent, stops the ranks by the lease
// the agent left, and then exits.
TEST(FenceKeeper, TheKeeperOfAnAgentThatDiedStopsTheRanksByItsLastLeaseThenExits) {
  OrphanedKeeper o;
  ASSERT_GT(o.keeper, 0);
  EXPECT_TRUE(ProcessAlive(o.rank, o.started)) << "stopped at once, not by the lease";
  ASSERT_TRUE(WaitFor([&] { return !ProcessAlive(o.rank, o.started); }));
  EXPECT_GE(Clock::now(), o.lease.until - o.lease.grace);
  EXPECT_TRUE(WaitFor([&] { return o.KeeperGone(); })) << "the keeper lingers";
}

// The same agent restarted in time: the new agent adopts the ranks with the lease and the daemon renews it
// (the file changes); the old keeper leaves them to the new agent and exits.
TEST(FenceKeeper, TheKeeperOfAnAgentThatDiedLeavesTheRanksToANewAgent) {
  OrphanedKeeper o;
  ASSERT_GT(o.keeper, 0);
  // The new agent's heartbeats renew the lease, each to a later expiry.
  EXPECT_TRUE(WaitFor([&] {
    EXPECT_TRUE(WriteLease(o.dir.path(), {Clock::now() + 60s, 500ms}).ok());
    return o.KeeperGone();
  }));
  std::this_thread::sleep_until(o.lease.until + 300ms);  // past the old lease: checks nothing fired late
  EXPECT_TRUE(ProcessAlive(o.rank, o.started));
}

}  // namespace
}  // namespace shepherd::agent
