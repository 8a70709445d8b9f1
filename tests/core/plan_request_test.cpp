// POST /v1/plan's request (ParsePlanRequest): the architecture, training and layout fields the planner
// reads, their defaults, their round trip through ToJson, and refusals naming each field.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "tests/core/job_spec_test_util.h"

namespace shepherd {
namespace {

using testing::Fields;

Json Llama405BPlan() {
  return Json::parse(R"({
    "model": {"layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "ffn_hidden": 53248,
              "mlp": "swiglu", "norm": "rmsnorm", "tied_embeddings": false, "seq_len": 8192, "vocab": 128256},
    "training": {"global_batch_size": 2048, "framework": "megatron", "attention": "flash", "precision": "fp8",
                 "activation_recompute": "full"},
    "parallelism": {"tp": 8, "cp": 1, "pp": 16, "dp": 128, "vpp": 7, "zero_stage": 1,
                    "sequence_parallel": true,
                    "pipeline_layers": [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]},
    "resources": {"gpus": 16384, "gpu": "H100-80GB"}})");
}

TEST(JobSpec, ArchitectureAndParallelismFields) {
  auto s = ParsePlanRequest(Llama405BPlan());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->model.parameters_given());
  EXPECT_EQ(s->model.kv_heads, 8);
  EXPECT_EQ(s->model.ffn_hidden, 53248);
  EXPECT_EQ(s->model.mlp, Mlp::kSwiglu);
  EXPECT_EQ(s->model.norm, Norm::kRmsNorm);
  EXPECT_EQ(s->training.framework, Framework::kMegatron);
  EXPECT_EQ(s->training.attention, Attention::kFlash);
  EXPECT_EQ(s->training.precision, Precision::kFp8);
  EXPECT_EQ(s->parallelism.vpp, 7);
  EXPECT_EQ(s->parallelism.sequence_parallel, true);
  EXPECT_EQ(s->parallelism.pipeline_layers.size(), 16u);
  EXPECT_EQ(s->resources.gpu, "H100-80GB");
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ToJson(*again), ToJson(*s));
}

TEST(JobSpec, InvalidArchitectureAndLayoutFieldsAreNamed) {
  Json j = Llama405BPlan();
  j["model"]["kv_heads"] = 6;  // does not divide 128 heads (nor is divided by tp 8)
  j["model"]["mlp"] = "relu";
  j["training"]["framework"] = "jax";
  j["resources"]["gpu"] = "V100";
  j["parallelism"]["pipeline_layers"] = {8, 8};  // not pp entries
  j["parallelism"]["cp"] = 2;                    // tp·cp·pp·dp ≠ gpus
  auto s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()),
            (std::set<std::string>{"model.kv_heads", "model.mlp", "training.framework", "resources.gpu",
                                   "parallelism.pipeline_layers", "parallelism", "parallelism.tp"}));
}

// A plan request may be a whole job body (a dry run): its name is optional but checked as a submit checks it.
TEST(JobSpec, APlanRequestsNameIsCheckedAsASubmitChecksIt) {
  Json j = Llama405BPlan();
  ASSERT_TRUE(ParsePlanRequest(j).ok());
  for (const Json& bad : {Json(std::string(129, 'a')), Json("a\x01b"), Json(7)}) {
    j["name"] = bad;
    auto s = ParsePlanRequest(j);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"name"})) << bad;
  }
}

// model.dropout: optional, a probability below 1; absent stays absent (the planner's default follows the
// norm), given round-trips; out of range is a 422 naming the field.
TEST(JobSpec, DropoutIsOptionalRoundTripsAndIsRangeChecked) {
  auto s = ParsePlanRequest(Llama405BPlan());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->model.dropout.has_value());
  EXPECT_FALSE(s->model.keeps_dropout_masks());  // rmsnorm
  EXPECT_FALSE(ToJson(*s)["model"].contains("dropout"));
  Json j = Llama405BPlan();
  j["model"]["dropout"] = 0.1;
  s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.dropout, 0.1);
  EXPECT_TRUE(s->model.keeps_dropout_masks());
  EXPECT_EQ(ToJson(*s)["model"]["dropout"], 0.1);
  for (const Json& bad : {Json(1.0), Json(-0.1), Json("none")}) {
    j["model"]["dropout"] = bad;
    s = ParsePlanRequest(j);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"model.dropout"})) << bad;
  }
}

