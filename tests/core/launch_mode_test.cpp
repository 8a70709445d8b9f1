// A job's launch mode: decided once by the spec parser from the spec's shape, stored with the job record
// (`launch.mode`), and read back from records written before the mode was stored.

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "core/json.h"

namespace shepherd {
namespace {

// The smallest valid job body; each case adds its launch fields.
Json Body() {
  return Json::parse(R"({
    "name": "m",
    "model": {"parameters": 1e9, "layers": 8, "hidden": 1024, "heads": 8, "seq_len": 1024, "vocab": 32000},
    "training": {"global_batch_size": 64},
    "parallelism": {"tp": 8, "pp": 1, "dp": 2, "zero_stage": 0},
    "resources": {"gpus": 16, "gpus_per_node": 8}})");
}

struct ModeCase {
  const char* name;
  const char* fields;              // merged into Body()
  std::optional<LaunchMode> mode;  // nullopt: refused, naming `refused`
  const char* refused = "";
};

const ModeCase kCases[] = {
    {"command", R"({"command": ["python3", "train.py"]})", LaunchMode::kAgents},
    {"command_launcher_agents", R"({"command": ["python3"], "launcher": "agents"})", LaunchMode::kAgents},
    {"command_launcher_slurm", R"({"command": ["python3"], "launcher": "slurm"})", LaunchMode::kSlurm},
    {"command_slurm_allocation",
     R"({"command": ["python3"], "launcher": "slurm", "slurm": {"allocation": "7"}})", LaunchMode::kSlurm},
    {"no_command", R"({})", LaunchMode::kExternal},
    {"no_command_external_id", R"({"external_id": "123"})", LaunchMode::kExternal},
    {"no_command_launcher_agents", R"({"launcher": "agents"})", LaunchMode::kExternal},
    {"empty_command", R"({"command": []})", LaunchMode::kExternal},
    {"empty_program", R"({"command": [""]})", std::nullopt, "command[0]"},
    {"slurm_without_command", R"({"launcher": "slurm"})", std::nullopt, "launcher"},
    {"unknown_launcher", R"({"command": ["python3"], "launcher": "kubernetes"})", std::nullopt, "launcher"},
    {"slurm_block_for_agents", R"({"command": ["python3"], "slurm": {"allocation": "7"}})", std::nullopt,
     "slurm"},
};

class LaunchModeBySpecShape : public ::testing::TestWithParam<ModeCase> {};

TEST_P(LaunchModeBySpecShape, IsDecidedByTheParser) {
  const ModeCase& c = GetParam();
  Json j = Body();
  j.update(Json::parse(c.fields));
  Result<JobSpec> s = ParseJobSpec(j);
  if (!c.mode) {
    ASSERT_FALSE(s.ok());
    bool named = false;
    for (const auto& f : s.status().fields()) named = named || f.field == c.refused;
    EXPECT_TRUE(named) << s.status().message();
    return;
  }
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->launch_mode, *c.mode);
  // The spec's own echo keeps its fields: what was submitted reads back as the same mode.
  Result<JobSpec> again = ParseJobSpec(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->launch_mode, *c.mode);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LaunchModeBySpecShape, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LaunchMode, NamesAreTheApis) {
  EXPECT_STREQ(ToString(LaunchMode::kAgents), "agents");
  EXPECT_STREQ(ToString(LaunchMode::kSlurm), "slurm");
  EXPECT_STREQ(ToString(LaunchMode::kExternal), "external");
  EXPECT_EQ(LaunchModeFromString("agents"), LaunchMode::kAgents);
  EXPECT_EQ(LaunchModeFromString("slurm"), LaunchMode::kSlurm);
  EXPECT_EQ(LaunchModeFromString("external"), LaunchMode::kExternal);
  EXPECT_EQ(LaunchModeFromString("Agents"), std::nullopt);
  EXPECT_EQ(LaunchModeFromString(""), std::nullopt);
}

// A job record as a daemon wrote it before the launch mode was stored: no "launch" key.
std::string OldRecord(const char* launch_fields) {
  Json spec = Body();
  spec.update(Json::parse(launch_fields));
  Json rec = {{"id", "job-000003"},
              {"seq", 3},
              {"spec", spec},
              {"plan", {{"tp", 8}, {"pp", 1}, {"dp", 2}, {"zero_stage", 0}, {"micro_batches", 32}}},
              {"state", "running"},
              {"attempt", 1},
              {"restarts", 0},
              {"reason", ""},
              {"owner", "alice"},
              {"created_at", "2026-01-02T03:04:05Z"},
              {"updated_at", "2026-01-02T03:04:05Z"}};
  return rec.dump();
}

TEST(LaunchModeRecord, ARecordWithoutTheModeDecodesToTheModeItsFieldsImply) {
  const struct {
    const char* fields;
    LaunchMode mode;
    const char* name;
  } cases[] = {
      {R"({"command": ["python3"], "launcher": "agents"})", LaunchMode::kAgents, "agents"},
      {R"({"command": ["python3"], "launcher": "slurm", "slurm": {"allocation": "", "sbatch_args": []}})",
       LaunchMode::kSlurm, "slurm"},
      {R"({"command": [], "external_id": "99", "launcher": "agents"})", LaunchMode::kExternal, "external"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fields);
    const std::string old = OldRecord(c.fields);
    ASSERT_EQ(Json::parse(old).count("launch"), 0u);
    Result<Job> job = JobFromJson(Json::parse(old));
    ASSERT_TRUE(job.ok()) << job.status().message();
    EXPECT_EQ(job->spec.launch_mode, c.mode);
    EXPECT_EQ(job->spec.owner, "alice");
    // Written again by this daemon, the record carries the mode by name.
    EXPECT_EQ(ToJson(*job)["launch"], Json({{"mode", c.name}}));
  }
}

TEST(LaunchModeRecord, AStoredModeIsReadBackAndMustAgreeWithTheSpec) {
  Json rec = Json::parse(OldRecord(R"({"command": ["python3"], "launcher": "slurm"})"));
  rec["launch"] = {{"mode", "slurm"}};
  Result<Job> job = JobFromJson(rec);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->spec.launch_mode, LaunchMode::kSlurm);
  rec["launch"] = {{"mode", "agents"}};  // edited or corrupted: the spec says slurm
  EXPECT_EQ(JobFromJson(rec).status().code(), Code::kInternal);
  rec["launch"] = {{"mode", "kubernetes"}};
  EXPECT_EQ(JobFromJson(rec).status().code(), Code::kInternal);
}

}  // namespace
}  // namespace shepherd
