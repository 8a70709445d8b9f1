// The step's rank table file (slurm/rank_table.h) and the whole description of a step as StartStep would
// run it (JobRunner::PrepareStep), up to a 131,072-rank step, read back by the real shepherd-slurm-rank.
#include "slurm/rank_table.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <string>

#include "slurm/job_runner.h"

namespace shepherd::slurm {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/shepherd-ranktable-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string operator/(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

// TP=2, DP=2: ranks 0,1 on n3, rank 2 on n0, rank 3 on n2.
Placement Small() {
  Placement p;
  p.ranks = {{0, "n3", 0, 0, 0, 0}, {1, "n3", 1, 1, 0, 0}, {2, "n0", 0, 0, 0, 1}, {3, "n2", 1, 1, 0, 1}};
  return p;
}

TEST(RankTable, EachRankReadsItsOwnRecord) {
  TempDir dir;
  std::vector<EnvMap> per_rank{{{"RANK", "0"}, {"NOTE", "a b"}},
                               {{"RANK", "1"}, {"NOTE", ""}},
                               {{"RANK", "2"}, {"NOTE", "x;y,z=1 "}},
                               {{"RANK", "3"}, {"NOTE", "long value for rank three"}}};
  auto table = EncodeRankTable(Small(), per_rank);
  ASSERT_TRUE(table.ok()) << table.status().message();
  // Header, then four records of one size: "n2\tlong value for rank three\t3\t" is the longest (31 bytes)
  // plus the closing '\n'.
  EXPECT_EQ(table->substr(0, table->find('\n')), "shepherd-rank-table v1 ranks=4 record=32 keys=NOTE,RANK");
  const std::string path = dir / "t.ranks";
  ASSERT_TRUE(WriteRankTable(path, *table).ok());
  struct stat st{};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 55 + 1 + 4 * 32);
  const char* nodes[] = {"n3", "n3", "n0", "n2"};
  for (int r = 0; r < 4; ++r) {
    auto env = ReadRankEntry(path, r, nodes[r]);
    ASSERT_TRUE(env.ok()) << r << ": " << env.status().message();
    EXPECT_EQ(*env, per_rank[r]);
  }
  // Placed on n0, run on n1: the step was laid out wrongly and the rank must not run.
  EXPECT_EQ(ReadRankEntry(path, 2, "n1").status().code(), Code::kConflict);
  EXPECT_EQ(ReadRankEntry(path, 2, "").status().code(), Code::kConflict);
  EXPECT_EQ(ReadRankEntry(path, 4, "n0").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReadRankEntry(path, -1, "n3").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReadRankEntry(dir / "missing", 0, "n3").status().code(), Code::kNotFound);
  // A table someone else owns (left in a node's shared /tmp) is never believed.
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
    EXPECT_EQ(ReadRankEntry(path, 0, "n3").status().code(), Code::kFailedPrecondition);
  }
}

TEST(RankTable, RefusesWhatCannotBeATableAndWhatIsNotOne) {
  Placement p = Small();
  std::vector<EnvMap> ok(4, EnvMap{{"K", "v"}});
  EXPECT_TRUE(EncodeRankTable(p, ok).ok());
  auto tab = ok;
  tab[2]["K"] = "a\tb";
  EXPECT_EQ(EncodeRankTable(p, tab).status().code(), Code::kInvalidArgument);
  auto lf = ok;
  lf[3]["K"] = "a\nb";
  EXPECT_EQ(EncodeRankTable(p, lf).status().code(), Code::kInvalidArgument);
  auto missing = ok;
  missing[1] = {{"L", "v"}};
  EXPECT_EQ(EncodeRankTable(p, missing).status().code(), Code::kInvalidArgument);
  auto extra = ok;
  extra[1]["L"] = "v";
  EXPECT_EQ(EncodeRankTable(p, extra).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(EncodeRankTable(p, std::vector<EnvMap>(3, EnvMap{{"K", "v"}})).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(EncodeRankTable(p, std::vector<EnvMap>(4, EnvMap{{"A,B", "v"}})).status().code(),
            Code::kInvalidArgument);

  TempDir dir;
  const std::string path = dir / "bad.ranks";
  std::ofstream(path) << "not a table\n";
  EXPECT_EQ(ReadRankEntry(path, 0, "n3").status().code(), Code::kInvalidArgument);
  std::ofstream(path, std::ios::trunc) << "shepherd-rank-table v1 ranks=4 record=9 keys=K\nn3\tv\t   \n";
  EXPECT_TRUE(ReadRankEntry(path, 0, "n3").ok());
  EXPECT_EQ(ReadRankEntry(path, 1, "n3").status().code(), Code::kInvalidArgument);  // the file ends first
  std::ofstream(path, std::ios::trunc) << "shepherd-rank-table v1 ranks=1 record=9 keys=K\nn3\tv\tvv \n";
  EXPECT_EQ(ReadRankEntry(path, 0, "n3").status().code(), Code::kInvalidArgument);  // padding not spaces
  std::ofstream(path, std::ios::trunc) << "shepherd-rank-table v1 ranks=1 record=99999999 keys=K\n";
  EXPECT_EQ(ReadRankEntry(path, 0, "n3").status().code(), Code::kInvalidArgument);
  std::ofstream(path, std::ios::trunc) << "shepherd-rank-table v1 ranks=1 record=9 keys=K";  // no '\n'
  EXPECT_EQ(ReadRankEntry(path, 0, "n3").status().code(), Code::kInvalidArgument);
}

// TP 8 × PP 16 × DP 1024 = 131,072 ranks on 16,384 nodes of 8 GPUs, rank = tp + 8·(dp + 1024·pp), rank r
// on node r / 8, GPU r % 8 (names and coordinates computed here, not by the code under test).
constexpr int kRanks = 131072;
std::string NodeName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-node-%05d", i);
  return buf;
}
Placement Fleet() {
  Placement p;
  p.ranks.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r)
    p.ranks.push_back({.rank = r, .node = NodeName(r / 8), .gpu = r % 8, .tp = r % 8, .pp = r / 8192,
                       .dp = (r / 8) % 1024});
  return p;
}