// training.recompute_modules: Megatron-Core's names under selective recompute. Absent: the attention kernels
// alone (not written back); given: round-trips. With "none" or "full" recompute, unknown or repeated
// names, an empty list or a non-array: 422 naming the field.
TEST(JobSpec, RecomputeModulesAreMegatronsNamesUnderSelectiveRecompute) {
  auto s = ParsePlanRequest(Llama405BPlan());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->training.recompute_modules, RecomputeModules{});
  EXPECT_TRUE(s->training.recompute_modules.core_attn);
  EXPECT_FALSE(ToJson(*s)["training"].contains("recompute_modules"));
  Json j = Llama405BPlan();
  j["training"]["activation_recompute"] = "selective";
  j["training"]["recompute_modules"] = {"layernorm", "moe_act", "mlp"};
  s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->training.recompute_modules,
            (RecomputeModules{.core_attn = false, .layernorm = true, .moe_act = true, .mlp = true}));
  EXPECT_EQ(ToJson(*s)["training"]["recompute_modules"], Json({"layernorm", "moe_act", "mlp"}));
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->training.recompute_modules, s->training.recompute_modules);
  for (const Json& bad :
       {Json::array(), Json({"moe"}), Json({"layernorm", "layernorm"}), Json("moe_act"), Json({1})}) {
    j["training"]["recompute_modules"] = bad;
    s = ParsePlanRequest(j);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.recompute_modules"})) << bad;
  }
  // Under fsdp, selective recompute is torchtitan's per-op policy: Megatron's module names do not apply.
  j["training"]["recompute_modules"] = {"layernorm"};
  j["training"]["framework"] = "fsdp";
  s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.recompute_modules"}));
  j["training"].erase("framework");
  j["training"]["recompute_modules"] = {"core_attn"};
  for (const char* mode : {"none", "full"}) {
    j["training"]["activation_recompute"] = mode;
    s = ParsePlanRequest(j);
    ASSERT_FALSE(s.ok()) << mode;
    EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.recompute_modules"})) << mode;
  }
}

// training.recompute_num_layers: Megatron-Core's --recompute-num-layers under the block method. Absent: 0
// (every layer under full recompute), not written back; given: implies full recompute (as Megatron-Bridge's
// override sets it) and round-trips; beside another recompute, or 0: 422 naming the field.
TEST(JobSpec, RecomputeNumLayersIsBlockRecompute) {
  auto s = ParsePlanRequest(Llama405BPlan());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->training.recompute_num_layers, 0);
  EXPECT_FALSE(ToJson(*s)["training"].contains("recompute_num_layers"));
  Json j = Llama405BPlan();
  j["training"].erase("activation_recompute");
  j["training"]["recompute_num_layers"] = 5;
  s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->training.activation_recompute, Recompute::kFull);
  EXPECT_TRUE(s->training.activation_recompute_given);
  EXPECT_EQ(s->training.recompute_num_layers, 5);
  EXPECT_EQ(ToJson(*s)["training"]["recompute_num_layers"], 5);
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->training.recompute_num_layers, 5);
  j["training"]["activation_recompute"] = "full";
  EXPECT_TRUE(ParsePlanRequest(j).ok());
  for (const char* mode : {"none", "selective"}) {
    j["training"]["activation_recompute"] = mode;
    s = ParsePlanRequest(j);
    ASSERT_FALSE(s.ok()) << mode;
    EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.recompute_num_layers"})) << mode;
  }
  j["training"]["activation_recompute"] = "full";
  j["training"]["recompute_num_layers"] = 0;
  s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.recompute_num_layers"}));
}

// training.optimizer_dtype: the optimizer moments' dtype, "fp32" (default, not written back) or "bf16"
// (round-trips); anything else is a 422 naming the field.
TEST(JobSpec, OptimizerDtypeIsTheMomentsDtype) {
  Json j = Llama405BPlan();
  auto s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->training.bf16_optimizer_states);
  EXPECT_FALSE(ToJson(*s)["training"].contains("optimizer_dtype"));
  j["training"]["optimizer_dtype"] = "bf16";
  s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->training.bf16_optimizer_states);
  EXPECT_EQ(ToJson(*s)["training"]["optimizer_dtype"], "bf16");
  EXPECT_TRUE(ParsePlanRequest(ToJson(*s))->training.bf16_optimizer_states);
  j["training"]["optimizer_dtype"] = "fp8";
  s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.optimizer_dtype"}));
}

