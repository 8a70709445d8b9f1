// The site's job policy and input hygiene of names and ids, as plain values.
#include "core/job_policy.h"

#include <gtest/gtest.h>

#include "core/fields.h"
#include "core/json.h"

namespace shepherd {
namespace {

std::vector<std::string> Fields(const Status& s) {
  std::vector<std::string> out;
  for (const auto& f : s.fields()) out.push_back(f.field);
  return out;
}

TEST(JobPolicy, RefusesTheLinkerPathAndWhatTheAgentSets) {
  JobSpec spec;
  spec.command = {"python3", "train.py"};
  spec.env = {{"LD_PRELOAD", "x"}, {"LD_LIBRARY_PATH", "x"}, {"PATH", "x"},          {"SHEPHERD_TOKEN", "x"},
              {"RANK", "0"},       {"MASTER_ADDR", "x"},     {"NCCL_DEBUG", "INFO"}, {"FOO", "bar"}};
  Status s = CheckJobPolicy(spec, JobPolicy{});
  ASSERT_EQ(s.code(), Code::kInvalidContent);
  EXPECT_EQ(Fields(s), (std::vector<std::string>{"env.LD_LIBRARY_PATH", "env.LD_PRELOAD", "env.MASTER_ADDR",
                                                 "env.PATH", "env.RANK", "env.SHEPHERD_TOKEN"}));
}

// api.md lets a job set SHEPHERD_WORKDIR (its ranks' working directory); the default policy refused it with
// every other SHEPHERD_ name. A site may still refuse it by name.
TEST(JobPolicy, ShepherdWorkdirIsTheJobsUnlessTheSiteRefusesItByName) {
  JobSpec spec;
  spec.env = {{"SHEPHERD_WORKDIR", "/home/alice/run"}};
  EXPECT_TRUE(CheckJobPolicy(spec, JobPolicy{}).ok());
  JobPolicy strict;
  strict.refused_env.push_back("SHEPHERD_WORKDIR");
  EXPECT_EQ(Fields(CheckJobPolicy(spec, strict)), std::vector<std::string>{"env.SHEPHERD_WORKDIR"});
}

TEST(JobPolicy, AllowedEnvOverridesTheRefusals) {
  JobSpec spec;
  spec.env = {{"PATH", "/opt/bin"}};
  JobPolicy p;
  p.allowed_env = {"PATH"};
  EXPECT_TRUE(CheckJobPolicy(spec, p).ok());
}

// A sitecustomize.py ran under a command allow-list through PYTHONPATH: the default refuses what makes
// an interpreter, the shell or a library load code the command did not name.
TEST(JobPolicy, RefusesInterpreterAndLoaderHooks) {
  JobSpec spec;
  spec.command = {"python3", "train.py"};
  const std::vector<std::string> hooks = {"PYTHONPATH",        "PYTHONSTARTUP",
                                          "PYTHONHOME",        "PYTHONUSERBASE",
                                          "BASH_ENV",          "ENV",
                                          "PERL5LIB",          "PERL5OPT",
                                          "RUBYOPT",           "NODE_OPTIONS",
                                          "JAVA_TOOL_OPTIONS", "NCCL_NET_PLUGIN",
                                          "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN",
                                          "GCONV_PATH",        "LD_AUDIT",
                                          "BASH_FUNC_x%%",     "SLURM_CONF",
                                          "SRUN_EXPORT_ENV",   "CUDA_INJECTION64_PATH"};
  for (const std::string& name : hooks) {
    spec.env = {{name, "/tmp/evil"}, {"NCCL_DEBUG", "INFO"}, {"PYTHONUNBUFFERED", "1"}};
    EXPECT_EQ(Fields(CheckJobPolicy(spec, JobPolicy{})), std::vector<std::string>{"env." + name}) << name;
  }
}

// A site's allow-list replaces the refusals: exactly the names it lists pass.
TEST(JobPolicy, EnvAllowReplacesTheRefusedLists) {
  JobSpec spec;
  spec.env = {{"PYTHONPATH", "/opt/shepherd"}, {"NCCL_DEBUG", "INFO"}, {"FOO", "x"}};
  JobPolicy p;
  p.env_allow = std::vector<std::string>{"PYTHONPATH", "NCCL_DEBUG"};
  EXPECT_EQ(Fields(CheckJobPolicy(spec, p)), std::vector<std::string>{"env.FOO"});
}

// `--export=...,LD_PRELOAD=...` ran a preloaded library and `--output=<the daemon's database>
// --open-mode=truncate` could empty a file the daemon's user owns: only scheduling options pass.
TEST(JobPolicy, SbatchArgsPassAnAllowList) {
  JobSpec spec;
  spec.launch_mode = LaunchMode::kSlurm;
  spec.slurm.sbatch_args = {"--account=ml",    "--partition", "gpu",       "--qos=high",
                            "--time=01:00:00", "--exclusive", "--comment", "--export=ALL"};
  EXPECT_TRUE(CheckJobPolicy(spec, JobPolicy{}).ok()) << "the value after a bare option is its value";
  const std::vector<std::string> refused = {"--export=ALL,LD_PRELOAD=/tmp/evil.so",
                                            "--output=/var/lib/shepherd/shepherd.db",
                                            "--open-mode=truncate",
                                            "--error=/tmp/x",
                                            "--input=/etc/shadow",
                                            "--uid=0",
                                            "--gid=0",
                                            "--chdir=/",
                                            "--get-user-env",
                                            "--wrap=id",
                                            "--exp=ALL",
                                            "--nodes=1",
                                            "--job-name=x",
                                            "--",
                                            "-D/",
                                            "-o/tmp/x",
                                            "--exclusive=user",
                                            "gpu",
                                            "--comment=a\nb",
                                            "--partition"};
  for (const std::string& a : refused) {
    spec.slurm.sbatch_args = {"--account=ml", a};
    EXPECT_EQ(Fields(CheckJobPolicy(spec, JobPolicy{})), std::vector<std::string>{"slurm.sbatch_args[1]"})
        << a;
  }
  spec.slurm.sbatch_args = {"--account=ml", "--output", "/var/lib/shepherd/shepherd.db", "--qos=high"};
  EXPECT_EQ(Fields(CheckJobPolicy(spec, JobPolicy{})), std::vector<std::string>{"slurm.sbatch_args[1]"});
  spec.slurm.sbatch_args = {"--account=ml", "--partition", "a\x01b"};
  EXPECT_EQ(Fields(CheckJobPolicy(spec, JobPolicy{})), std::vector<std::string>{"slurm.sbatch_args[2]"});
}

TEST(JobPolicy, ASiteAddsSbatchOptions) {
  JobSpec spec;
  spec.slurm.sbatch_args = {"--gpus-per-task=1", "--spread-job"};
  JobPolicy p;
  EXPECT_EQ(Fields(CheckJobPolicy(spec, p)),
            (std::vector<std::string>{"slurm.sbatch_args[0]", "slurm.sbatch_args[1]"}));
  p.allowed_sbatch_options = {"--gpus-per-task=", "--spread-job"};
  EXPECT_TRUE(CheckJobPolicy(spec, p).ok());
  EXPECT_TRUE(ValidSbatchOptionSpec("--gpus-per-task="));
  EXPECT_TRUE(ValidSbatchOptionSpec("--spread-job"));
  for (const char* bad : {"gpus", "-p", "--", "--=", "--a b=", "--x=y"})
    EXPECT_FALSE(ValidSbatchOptionSpec(bad)) << bad;
}

TEST(JobPolicy, CommandMustStartWithAnAllowedLauncher) {
  JobPolicy p;
  p.command_prefixes = {{"python3"}, {"/usr/bin/torchrun", "--standalone"}};
  JobSpec spec;
  spec.launch_mode = LaunchMode::kAgents;
  spec.command = {"/bin/sh", "-c", "id"};
  EXPECT_EQ(Fields(CheckJobPolicy(spec, p)), (std::vector<std::string>{"command"}));
  spec.command = {"/usr/bin/torchrun", "train.py"};
  EXPECT_EQ(Fields(CheckJobPolicy(spec, p)), (std::vector<std::string>{"command"}));
  spec.command = {"/usr/bin/torchrun", "--standalone", "train.py"};
  EXPECT_TRUE(CheckJobPolicy(spec, p).ok());
  spec.command = {"python3", "train.py"};
  EXPECT_TRUE(CheckJobPolicy(spec, p).ok());
}

TEST(Fields, LengthCountsCharactersNotBytes) {
  EXPECT_EQ(Utf8Length("abc"), 3u);
  EXPECT_EQ(Utf8Length("\xc3\xa9t\xc3\xa9"), 3u);              // "été": 5 bytes
  EXPECT_EQ(Utf8Length("\xf0\x9f\x90\x91"), 1u);               // one emoji: 4 bytes
  EXPECT_EQ(Utf8Prefix("\xc3\xa9t\xc3\xa9", 2), "\xc3\xa9t");  // whole characters, never half of one
  EXPECT_EQ(Utf8Prefix("\xc3\xa9t\xc3\xa9", 3), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(Utf8Prefix("\xf0\x9f\x90\x91x", 1), "\xf0\x9f\x90\x91");
  EXPECT_EQ(Utf8Prefix("abc", 0), "");
  std::vector<FieldError> errs;
  Json j = {{"name", "\xc3\xa9\xc3\xa9\xc3\xa9"}};  // 3 characters, 6 bytes
  FieldReader r(j, "", &errs);
  EXPECT_EQ(r.String("name", true, 3), "\xc3\xa9\xc3\xa9\xc3\xa9");
  EXPECT_TRUE(errs.empty());
  EXPECT_FALSE(r.String("name", true, 2));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "name");
}

TEST(Fields, ControlCharactersAndNulAreRefused) {
  for (std::string bad :
       {std::string("a\0b", 3), std::string("a\nb"), std::string("a\x7f"), std::string("\t")}) {
    std::vector<FieldError> errs;
    Json j = {{"name", bad}};
    FieldReader r(j, "", &errs);
    EXPECT_FALSE(r.String("name", true, 128));
    ASSERT_EQ(errs.size(), 1u);
    EXPECT_EQ(errs[0].field, "name");
  }
}

TEST(Fields, NodeIdsMatchThePattern) {
  TopologyLevels levels = {"spine", "leaf"};
  for (const char* bad : {".", "..", "-a", "a/b", "a b", ""}) {
    Json n = {{"id", bad}, {"gpus", 1}, {"topology", {{"spine", "s"}, {"leaf", "l"}}}};
    auto r = ParseNode(n, levels);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(Fields(r.status()), (std::vector<std::string>{"id"})) << bad;
  }
  Json ok = {{"id", "node-0001.a_b"}, {"gpus", 1}, {"topology", {{"spine", "s"}, {"leaf", "l"}}}};
  EXPECT_TRUE(ParseNode(ok, levels).ok());
}

}  // namespace
}  // namespace shepherd
