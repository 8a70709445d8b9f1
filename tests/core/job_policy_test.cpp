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

TEST(JobPolicy, CommandMustStartWithAnAllowedLauncher) {
  JobPolicy p;
  p.command_prefixes = {{"python3"}, {"/usr/bin/torchrun", "--standalone"}};
  JobSpec spec;
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
