// "launcher": "slurm" across daemon restarts, on the real local Slurm cluster (tests/slurm/local_cluster.h)
// with the 4-rank PyTorch DDP job of launch_cluster.h, one srun step per attempt. Covers: a step that ends
// while no daemon watches is not run again; an allocation whose id was never recorded is found and taken,
// not asked for twice; a running step outlives the daemon (kill -9, then SIGTERM) and the next daemon
// watches it instead of starting a second one; an earlier daemon's srun still creating its step is waited
// for, and an srun of an older launch order started after the new daemon's order never runs its command.
// Runs in slurm_cluster_test, after launch_cluster_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/child_process.h"
#include "core/json.h"
#include "slurm/subprocess.h"
#include "tests/integration/harness.h"
#include "tests/slurm/launch_cluster.h"
#include "tests/slurm/local_cluster.h"

namespace shepherd::slurm {
namespace {

using ::shepherd::testing::Http;
using std::chrono::seconds;
using testing::AllocationGone;
using testing::AllocationOf;
using testing::LaunchDaemon;
using testing::LocalCluster;
using testing::RankPid;
using testing::ReadFile;
using testing::SrunPid;
using testing::WaitFor;

// The daemon stops (SIGTERM; its srun and the step go on) and the step ends before a new daemon starts on
// the same database. The new daemon must not run attempt 1 again: a tester's job trained twice from step 1
// that way. The step's end is reported with its exit unknown; whatever recovery then does starts from the
// last-known-good checkpoint.
TEST(SlurmLaunch, AStepThatEndsWhileNoDaemonWatchesIsNotRunAgain) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(150, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_EQ(d.StepLog(job, 1).find("done at step"), std::string::npos);  // still training
  ASSERT_TRUE(d.Stop());
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  ASSERT_TRUE(WaitFor(seconds(240), [&] {
    return count(d.StepLog(job, 1), ": done at step 150") == 4 &&
           LocalCluster::Sh({"squeue", "-h", "-s", "-j", alloc_id, "-o", "%j"}).find("shepherd-a1") ==
               std::string::npos;
  })) << d.StepLog(job, 1);
  d.Restart();
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "succeeded"; }))
      << d.Diagnose(job);
  EXPECT_EQ(count(d.StepLog(job, 1), "attempt 1: running steps 1..150"), 4) << d.StepLog(job, 1);
  const int attempts = d.Get("/v1/jobs/" + job).value("attempt", 0);
  for (int a = 2; a <= attempts; ++a)
    EXPECT_EQ(count(d.StepLog(job, a), "resumed from step"), 4) << d.StepLog(job, a);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

// A daemon that stopped between sbatch and recording the allocation's id (a crash, a storage stall): the
// record still wants an allocation and names no id. The next daemon finds the allocation its request made
// (sbatch's comment carries the request's name) and takes it: before, it asked a second time for the same
// nodes, and the job waited behind its own first allocation until that one's time limit. The stopped
// state is made by rewriting the record while no daemon runs, as the crash would have left it.
TEST(SlurmLaunch, AnAllocationWhoseIdWasNeverRecordedIsTakenNotAskedForTwice) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(150, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_FALSE(alloc_id.empty());
  ASSERT_TRUE(d.Stop());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((d.dir.path + "/shepherd.db").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE records SET body = json_set(body, '$.state', 'wanted', '$.id', '') "
      "WHERE collection = 'meta' AND key = 'slurm_alloc/" +
      job + "'";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  d.Restart();
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(60), [&] { return !AllocationOf(d, job).empty(); })) << d.Diagnose(job);
  EXPECT_EQ(AllocationOf(d, job), alloc_id);
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "succeeded"; }))
      << d.Diagnose(job) << LocalCluster::Sh({"squeue", "-o", "%i %j %T %k"});
  EXPECT_NE(d.daemon->log().find("allocation " + alloc_id + " of this request was submitted before"),
            std::string::npos)
      << d.daemon->log();
  EXPECT_EQ(d.daemon->log().find("requested ("), std::string::npos) << "asked for a second allocation";
}

