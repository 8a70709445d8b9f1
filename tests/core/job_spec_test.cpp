#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <vector>

#include "core/json.h"
#include "tests/core/job_spec_test_util.h"

namespace shepherd {
namespace {

using testing::Fields;

Json Example() {
  return Json::parse(R"({
    "name": "llama-70b",
    "model": {"parameters": 70e9, "layers": 80, "hidden": 8192, "heads": 64, "seq_len": 4096, "vocab": 128256},
    "training": {"micro_batch_size": 1, "global_batch_size": 1024, "precision": "bf16", "optimizer": "adam",
                 "activation_recompute": "selective"},
    "parallelism": {"tp": 8, "pp": 4, "dp": 8, "zero_stage": 1},
    "resources": {"gpus": 256, "gpus_per_node": 8},
    "command": ["python3", "train.py"], "env": {"KEY": "value"},
    "checkpoint": {"dir": "/ckpt/llama", "every_steps": 500},
    "policy": {"heartbeat_interval_s": 1, "heartbeat_timeout_s": 10, "hang_timeout_s": 60,
               "sdc_check_every_steps": 100, "max_restarts": 10, "use_spares": true}})");
}

}  // namespace

TEST(JobSpec, ApiExampleParses) {
  auto s = ParseJobSpec(Example());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "llama-70b");
  EXPECT_DOUBLE_EQ(s->model.parameters, 70e9);
  EXPECT_EQ(s->parallelism.tp * s->parallelism.pp * s->parallelism.dp, 256);
  EXPECT_EQ(s->training.activation_recompute, Recompute::kSelective);
  EXPECT_EQ(s->checkpoint.every_steps, 500);
  EXPECT_EQ(s->command.size(), 2u);
}

TEST(JobSpec, DefaultsForOmittedOptionalFields) {
  Json j = Example();
  j.erase("parallelism");
  j.erase("policy");
  j.erase("command");
  j["training"].erase("precision");
  j["training"].erase("micro_batch_size");
  auto s = ParseJobSpec(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->parallelism.automatic);
  EXPECT_EQ(s->training.precision, Precision::kBf16);
  EXPECT_EQ(s->training.micro_batch_size, 1);
  EXPECT_FALSE(s->training.micro_batch_size_given);  // auto searches it
  EXPECT_TRUE(ParseJobSpec(Example())->training.micro_batch_size_given);
  EXPECT_EQ(s->policy.heartbeat_timeout_s, 10);
  EXPECT_EQ(s->policy.hang_timeout_s, 60);
  EXPECT_EQ(s->policy.progress_timeout_s, 1800);
  EXPECT_EQ(ToJson(*s)["policy"]["progress_timeout_s"], 1800);
  EXPECT_EQ(s->policy.max_restarts, 10);
  EXPECT_TRUE(s->policy.use_spares);
  EXPECT_TRUE(s->command.empty());
}

TEST(JobSpec, StragglerActionRecordByDefaultValidatedAndEchoed) {
  Json j = Example();
  auto s = ParseJobSpec(j);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->policy.straggler_action, StragglerAction::kRecord);
  EXPECT_EQ(ToJson(*s)["policy"]["straggler_action"], "record");
  for (const char* v : {"record", "cordon_after_restart", "replace"}) {
    j["policy"]["straggler_action"] = v;
    s = ParseJobSpec(j);
    ASSERT_TRUE(s.ok()) << v;
    EXPECT_EQ(ToJson(*s)["policy"]["straggler_action"], v);
    EXPECT_EQ(ParseJobSpec(ToJson(*s))->policy.straggler_action, s->policy.straggler_action);
  }
  EXPECT_EQ(s->policy.straggler_action, StragglerAction::kReplace);
  for (Json bad : {Json("cordon"), Json(1), Json::array()}) {
    j["policy"]["straggler_action"] = bad;
    s = ParseJobSpec(j);
    ASSERT_FALSE(s.ok()) << bad.dump();
    EXPECT_EQ(Fields(s.status()), std::set<std::string>{"policy.straggler_action"});
  }
}

TEST(JobSpec, GpuBindingPerNodeByDefaultPerProcessOnRequestAndRoundTrips) {
  Json j = Example();
  auto s = ParseJobSpec(j);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->gpu_binding, GpuBinding::kPerNode);
  j["gpu_binding"] = "per_process";
  s = ParseJobSpec(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->gpu_binding, GpuBinding::kPerProcess);
  EXPECT_EQ(ToJson(*s)["gpu_binding"], "per_process");
  EXPECT_EQ(ParseJobSpec(ToJson(*s))->gpu_binding, GpuBinding::kPerProcess);
  j["gpu_binding"] = "one_each";
  s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), std::set<std::string>{"gpu_binding"});
}

TEST(JobSpec, AutoStringIsAutomatic) {
  Json j = Example();
  j["parallelism"] = "auto";
  auto s = ParseJobSpec(j);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->parallelism.automatic);
}