// training.cpu_offload_layers: Megatron-Core's --cpu-offloading-num-layers. Absent: 0, not written back;
// given: round-trips and turns the recompute default off (Megatron-Core does not offload recomputed
// layers), so an explicit selective or full recompute, or recompute_modules, is a 422 naming the field.
TEST(JobSpec, CpuOffloadLayersRoundTripAndExcludeRecompute) {
  auto s = ParsePlanRequest(Llama405BPlan());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->training.cpu_offload_layers, 0);
  EXPECT_FALSE(ToJson(*s)["training"].contains("cpu_offload_layers"));
  Json j = Llama405BPlan();
  j["training"].erase("activation_recompute");
  j["training"]["cpu_offload_layers"] = 40;
  s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->training.cpu_offload_layers, 40);
  EXPECT_EQ(s->training.activation_recompute, Recompute::kNone);
  EXPECT_EQ(ToJson(*s)["training"]["cpu_offload_layers"], 40);
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->training.cpu_offload_layers, 40);
  for (const char* mode : {"selective", "full"}) {
    j["training"]["activation_recompute"] = mode;
    s = ParsePlanRequest(j);
    ASSERT_FALSE(s.ok()) << mode;
    EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.cpu_offload_layers"})) << mode;
  }
  j["training"].erase("activation_recompute");
  j["training"]["recompute_modules"] = {"layernorm"};
  s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.cpu_offload_layers"}));
  j["training"].erase("recompute_modules");
  j["training"]["cpu_offload_layers"] = -1;
  s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"training.cpu_offload_layers"}));
}

// model.window and model.full_attention_every (Megatron-Core's window_size and window_attn_skip_freq):
// optional, round-trip; full_attention_every without a window, or a window of 0, is a 422 naming the field.
TEST(JobSpec, SlidingWindowRoundTrips) {
  Json j = Llama405BPlan();
  j["model"]["window"] = 128;
  j["model"]["full_attention_every"] = 2;
  auto s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.window, 128);
  EXPECT_EQ(s->model.full_attention_every, 2);
  EXPECT_EQ(s->model.windowed_layers(), 126 - 63);
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->model.window, 128);
  EXPECT_EQ(again->model.full_attention_every, 2);
  j["model"].erase("window");
  s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"model.full_attention_every"}));
  j["model"]["window"] = 0;
  j["model"].erase("full_attention_every");
  s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"model.window"}));
}

// model.mla: multi-head latent attention (DeepSeek-V2/V3). Its head widths set Q's, K's and V's, heads need
// not divide hidden (7168/128 = 56 is not a head width here), it round-trips through the stored spec, and
// what contradicts it (kv_heads, head_dim) or is missing is named.
TEST(JobSpec, MlaGivesTheAttentionItsLatentHeadWidths) {
  Json j = Llama405BPlan();
  j["model"]["hidden"] = 7168;
  j["model"]["heads"] = 128;
  j["model"].erase("kv_heads");
  j["model"]["mla"] = {{"q_lora_rank", 1536},
                       {"kv_lora_rank", 512},
                       {"qk_nope_head_dim", 128},
                       {"qk_rope_head_dim", 64},
                       {"v_head_dim", 128}};
  j["training"]["activation_recompute"] = "selective";
  j["training"]["recompute_modules"] = {"mla_up_proj"};
  auto s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.q_width(), 128 * 192);
  EXPECT_EQ(s->model.k_width(), 128 * 192);
  EXPECT_EQ(s->model.v_width(), 128 * 128);
  EXPECT_EQ(s->model.o_width(), 128 * 128);
  EXPECT_TRUE(s->training.recompute_modules.mla_up_proj);
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->model.mla, s->model.mla);
  EXPECT_EQ(again->model.mtp_layers, 0);
  EXPECT_EQ(again->training.recompute_modules, s->training.recompute_modules);

  Json bad = j;
  bad["model"]["kv_heads"] = 8;
  bad["model"]["head_dim"] = 56;
  bad["model"]["mla"].erase("v_head_dim");
  bad["model"]["mla"]["rope"] = 64;
  auto r = ParsePlanRequest(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Fields(r.status()), (std::set<std::string>{"model.kv_heads", "model.head_dim",
                                                       "model.mla.v_head_dim", "model.mla.rope"}));
  // model.mtp_layers: DeepSeek-V3's multi-token prediction depths, kept; a non-negative integer.
  Json mtp = j;
  mtp["model"]["mtp_layers"] = 1;
  auto with_mtp = ParsePlanRequest(mtp);
  ASSERT_TRUE(with_mtp.ok()) << with_mtp.status().message();
  EXPECT_EQ(ParsePlanRequest(ToJson(*with_mtp))->model.mtp_layers, 1);
  mtp["model"]["mtp_layers"] = -1;
  ASSERT_FALSE(ParsePlanRequest(mtp).ok());
  EXPECT_EQ(Fields(ParsePlanRequest(mtp).status()), std::set<std::string>{"model.mtp_layers"});
  bad = j;
  bad["model"]["mla"] = 512;
  r = ParsePlanRequest(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Fields(r.status()), std::set<std::string>{"model.mla"});
}