// Slurm work survives the daemon. The daemon is killed (SIGKILL) while attempt 1's step runs, and a new one
// starts on the same address and database; later the same with SIGTERM. Each time: the step's srun (in a
// session of its own, not the daemon's) and its ranks keep running, Slurm lists the one step, the next
// daemon watches that step instead of starting another, the job stays running in attempt 1, and the ranks'
// reports reach the new daemon (the attempt's last step advances past what the old one had seen).
TEST(SlurmLaunch, ARunningStepOutlivesTheDaemonAndTheNextDaemonWatchesIt) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/true, &why);
  ASSERT_FALSE(job.empty()) << why;
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_FALSE(alloc_id.empty()) << d.Diagnose(job);
  const int port = d.port();
  std::vector<pid_t> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(RankPid(port, job, r));
    ASSERT_GT(ranks.back(), 0) << "rank " << r << "\n" << d.Diagnose(job);
  }
  const pid_t srun = SrunPid(alloc_id, "shepherd-a1-o1");  // attempt 1 under the daemon's launch order 1
  ASSERT_GT(srun, 0) << LocalCluster::Sh({"ps", "-ef"});
  EXPECT_EQ(::getsid(srun), srun);  // a session of its own: the daemon's group or session never reaches it
  EXPECT_NE(::getsid(srun), ::getsid(d.daemon->pid()));
  // The steps Slurm lists in the allocation, by name ("batch" is the holding script's).
  auto step_names = [&] {
    std::vector<std::string> names;
    std::stringstream lines(LocalCluster::Sh({"squeue", "-h", "-s", "-j", alloc_id, "-o", "%j"}));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("shepherd-", 0) == 0) names.push_back(line);
    return names;
  };
  auto last_step = [&] { return d.Get("/v1/jobs/" + job)["current_attempt"].value("last_step", 0); };
  ASSERT_EQ(step_names(), std::vector<std::string>{"shepherd-a1-o1"});
  const std::vector<std::string> listen = {"--listen", "127.0.0.1:" + std::to_string(port)};
  for (const int sig : {SIGKILL, SIGTERM}) {
    SCOPED_TRACE(sig == SIGKILL ? "after SIGKILL" : "after SIGTERM");
    const int seen = last_step();
    ASSERT_GT(seen, 0) << d.Diagnose(job);
    const auto signalled = std::chrono::steady_clock::now();
    d.daemon->Signal(sig);
    ASSERT_TRUE(d.daemon->Wait(seconds(30)).has_value()) << d.daemon->log();
    // No daemon runs: the step goes on.
    EXPECT_EQ(::kill(srun, 0), 0) << "srun died with the daemon";
    for (pid_t pid : ranks) EXPECT_EQ(::kill(pid, 0), 0) << "rank pid " << pid << " died with the daemon";
    EXPECT_EQ(step_names(), std::vector<std::string>{"shepherd-a1-o1"});
    d.Restart(listen);
    ASSERT_TRUE(d.daemon->WaitReady(seconds(60))) << d.daemon->log();
    ASSERT_EQ(d.port(), port);
    // The ranks' reports reach the new daemon, and it watches the step it found.
    ASSERT_TRUE(WaitFor(seconds(120), [&] { return last_step() > seen + 5; })) << d.Diagnose(job);
    std::printf(
        "[measure] %s: step reports reach the new daemon %.1f s after the signal (last step %d -> %d)\n",
        sig == SIGKILL ? "SIGKILL" : "SIGTERM",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(), seen,
        last_step());
    ASSERT_TRUE(WaitFor(seconds(60), [&] {
      return d.daemon->log().find("already runs (an earlier daemon's): watching it") != std::string::npos;
    })) << d.daemon->log();
    // A few more launch polls (0.3 s each) and ticks: still one step, the same attempt, every rank alive.
    const int now = last_step();
    ASSERT_TRUE(WaitFor(seconds(120), [&] { return last_step() > now + 10; })) << d.Diagnose(job);
    const Json j = d.Get("/v1/jobs/" + job);
    EXPECT_EQ(j["state"], "running") << d.Diagnose(job);
    EXPECT_EQ(j["attempt"], 1) << d.Diagnose(job);
    EXPECT_EQ(step_names(), std::vector<std::string>{"shepherd-a1-o1"});
    EXPECT_EQ(::kill(srun, 0), 0);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(RankPid(port, job, r), ranks[r]) << "rank " << r;
    EXPECT_EQ(d.daemon->log().find(" runs (log "), std::string::npos) << d.daemon->log();  // started none
    EXPECT_EQ(d.Get("/v1/jobs/" + job + "/failures")["failures"].size(), 0u) << d.Diagnose(job);
  }
  EXPECT_EQ(d.StepLog(job, 2), "");  // no second attempt was ever started
  // Cancelling the job stops the adopted step and cancels the allocation.
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
  EXPECT_TRUE(WaitFor(seconds(60), [&] {
    for (pid_t pid : ranks)
      if (::kill(pid, 0) == 0) return false;
    return true;
  }));
}