StepSpec FleetStep(const TempDir& dir) {
  StepSpec spec;
  spec.job_id = "4242";
  spec.name = "shepherd-a3";
  spec.placement = Fleet();
  spec.command = {"python3", "train.py", "--config", "llama-405b.yaml"};
  spec.env = {{"MASTER_ADDR", "gpu-node-00000"}, {"MASTER_PORT", "29500"}, {"SHEPHERD_JOB", "job-000042"},
              {"SHEPHERD_ATTEMPT", "3"}, {"WORLD_SIZE", "131072"}, {"SHEPHERD_PARALLELISM", "8,16,1024"},
              {"SHEPHERD_URL", "http://shepherd.example:8080"}, {"SHEPHERD_TOKEN", std::string(64, 'f')}};
  spec.gpus_per_node = 8;
  spec.log_path = dir / "job-000042-a3.log";
  return spec;
}

// Sizes Linux checks at execve: each argv or environment string at most MAX_ARG_STRLEN (32 pages, 128 KiB)
// and all of them together (with their pointers) within ARG_MAX (a quarter of the stack limit, at least
// 128 KiB; 2 MiB with the usual 8 MiB stack).
constexpr size_t kMaxArgStrlen = 32 * 4096;

void ExpectFarUnderExecLimits(const JobRunner::PreparedStep& s) {
  size_t total = 0, longest = 0;
  for (const std::string& a : s.argv) total += a.size() + 1 + sizeof(char*), longest = std::max(longest, a.size());
  for (const auto& [k, v] : s.env) {
    total += k.size() + v.size() + 2 + sizeof(char*);
    longest = std::max(longest, k.size() + v.size() + 1);
  }
  EXPECT_LT(longest, kMaxArgStrlen / 100) << "one argv or environment string";
  EXPECT_LT(total, 128u * 1024 / 10) << "argv and the added environment together";
  const long arg_max = ::sysconf(_SC_ARG_MAX);
  EXPECT_LT(static_cast<long>(total), arg_max / 100);
}

