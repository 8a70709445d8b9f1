#include <gtest/gtest.h>

#include <set>

#include "core/json.h"

namespace shepherd {
namespace {

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

std::set<std::string> Fields(const Status& s) {
  std::set<std::string> out;
  for (const auto& f : s.fields()) out.insert(f.field);
  return out;
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
  EXPECT_EQ(s->policy.heartbeat_timeout_s, 10);
  EXPECT_EQ(s->policy.hang_timeout_s, 60);
  EXPECT_EQ(s->policy.max_restarts, 10);
  EXPECT_TRUE(s->policy.use_spares);
  EXPECT_TRUE(s->command.empty());
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
  j["training"]["precision"] = "fp8";
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

TEST(JobSpec, TpMustDivideHeadsAndPpLayers) {
  Json j = Example();
  j["model"]["heads"] = 12;
  j["model"]["hidden"] = 8196;  // divisible by 12
  j["model"]["layers"] = 81;
  auto s = ParseJobSpec(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"parallelism.tp", "parallelism.pp"}));
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