// model.head_dim: heads of their own width (Qwen3, gpt-oss). heads then need not divide hidden; without
// head_dim they must, and the error names model.heads; head_dim itself must be a positive integer.
TEST(JobSpec, HeadDimLetsHeadsNotDivideHidden) {
  Json j = Llama405BPlan();
  j["model"]["hidden"] = 3000;  // 64 heads do not divide it
  j["model"]["heads"] = 64;
  j["model"]["ffn_hidden"] = 3000;
  j["model"]["head_dim"] = 64;
  auto s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model.head_dim, 64);
  EXPECT_EQ(s->model.q_width(), 4096);
  EXPECT_EQ(s->model.k_width(), 512);
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->model.head_dim, 64);

  j["model"].erase("head_dim");
  auto bad = ParsePlanRequest(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(Fields(bad.status()), std::set<std::string>{"model.heads"});
  j["model"]["head_dim"] = 0;
  bad = ParsePlanRequest(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Fields(bad.status()).count("model.head_dim"));
}

// The training switches: each has its default, round-trips when flipped, and a non-boolean is a 422
// naming it. grad_reduce_in_fp32 has no default of its own (the framework's) and stays absent on the way out.
TEST(JobSpec, TrainingSwitchesDefaultRoundTripAndRejectNonBooleans) {
  struct Switch {
    const char* name;
    std::optional<bool> by_default;
    std::function<std::optional<bool>(const TrainingSpec&)> get;
  };
  const Switch switches[] = {
      {"cross_entropy_fp32", true, [](const TrainingSpec& t) { return t.cross_entropy_fp32; }},
      {"tp_comm_overlap", false, [](const TrainingSpec& t) { return t.tp_comm_overlap; }},
      {"moe_a2a_overlap", false, [](const TrainingSpec& t) { return t.moe_a2a_overlap; }},
      {"grad_reduce_in_fp32", std::nullopt, [](const TrainingSpec& t) { return t.grad_reduce_in_fp32; }},
      {"fp8_param_gather", false, [](const TrainingSpec& t) { return t.fp8_param_gather; }},
  };
  for (const Switch& sw : switches) {
    SCOPED_TRACE(sw.name);
    Json j = Llama405BPlan();
    auto s = ParsePlanRequest(j);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(sw.get(s->training), sw.by_default);
    EXPECT_EQ(ToJson(*s)["training"].contains(sw.name), sw.by_default.has_value());
    const bool flipped = !sw.by_default.value_or(true);
    j["training"][sw.name] = flipped;
    s = ParsePlanRequest(j);
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto again = ParsePlanRequest(ToJson(*s));
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(sw.get(again->training), std::optional<bool>(flipped));
    j["training"][sw.name] = "no";
    auto bad = ParsePlanRequest(j);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(Fields(bad.status()), std::set<std::string>{std::string("training.") + sw.name});
  }
}