TEST(RankTable, A131072RankStepFitsTheLimitsAndItsLastRankFindsItsEntry) {
  TempDir dir;
  JobRunner::Options o;
  JobRunner launcher(o);
  StepSpec spec = FleetStep(dir);
  // As the controller composes them (scheduler/rank_env.h): the variables that differ between ranks.
  spec.rank_env.resize(kRanks);
  for (int r = 0; r < kRanks; ++r)
    spec.rank_env[r] = {{"RANK", std::to_string(r)},
                        {"SHEPHERD_RANK", std::to_string(r)},
                        {"ROLE_RANK", std::to_string(r)},
                        {"LOCAL_RANK", std::to_string(r % 8)},
                        {"GROUP_RANK", std::to_string(r / 8)},
                        {"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"},
                        {"SHEPHERD_RANK_COORDS", std::to_string(r % 8) + "," + std::to_string(r / 8192) + "," +
                                                     std::to_string((r / 8) % 1024)}};
  auto step = launcher.PrepareStep(spec);
  ASSERT_TRUE(step.ok()) << step.status().message();
  ExpectFarUnderExecLimits(*step);
  // No per-rank string anywhere in srun's argv or environment: the table file and the hostfile carry them.
  for (const auto& [k, v] : step->env) EXPECT_EQ(v.find("gpu-node-00001"), std::string::npos) << k;
  EXPECT_NE(std::find(step->argv.begin(), step->argv.end(), "--ntasks=131072"), step->argv.end());
  EXPECT_NE(std::find(step->argv.begin(), step->argv.end(), "--gres=gpu:8"), step->argv.end());
  // The table is copied to each node's /tmp by default; srun's tasks are told where.
  EXPECT_EQ(step->table_path, dir / "job-000042-a3.log.ranks");
  EXPECT_EQ(step->node_table_path, "/tmp/shepherd-4242-shepherd-a3.ranks");
  EXPECT_NE(std::find(step->env.begin(), step->env.end(),
                      std::pair<std::string, std::string>{"SHEPHERD_SLURM_TABLE", step->node_table_path}),
            step->env.end());
  // The hostfile: line r is rank r's node (16,384 nodes × 8 lines of "gpu-node-NNNNN\n").
  EXPECT_EQ(step->hostfile.size(), static_cast<size_t>(kRanks) * 15);
  EXPECT_EQ(step->hostfile.substr(step->hostfile.size() - 15), "gpu-node-16383\n");
  // One record per rank, a few dozen bytes each: about 8 MiB for the whole step.
  EXPECT_LT(step->table.size(), static_cast<size_t>(kRanks) * 128);
  std::cout << "[measure] 131072-rank step: table " << step->table.size() << " bytes, hostfile "
            << step->hostfile.size() << " bytes, srun argv " << step->argv.size() << " strings\n";

  ASSERT_TRUE(WriteRankTable(step->table_path, step->table).ok());
  auto last = ReadRankEntry(step->table_path, kRanks - 1, "gpu-node-16383");
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_EQ(*last, (EnvMap{{"RANK", "131071"},
                           {"SHEPHERD_RANK", "131071"},
                           {"ROLE_RANK", "131071"},
                           {"LOCAL_RANK", "7"},
                           {"GROUP_RANK", "16383"},
                           {"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"},
                           {"SHEPHERD_RANK_COORDS", "7,15,1023"}}));
  auto middle = ReadRankEntry(step->table_path, 70001, "gpu-node-08750");  // 70001 = 1 + 8·(558 + 1024·8)
  ASSERT_TRUE(middle.ok()) << middle.status().message();
  EXPECT_EQ(middle->at("SHEPHERD_RANK_COORDS"), "1,8,558");
  EXPECT_EQ(ReadRankEntry(step->table_path, kRanks - 1, "gpu-node-16382").status().code(), Code::kConflict);

  // The real wrapper, as srun would start task 131,071: it reads its record and execs the command.
  const std::string cmd = "env -i SHEPHERD_SLURM_TABLE=" + step->table_path +
                          " SLURM_PROCID=131071 SLURMD_NODENAME=gpu-node-16383 " SHEPHERD_SLURM_RANK_EXEC
                          " /usr/bin/env";
  FILE* out = ::popen(cmd.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string seen;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, out)) > 0;) seen.append(buf, n);
  EXPECT_EQ(::pclose(out), 0) << seen;
  EXPECT_NE(seen.find("\nRANK=131071\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("\nLOCAL_RANK=7\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("\nSHEPHERD_RANK_COORDS=7,15,1023\n"), std::string::npos) << seen;
  // Placed elsewhere: exit 126 before the command runs.
  const std::string wrong = "env -i SHEPHERD_SLURM_TABLE=" + step->table_path +
                            " SLURM_PROCID=131071 SLURMD_NODENAME=gpu-node-00000 " SHEPHERD_SLURM_RANK_EXEC
                            " /usr/bin/true 2>/dev/null";
  const int status = std::system(wrong.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 126) << status;
}

// A step composed by no one (rank_env empty) gets the placement's own variables in the table.
TEST(RankTable, WithoutComposedVariablesTheTableHoldsThePlacementsOwn) {
  TempDir dir;
  JobRunner::Options o;
  o.rank_table_dir = dir / "shared";
  ::mkdir(o.rank_table_dir.c_str(), 0700);
  JobRunner launcher(o);
  StepSpec spec = FleetStep(dir);
  spec.gpus_per_node = 0;
  auto step = launcher.PrepareStep(spec);
  ASSERT_TRUE(step.ok()) << step.status().message();
  ExpectFarUnderExecLimits(*step);
  for (const std::string& a : step->argv) EXPECT_EQ(a.rfind("--gres", 0), std::string::npos) << a;
  // On a shared directory the tasks read the file where it was written; nothing is copied.
  EXPECT_EQ(step->table_path, o.rank_table_dir + "/shepherd-4242-shepherd-a3.ranks");
  EXPECT_EQ(step->node_table_path, step->table_path);
  ASSERT_TRUE(WriteRankTable(step->table_path, step->table).ok());
  auto last = ReadRankEntry(step->table_path, kRanks - 1, "gpu-node-16383");
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_EQ(*last, (EnvMap{{"RANK", "131071"},
                           {"SHEPHERD_RANK", "131071"},
                           {"WORLD_SIZE", "131072"},
                           {"LOCAL_RANK", "7"},
                           {"LOCAL_WORLD_SIZE", "8"},
                           {"CUDA_VISIBLE_DEVICES", "7"},
                           {"SHEPHERD_RANK_COORDS", "7,15,1023"}}));
  auto first = ReadRankEntry(step->table_path, 0, "gpu-node-00000");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->at("LOCAL_RANK"), "0");
  EXPECT_EQ(first->at("SHEPHERD_RANK_COORDS"), "0,0,0");
}

}  // namespace
}  // namespace shepherd::slurm