TEST(JobSpec, ProductMustEqualGpus) {
  Json j = Example();
  j["parallelism"]["dp"] = 4;
  auto s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), std::set<std::string>{"parallelism"});
}

TEST(JobSpec, GlobalBatchDivisibleByMicroBatchTimesDp) {
  Json j = Example();
  j["training"]["global_batch_size"] = 1020;  // not divisible by 1·8
  auto s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), std::set<std::string>{"training.global_batch_size"});
}

TEST(JobSpec, EveryInvalidFieldIsListedByPath) {
  Json j = Example();
  j["model"]["layers"] = -1;
  j["model"]["heads"] = "many";
  j["training"]["precision"] = "fp4";
  j["training"]["optimizer"] = "lion";
  j["parallelism"]["zero_stage"] = 4;
  j["resources"].erase("gpus");
  j["policy"]["heartbeat_timeout_s"] = 0.5;
  j["env"]["SHEPHERD_RANK"] = "3";
  j["command"] = "python3 train.py";
  j["extra"] = 1;
  auto s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidContent);
  EXPECT_EQ(Fields(s.status()),
            (std::set<std::string>{"model.layers", "model.heads", "training.precision", "training.optimizer",
                                   "parallelism.zero_stage", "resources.gpus", "policy.heartbeat_timeout_s",
                                   "env.SHEPHERD_RANK", "command", "extra"}));
}

// SHEPHERD_WORKDIR is the one SHEPHERD_* name a job sets: the ranks' working directory, an absolute path.
TEST(JobSpec, ShepherdWorkdirIsTheOneShepherdVariableAJobSets) {
  Json j = Example();
  j["env"]["SHEPHERD_WORKDIR"] = "/scratch/run-7";
  auto s = ParseJobSpec(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->env.at("SHEPHERD_WORKDIR"), "/scratch/run-7");
  j["env"]["SHEPHERD_WORKDIR"] = "relative/dir";
  s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"env.SHEPHERD_WORKDIR"}));
}

// argv elements and env values reach execve: NUL would cut them there, and other control characters
// (terminal escapes) end up in logs. Tab and line breaks are program text (`sh -c` scripts).
TEST(JobSpec, CommandAndEnvRefuseNulAndControlCharacters) {
  Json j = Example();
  j["command"] = {"python3", std::string("train.py\0--evil", 15), "\x1b[2J", "x\x7f"};
  j["env"] = {{"OK", "a\tb\nc\r\n"}, {"NUL", std::string("a\0b", 3)}, {"ESC", "\x1b]0;t\x07"}};
  j["env"][std::string("K\0EY", 4)] = "v";
  auto s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()),
            (std::set<std::string>{"command[1]", "command[2]", "command[3]", "env.NUL", "env.ESC", "env"}))
      << s.status().message();
  j["command"] = {"/bin/sh", "-c", "set -e\n\tcd /work\r\n\tpython3 train.py\n"};
  j["env"] = {{"OK", "a\tb\nc"}};
  auto ok = ParseJobSpec(j);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->command[2], "set -e\n\tcd /work\r\n\tpython3 train.py\n");
}

TEST(JobSpec, TpMustDivideHeadsPpMayLeaveLayersUneven) {
  Json j = Example();
  j["model"]["heads"] = 12;
  j["model"]["hidden"] = 8196;  // divisible by 12
  j["model"]["layers"] = 81;    // pp 4 ∤ 81: the planner balances the stages
  auto s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"parallelism.tp"}));
  j["model"]["layers"] = 3;  // fewer layers than stages
  j["model"]["heads"] = 64;
  j["model"]["hidden"] = 8192;
  s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"parallelism.pp"}));
}

// Llama 3 405B as the API describes it: architecture instead of a parameter count, the published layout.
TEST(JobSpec, DefaultsOfTheNewFields) {
  auto s = ParseJobSpec(Example());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->training.framework, Framework::kMegatron);
  EXPECT_EQ(s->training.attention, Attention::kFlash);
  EXPECT_EQ(s->model.mlp, Mlp::kGelu);
  EXPECT_EQ(s->model.kv(), 64);  // kv_heads defaults to heads
  EXPECT_EQ(s->model.ffn(), 4 * 8192);
  EXPECT_EQ(s->parallelism.cp, 1);
  EXPECT_EQ(s->parallelism.vpp, 1);
  EXPECT_FALSE(s->parallelism.sequence_parallel.has_value());
}

TEST(JobSpec, NotAnObject) {
  auto s = ParseJobSpec(Json::parse("[1,2]"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), std::set<std::string>{"$"});
}

TEST(JobSpec, RoundTripThroughToJson) {
  auto s = ParseJobSpec(Example());
  ASSERT_TRUE(s.ok());
  auto again = ParseJobSpec(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ToJson(*again), ToJson(*s));
}

}  // namespace shepherd