// A daemon that died while its srun was still creating the step (between srun's start and Slurm listing the
// step) leaves a successor that sees no step. Made here by stopping the daemon, cancelling the step, putting
// the job back in "launching" as the record stood before the step was known, and leaving a stand-in for
// that srun (a process named srun with its --jobid= and --job-name=) with an empty log. The next daemon
// waits for it and starts nothing while it lives; once it is gone without a task having run, the step is
// started, once.
TEST(SlurmLaunch, AnEarlierSrunStillCreatingItsStepIsWaitedFor) {
  REQUIRE_CLUSTER();
  LaunchDaemon d;
  std::string why;
  const std::string job = d.Start(100000, /*until_good=*/false, &why);
  ASSERT_FALSE(job.empty()) << why;
  ASSERT_TRUE(WaitFor(seconds(240), [&] { return d.Get("/v1/jobs/" + job)["state"] == "running"; }))
      << d.Diagnose(job);
  const std::string alloc_id = AllocationOf(d, job);
  ASSERT_FALSE(alloc_id.empty());
  auto shepherd_steps = [&] {
    std::vector<std::string> steps;  // "ID NAME" of the allocation's steps Shepherd names
    std::stringstream lines(LocalCluster::Sh({"squeue", "-h", "-s", "-j", alloc_id, "-o", "%i %j"}));
    for (std::string line; std::getline(lines, line);)
      if (line.find(" shepherd-") != std::string::npos) steps.push_back(line);
    return steps;
  };
  const std::vector<std::string> before = shepherd_steps();
  ASSERT_EQ(before.size(), 1u) << LocalCluster::Sh({"squeue", "-s"});
  ASSERT_TRUE(d.Stop());
  LocalCluster::Sh({"scancel", before[0].substr(0, before[0].find(' '))});
  ASSERT_TRUE(WaitFor(seconds(60), [&] { return shepherd_steps().empty(); }))
      << LocalCluster::Sh({"squeue", "-s"});
  // The worker named the step's allocation beside its log before starting srun.
  const std::string log = d.dir.path + "/slurm-steps/" + job + "-a1.log";
  EXPECT_EQ(ReadFile(log + ".allocation"), alloc_id + "\n");
  std::ofstream(log, std::ios::trunc).flush();  // no task of it ran
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((d.dir.path + "/shepherd.db").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE records SET body = json_set(body, '$.state', 'launching') WHERE collection = 'jobs' AND key = "
      "'" +
      job + "'";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  // The earlier srun, still creating its step.
  const std::string fake = d.dir.path + "/srun";
  ASSERT_EQ(::symlink("/usr/bin/python3", fake.c_str()), 0);
  auto srun = SpawnLogged(
      {fake, "-c", "import time; time.sleep(600)", "--jobid=" + alloc_id, "--job-name=shepherd-a1"},
      CleanEnvironment(), d.dir.path + "/fake-srun.log", "");
  ASSERT_TRUE(srun.ok()) << srun.status().message();
  struct Reap {
    pid_t pid;
    ~Reap() {
      SignalGroup(pid, SIGKILL);
      WaitFor(seconds(30), [&] { return PollExit(pid).has_value(); });
    }
  } reap{*srun};
  d.Restart();
  ASSERT_TRUE(d.daemon->WaitReady()) << d.daemon->log();
  ASSERT_TRUE(WaitFor(seconds(60), [&] {
    return d.daemon->log().find("is still creating step shepherd-a1: waiting for it") != std::string::npos;
  })) << d.Diagnose(job);
  // About 15 launch polls: no step is started while that srun lives.
  EXPECT_FALSE(WaitFor(seconds(5), [&] { return !shepherd_steps().empty(); })) << d.daemon->log();
  EXPECT_EQ(d.daemon->log().find(" runs (log "), std::string::npos) << d.daemon->log();
  SignalGroup(*srun, SIGKILL);
  ASSERT_TRUE(WaitFor(seconds(30), [&] { return PollExit(*srun).has_value(); }));
  // Gone, and no task of it ran: the step is started now, once, and the job runs in attempt 1.
  ASSERT_TRUE(
      WaitFor(seconds(120),
              [&] { return shepherd_steps().size() == 1 && d.Get("/v1/jobs/" + job)["state"] == "running"; }))
      << d.Diagnose(job) << LocalCluster::Sh({"squeue", "-s"});
  EXPECT_EQ(d.Get("/v1/jobs/" + job)["attempt"], 1) << d.Diagnose(job);
  const std::string daemon_log = d.daemon->log();
  const std::size_t started = daemon_log.find(" runs (log ");
  EXPECT_NE(started, std::string::npos) << daemon_log;
  EXPECT_EQ(daemon_log.find(" runs (log ", started + 1), std::string::npos) << daemon_log;

  // The fence, made deterministic (docs/slurm.md, "One step per attempt"): the restarted daemon wrote its
  // own launch order (2) before it started its step. An srun of attempt 1 under the earlier order (1),
  // started now (as an earlier leader's srun on another host would be, had it been slow to create its
  // step), never runs its command: its wrapper asks the daemon and exits 121. The same srun under the
  // current order runs it.
  const std::vector<std::string> now_steps = shepherd_steps();
  ASSERT_EQ(now_steps.size(), 1u);
  EXPECT_NE(now_steps[0].find(" shepherd-a1-o2"), std::string::npos) << now_steps[0];
  const Json nodes = d.Get("/v1/jobs/" + job)["slurm_allocation"]["nodes"];
  ASSERT_FALSE(nodes.empty()) << d.Diagnose(job);
  const std::string node = nodes[0];
  auto by_hand = [&](int order, const std::string& marker) {
    const Envp env = {"PATH=" + std::string(std::getenv("PATH")),
                      "SLURM_CONF=" + LocalCluster::slurm_conf(),
                      "SHEPHERD_SLURM_ORDER=" + std::to_string(order),
                      "SHEPHERD_JOB=" + job,
                      "SHEPHERD_ATTEMPT=1",
                      "SHEPHERD_URL=http://127.0.0.1:" + std::to_string(d.port()),
                      "SHEPHERD_SLURM_ORDER_TIMEOUT_S=20",
                      // A one-task layout of the wrapper's older form (no rank table).
                      "SHEPHERD_SLURM_NODES=" + node, "SHEPHERD_SLURM_GPUS=0", "SHEPHERD_SLURM_COORDS=0.0.0"};
    return RunCommand({"srun", "--jobid=" + alloc_id, "--job-name=shepherd-a1-o" + std::to_string(order),
                       "--ntasks=1", "--nodelist=" + node, "--overlap", "--overcommit", SHEPHERD_SLURM_RANK_EXEC,
                       "/usr/bin/touch", marker},
                      env, std::chrono::seconds(60));
  };
  const std::string stale_marker = d.dir.path + "/stale-order-ran", current_marker = d.dir.path + "/current-ran";
  const auto stale = by_hand(1, stale_marker);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  EXPECT_NE(stale->exit_code, 0) << stale->out << stale->err;
  EXPECT_NE((stale->out + stale->err).find("exit code 121"), std::string::npos) << stale->out << stale->err;
  EXPECT_NE((stale->out + stale->err).find("launch order 1 of attempt 1 is not current"), std::string::npos)
      << stale->out << stale->err;
  EXPECT_NE(::access(stale_marker.c_str(), F_OK), 0) << "the stale order's command ran";
  const auto current = by_hand(2, current_marker);
  ASSERT_TRUE(current.ok()) << current.status().message();
  EXPECT_EQ(current->exit_code, 0) << current->out << current->err;
  EXPECT_EQ(::access(current_marker.c_str(), F_OK), 0) << current->out << current->err;
  // Neither is read as the attempt's end: the job runs on in attempt 1, its own step with it.
  EXPECT_EQ(d.Get("/v1/jobs/" + job)["state"], "running") << d.Diagnose(job);
  EXPECT_EQ(d.Get("/v1/jobs/" + job)["attempt"], 1) << d.Diagnose(job);
  ASSERT_EQ(Http(d.port(), "POST", "/v1/jobs/" + job + "/cancel").status, 200);
  EXPECT_TRUE(WaitFor(seconds(90), [&] { return AllocationGone(alloc_id); })) << LocalCluster::Sh({"squeue"});
}

}  // namespace
}  // namespace shepherd::slurm