// training.moe_dispatcher: alltoall by default (and written back as such), deepep and hybridep round-trip,
// anything else is a 422 naming the field.
TEST(JobSpec, MoeDispatcherDefaultsRoundTripsAndRejectsUnknownNames) {
  Json j = Llama405BPlan();
  auto s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->training.moe_dispatcher, MoeDispatcher::kAllToAll);
  EXPECT_EQ(ToJson(*s)["training"]["moe_dispatcher"], "alltoall");
  for (const auto& [name, value] :
       {std::pair{"deepep", MoeDispatcher::kDeepEp}, std::pair{"hybridep", MoeDispatcher::kHybridEp},
        std::pair{"alltoall", MoeDispatcher::kAllToAll}}) {
    j["training"]["moe_dispatcher"] = name;
    auto parsed = ParsePlanRequest(j);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->training.moe_dispatcher, value);
    auto again = ParsePlanRequest(ToJson(*parsed));
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(again->training.moe_dispatcher, value);
  }
  j["training"]["moe_dispatcher"] = "nccl";
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()), std::set<std::string>{"training.moe_dispatcher"});
}

// FP8 parameters need FP8 compute (Megatron-Core refuses --fp8-param-gather without --fp8-format).
TEST(JobSpec, Fp8ParamGatherNeedsFp8Precision) {
  Json j = Llama405BPlan();
  j["training"]["fp8_param_gather"] = true;
  EXPECT_TRUE(ParsePlanRequest(j).ok());  // the plan is fp8
  j["training"]["precision"] = "bf16";
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()), std::set<std::string>{"training.fp8_param_gather"});
}

TEST(JobSpec, ContextParallelIsPlannedAndLaunched) {
  Json j = Llama405BPlan();
  j["parallelism"]["cp"] = 2;
  j["parallelism"]["dp"] = 64;
  EXPECT_TRUE(ParsePlanRequest(j).ok());
  j["name"] = "long-context";
  auto job = ParseJobSpec(j);
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->parallelism.cp, 2);
}

// Rank order tp, cp, dp, pp: rank = tp + TP·(cp + CP·(dp + DP·pp)). TP 2, CP 2, DP 3, PP 2:
// rank 21 = 1 + 2·(0 + 2·(2 + 3·1)) → tp 1, cp 0, dp 2, pp 1; rank 6 = 0 + 2·(1 + 2·1) → tp 0, cp 1, dp 1.
TEST(JobSpec, RankCoordinatesFollowMegatronsOrder) {
  const Plan plan{.tp = 2, .pp = 2, .dp = 3, .cp = 2};
  RankSlot r{.rank = 21};
  SetRankCoords(plan, &r);
  EXPECT_EQ((std::vector<int>{r.tp, r.cp, r.dp, r.pp}), (std::vector<int>{1, 0, 2, 1}));
  r = RankSlot{.rank = 6};
  SetRankCoords(plan, &r);
  EXPECT_EQ((std::vector<int>{r.tp, r.cp, r.dp, r.pp}), (std::vector<int>{0, 1, 1, 0}));
}

// Mixtral 8x7B's experts with the layout of Megatron-LM's Mixtral example (TP 2, PP 4, EP 8 on 64 GPUs).
Json MixtralPlan() {
  return Json::parse(R"({
    "model": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "mlp": "swiglu",
              "norm": "rmsnorm", "seq_len": 4096, "vocab": 32000, "moe": {"experts": 8, "top_k": 2}},
    "training": {"global_batch_size": 256},
    "parallelism": {"tp": 2, "pp": 4, "ep": 8},
    "resources": {"gpus": 64}})");
}

TEST(JobSpec, MixtureOfExpertsFieldsRoundTrip) {
  Json j = MixtralPlan();
  j["model"]["moe"]["shared_experts"] = 1;
  j["model"]["moe"]["expert_ffn_hidden"] = 2048;
  j["model"]["moe"]["moe_layer_freq"] = 2;
  auto s = ParsePlanRequest(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(
      s->model.moe,
      (MoeSpec{
          .experts = 8, .top_k = 2, .expert_ffn_hidden = 2048, .shared_experts = 1, .moe_layer_freq = 2}));
  EXPECT_EQ(s->model.moe.count(s->model.layers), 16);
  EXPECT_EQ(s->parallelism.ep, 8);
  EXPECT_EQ(s->parallelism.dp, 8);
  auto again = ParsePlanRequest(ToJson(*s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->model.moe, s->model.moe);
  EXPECT_EQ(again->parallelism.ep, 8);
}

TEST(JobSpec, InvalidMixtureOfExpertsFieldsAreNamed) {
  Json j = MixtralPlan();
  j["model"]["moe"]["top_k"] = 9;        // more than 8 experts
  j["model"]["moe"]["moe_layers"] = 40;  // more than 32 layers
  j["model"]["moe"]["router"] = "topk";  // unknown
  j["parallelism"]["ep"] = 3;            // does not divide 8 experts
  auto s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"model.moe.top_k", "model.moe.moe_layers",
                                                       "model.moe.router", "parallelism.ep"}));
  j = MixtralPlan();
  j["parallelism"] = {{"tp", 8}, {"pp", 4}, {"ep", 4}};  // dp·cp = 2: ep 4 cannot be carved out of it
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()), std::set<std::string>{"parallelism.ep"});
  j = MixtralPlan();
  j["model"].erase("moe");  // a dense model has no experts to split
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()), std::set<std::string>{"parallelism.ep"});
  j = MixtralPlan();
  j["model"]["moe"] = {{"top_k", 2}};  // experts is required (and without experts ep 8 has nothing to split)
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()),
            (std::set<std::string>{"model.moe.experts", "parallelism.ep"}));
}

// Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): absent means tp and is not
// echoed; given, it round-trips. The experts' grid folds the ranks of a stage, so etp·ep must divide tp·cp·dp
// (Mixtral's TP 2 · DP 8 = 16 ranks per stage: etp 1 · ep 8 divides it, etp 4 · ep 8 does not).
TEST(JobSpec, ExpertTensorParallelRoundTripsAndItsRulesNameTheField) {
  Json j = MixtralPlan();
  auto absent = ParsePlanRequest(j);
  ASSERT_TRUE(absent.ok()) << absent.status().message();
  EXPECT_FALSE(absent->parallelism.etp.has_value());
  EXPECT_FALSE(ToJson(*absent).at("parallelism").contains("etp"));
  j["parallelism"]["etp"] = 1;
  auto one = ParsePlanRequest(j);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->parallelism.etp, 1);
  auto again = ParsePlanRequest(ToJson(*one));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->parallelism.etp, 1);

  j["parallelism"]["etp"] = 4;
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()),
            (std::set<std::string>{"parallelism.ep", "parallelism.etp"}));
  j["parallelism"]["etp"] = 0;
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()), std::set<std::string>{"parallelism.etp"});
  j["parallelism"]["etp"] = "1";
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()), std::set<std::string>{"parallelism.etp"});
  // etp·ep = 2^20 · 2^12 = 2^32 does not fit an int: still a 422, not a division by a wrapped-around 0.
  j["model"]["moe"]["experts"] = 4096;
  j["parallelism"]["ep"] = 4096;
  j["parallelism"]["etp"] = 1 << 20;
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()),
            (std::set<std::string>{"parallelism.ep", "parallelism.etp"}));
  j = MixtralPlan();
  j["model"].erase("moe");
  j["parallelism"] = {{"tp", 2}, {"pp", 4}, {"etp", 1}};  // a dense model has no experts to shard
  EXPECT_EQ(Fields(ParsePlanRequest(j).status()), std::set<std::string>{"parallelism.etp"});
  j["parallelism"]["etp"] = 2;  // = tp: the default, harmless
  EXPECT_TRUE(ParsePlanRequest(j).ok());
}

// One vocabulary: what an inventory, nvidia-smi or Slurm calls a GPU names the planner's profile.
TEST(JobSpec, AGpuMayBeNamedAsTheInventoryNamesIt) {
  for (const auto& [given, profile] :
       std::vector<std::pair<std::string, std::string>>{{"H100", "H100-80GB"},
                                                        {"NVIDIA H100 80GB HBM3", "H100-80GB"},
                                                        {"h100", "H100-80GB"},
                                                        {"A100-SXM4-40GB", "A100-40GB"},
                                                        {"GB200", "GB200-NVL72"},
                                                        {"H100-80GB", "H100-80GB"}}) {
    Json j = Llama405BPlan();
    j["resources"]["gpu"] = given;
    auto s = ParsePlanRequest(j);
    ASSERT_TRUE(s.ok()) << given << ": " << s.status().message();
    EXPECT_EQ(s->resources.gpu, profile) << given;
  }
  Json j = Llama405BPlan();
  j["resources"]["gpu"] = "A100";  // 40 or 80 GB: named by neither
  auto s = ParsePlanRequest(j);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(Fields(s.status()), (std::set<std::string>{"resources.gpu"}));
}

}  // namespace
}  // namespace shepherd
