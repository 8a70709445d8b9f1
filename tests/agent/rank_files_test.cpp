// What a rank leaves behind: the tail of its log sent with a failed exit, flight-recorder dumps reported
// while it runs, and the dump asked for (PyTorch's dump pipe) before the agent stops it. Real processes
// (/bin/sh scripts); bounded polling only.
#include "agent/rank_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "agent/supervisor.h"
#include "tests/agent/test_util.h"

namespace shepherd::agent {
namespace {

using namespace std::chrono_literals;
using testing::FileExists;
using testing::TempDir;
using testing::WaitFor;

SteadyTime Now() {
  return std::chrono::steady_clock::now();
}

RankAssignment Sh(int rank, const std::string& script) {
  return {{"job-1", 1, rank}, rank, {"/bin/sh", "-c", script}, {{"RANK", std::to_string(rank)}}};
}

TEST(ReadLogTailTest, KeepsTheLastLinesWithinTheByteBound) {
  TempDir dir;
  {
    std::ofstream out(dir.file("log"));
    for (int i = 1; i <= 100; ++i) out << "line " << i << "\n";
  }
  std::string tail = ReadLogTail(dir.file("log"), 4096, 3);
  EXPECT_EQ(tail, "line 98\nline 99\nline 100");
  // 22 bytes from the end are "e 98\nline 99\nline 100\n": the cut first line is dropped.
  EXPECT_EQ(ReadLogTail(dir.file("log"), 22, 20), "line 99\nline 100");
  EXPECT_EQ(ReadLogTail(dir.file("missing")), "");
}

TEST(ReadLogTailTest, InvalidUtf8BecomesReplacementCharacters) {
  TempDir dir;
  std::ofstream(dir.file("log")) << "ok \xff\xfe end\n";
  EXPECT_EQ(ReadLogTail(dir.file("log")), "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
}

class RankFilesTest : public ::testing::Test {
 protected:
  std::unique_ptr<Supervisor> Open(std::chrono::milliseconds dump_wait = 2s) {
    auto s = Supervisor::Open({.state_dir = dir_.path(), .stop_grace = 10s, .dump_wait = dump_wait});
    EXPECT_TRUE(s.ok()) << s.status().message();
    return std::move(*s);
  }
  const TrackedProcess* Find(const Supervisor& s, int rank) {
    for (const TrackedProcess& p : s.processes())
      if (p.key.rank == rank) return &p;
    return nullptr;
  }
  bool Exited(Supervisor& s, int rank) {
    s.Poll(Now());
    const TrackedProcess* p = Find(s, rank);
    return p && p->phase == ProcessPhase::kExited;
  }
  void TearDown() override {
    for (pid_t pid : pids_) SignalGroup(pid, SIGKILL), ::waitpid(pid, nullptr, WNOHANG);
  }
  TempDir dir_;
  std::vector<pid_t> pids_;
};

TEST_F(RankFilesTest, AFailedExitCarriesTheEndOfTheRankLogAndASuccessfulOneDoesNot) {
  auto s = Open();
  s->SetDesired(
      {Sh(0,
          "i=0; while [ $i -lt 30 ]; do echo step $i; i=$((i+1)); done; "
          "echo 'Traceback (most recent call last):' >&2; echo 'ValueError: bad sample 3' >&2; exit 1"),
       Sh(1, "echo fine; exit 0")},
      Now());
  pids_ = {Find(*s, 0)->pid, Find(*s, 1)->pid};
  ASSERT_TRUE(WaitFor([&] { return Exited(*s, 0) && Exited(*s, 1); }));
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 2u);
  // 20 lines: steps 12..29, then the two traceback lines.
  EXPECT_EQ(r[0].log_tail.substr(0, 8), "step 12\n");
  EXPECT_NE(r[0].log_tail.find("Traceback (most recent call last):\nValueError: bad sample 3"),
            std::string::npos)
      << r[0].log_tail;
  EXPECT_EQ(r[1].log_tail, "");
  Json body = HeartbeatBody({1, "t"}, Json::array(), r);
  EXPECT_EQ(body["processes"][0]["log_tail"], r[0].log_tail);
  EXPECT_FALSE(body["processes"][1].contains("log_tail"));
  // Kept across an agent restart until acknowledged.
  s.reset();
  s = Open();
  EXPECT_EQ(s->Report()[0].log_tail, r[0].log_tail);
}

TEST_F(RankFilesTest, DumpsOfARunningRankAreReportedWithEveryHeartbeat) {
  auto s = Open();
  s->SetDesired({Sh(2, "printf 1234 > \"${TORCH_FR_DUMP_TEMP_FILE}2\"; exec sleep 100")}, Now());
  pids_ = {Find(*s, 2)->pid};
  const std::string dump = dir_.path() + "/flight-recorder/job-1-a1-r2/nccl_trace_rank_2";
  ASSERT_TRUE(WaitFor([&] { return testing::ReadFile(dump) == "1234"; }));
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].running);
  EXPECT_EQ(r[0].flight_recorder, (std::vector<DumpFile>{{dump, 4}}));
  EXPECT_EQ(HeartbeatBody({1, "t"}, Json::array(), r)["processes"][0]["flight_recorder"][0]["size"], 4);
}

// Whether process `pid` is blocked opening a FIFO until a writer comes (Linux: /proc/<pid>/wchan).
bool WaitsForAWriter(pid_t pid) {
  std::string wchan;
  std::ifstream("/proc/" + std::to_string(pid) + "/wchan") >> wchan;
  return wchan == "wait_for_partner";
}

TEST_F(RankFilesTest, AStopAsksARankWithADumpPipeForItsDumpBeforeSigterm) {
  auto s = Open(1s);
  // Like PyTorch's process group: reads <TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe and dumps on a write.
  s->SetDesired({Sh(0,
                    "p=\"${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}0.pipe\"; mkfifo \"$p\"; read x < \"$p\"; "
                    "printf dump > \"${TORCH_FR_DUMP_TEMP_FILE}0\"; exec sleep 100")},
                Now());
  pids_ = {Find(*s, 0)->pid};
  const std::string dir = dir_.path() + "/flight-recorder/job-1-a1-r0/";
  struct stat st {};
  ASSERT_TRUE(WaitFor([&] { return ::stat((dir + "nccl_trace_pipe_0.pipe").c_str(), &st) == 0; }));
  ASSERT_TRUE(S_ISFIFO(st.st_mode));
  // The rank listens once it opens the pipe (mkfifo comes first: a stop in between finds no reader). Opening
  // a FIFO to read waits for a writer in the kernel's wait_for_partner, already counted as a reader.
  ASSERT_TRUE(WaitFor([&] { return WaitsForAWriter(pids_[0]); }));
  s->SetDesired({}, Now());
  EXPECT_EQ(Find(*s, 0)->phase, ProcessPhase::kStopping);
  EXPECT_TRUE(Find(*s, 0)->term_at.has_value()) << "SIGTERM waits for the dump";
  ASSERT_TRUE(WaitFor([&] { return Exited(*s, 0); }, 10s));
  const TrackedProcess* p = Find(*s, 0);
  EXPECT_EQ(p->exit.signal, SIGTERM);
  EXPECT_EQ(p->dumps, (std::vector<DumpFile>{{dir + "nccl_trace_rank_0", 4}}));
}

TEST_F(RankFilesTest, WithoutAReaderTheStopIsImmediate) {
  auto s = Open();
  s->SetDesired({Sh(0, "mkfifo \"${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}0.pipe\"; exec sleep 100")}, Now());
  pids_ = {Find(*s, 0)->pid};
  const std::string pipe = dir_.path() + "/flight-recorder/job-1-a1-r0/nccl_trace_pipe_0.pipe";
  ASSERT_TRUE(WaitFor([&] { return FileExists(pipe); }));
  EXPECT_EQ(PokeDumpPipes(dir_.path() + "/flight-recorder/job-1-a1-r0/nccl_trace_pipe_", ::geteuid()), 0);
  s->SetDesired({}, Now());
  EXPECT_FALSE(Find(*s, 0)->term_at.has_value());
  ASSERT_TRUE(WaitFor([&] { return Exited(*s, 0); }));
  EXPECT_EQ(Find(*s, 0)->exit.signal, SIGTERM);
}

// A log tail leaves the node without the rank's own token (whatever its format) and without anything shaped
// like another job's token that the rank read and printed.
TEST_F(RankFilesTest, TheLogTailIsRedactedBeforeItLeavesTheAgent) {
  auto s = Open();
  const std::string other(64, 'e');
  RankAssignment a = Sh(0, "echo \"mine=$SHEPHERD_TOKEN\"; echo 'theirs: SHEPHERD_TOKEN=" + other +
                               "'; echo 'Traceback: boom'; exit 1");
  a.env["SHEPHERD_TOKEN"] = "job-1.a1.r0.pqrs-tuvw-xyz0";
  s->SetDesired({a}, Now());
  pids_ = {Find(*s, 0)->pid};
  ASSERT_TRUE(WaitFor([&] { return Exited(*s, 0); }));
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].log_tail, "mine=[redacted]\ntheirs: SHEPHERD_TOKEN=[redacted]\nTraceback: boom");
}

// A rank adopted by a restarted agent keeps its token redacted: the agent reads it from the environment the
// rank started with, since processes.json never holds it.
TEST_F(RankFilesTest, AnAdoptedRanksTokenIsRedactedToo) {
  auto s = Open();
  RankAssignment a = Sh(0, "touch " + dir_.file("started") + "; while [ ! -e " + dir_.file("go") +
                               " ]; do sleep 0.02; done; echo \"mine=$SHEPHERD_TOKEN\"; exit 1");
  a.env["SHEPHERD_TOKEN"] = "job-1.a1.r0.pqrs-tuvw-xyz0";
  s->SetDesired({a}, Now());
  pids_ = {Find(*s, 0)->pid};
  // Until the rank has exec'd, its /proc environment is still the agent's: wait for the rank's own shell.
  ASSERT_TRUE(WaitFor([&] { return FileExists(dir_.file("started")); }));
  s.reset();  // the agent stops; the rank runs on
  s = Open();
  ASSERT_TRUE(Find(*s, 0) && Find(*s, 0)->adopted);
  std::ofstream(dir_.file("go")) << "";
  // Not our child any more in a real restart; here the test process still reaps it for the supervisor.
  ASSERT_TRUE(WaitFor([&] {
    ::waitpid(pids_[0], nullptr, WNOHANG);
    return Exited(*s, 0);
  }));
  std::vector<ProcessReport> r = s->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].log_tail, "mine=[redacted]");
}

// A job naming a root-only directory as its dump prefix gets nothing of it listed into its (viewer-readable)
// reports: the agent lists only files of the rank's own user, never through a symlink.
TEST_F(RankFilesTest, DumpsAreListedOnlyAmongTheRankUsersOwnFiles) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: ranks under another user";
  Result<RunAs> nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user nobody";
  TempDir root_only, mine;
  ASSERT_EQ(::chmod(root_only.path().c_str(), 0700), 0);
  std::ofstream(root_only.file("secret_key.pem")) << "x";
  ASSERT_EQ(::chown(mine.path().c_str(), nobody->uid, nobody->gid), 0);
  std::ofstream(mine.file("nccl_trace_rank_0")) << "1234";
  ASSERT_EQ(::chown(mine.file("nccl_trace_rank_0").c_str(), nobody->uid, nobody->gid), 0);
  std::ofstream(mine.file("nccl_trace_rank_root")) << "5";  // in the rank's directory, but root's
  ASSERT_EQ(::symlink(root_only.file("secret_key.pem").c_str(), mine.file("nccl_trace_rank_link").c_str()),
            0);
  (void)!::lchown(mine.file("nccl_trace_rank_link").c_str(), nobody->uid, nobody->gid);

  EXPECT_TRUE(FindDumps(root_only.file("secret"), nobody->uid).empty());
  EXPECT_EQ(FindDumps(mine.file("nccl_trace_rank_"), nobody->uid),
            (std::vector<DumpFile>{{mine.file("nccl_trace_rank_0"), 4}}));
  // A symlink to the directory is not followed either.
  ASSERT_EQ(::symlink(root_only.path().c_str(), mine.file("link-dir").c_str()), 0);
  EXPECT_TRUE(FindDumps(mine.file("link-dir") + "/secret", nobody->uid).empty());

  // Through the supervisor: the job's TORCH_FR_DUMP_TEMP_FILE points into the root-only directory.
  auto sup = Supervisor::Open({.state_dir = dir_.path(), .run_as = *nobody});
  ASSERT_TRUE(sup.ok());
  RankAssignment a = Sh(0, "exit 1");
  a.env["SHEPHERD_WORKDIR"] = "/";
  a.env["TORCH_FR_DUMP_TEMP_FILE"] = root_only.file("secret");
  (*sup)->SetDesired({a}, Now());
  pids_ = {Find(**sup, 0)->pid};
  ASSERT_TRUE(WaitFor([&] { return Exited(**sup, 0); }));
  std::vector<ProcessReport> r = (*sup)->Report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].flight_recorder.empty()) << r[0].flight_recorder[0].path;
}

}  // namespace
}  // namespace shepherd::agent
