// Planner refusals: every invalid layout or request is a 422 naming each field it breaks.
#include <gtest/gtest.h>

#include "planner/pipeline_layout.h"
#include "planner/planner.h"
#include "planner/planner_internal.h"
#include "tests/planner/planner_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// A100 has no FP8 tensor cores: "fp8" there was planned at the bf16 peak with FP8's memory.
TEST(EvaluatePlan, Fp8NeedsAGpuWithFp8) {
  JobSpec s = Model(7e9, 32, 4096, 32, 4096, 32000, 8, 64);
  s.training.precision = Precision::kFp8;
  s.resources.gpu = "A100-80GB";
  auto e = EvaluatePlan(s, Layout(1, 1, 8, 1), HardwareForResources(s.resources));
  ASSERT_FALSE(e.ok());
  ASSERT_EQ(e.status().fields().size(), 1u);
  EXPECT_EQ(e.status().fields()[0].field, "training.precision");
  EXPECT_NE(e.status().fields()[0].message.find("A100-80GB"), std::string::npos);
  s.parallelism.automatic = true;
  auto a = PlanJob(s, HardwareForResources(s.resources));
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(HasField(a.status(), "training.precision"));
  s.resources.gpu = "H100-80GB";
  EXPECT_TRUE(PlanJob(s, HardwareForResources(s.resources)).ok());
  s.resources.gpu = "A100-80GB";
  s.training.precision = Precision::kBf16;
  EXPECT_TRUE(PlanJob(s, HardwareForResources(s.resources)).ok());
}

// A tester's Llama 3 70B on 256 H100s, 32 sequences at tp 2 pp 4 dp 32: one micro-batch per step.
// Interleaving was credited with a bubble of (p - 1)/v although every chunk runs in turn (vpp 8
// predicted 2.8x faster than vpp 1), and auto chose such layouts. Megatron-Core's interleaved schedule needs
// M >= pp.
TEST(EvaluatePlan, InterleavingNeedsAtLeastPpMicroBatches) {
  JobSpec s = Model(0, 80, 8192, 64, 4096, 128256, 256, 32);
  s.model.kv_heads = 8;
  s.model.ffn_hidden = 28672;
  s.model.mlp = Mlp::kSwiglu;
  Plan p = Layout(2, 4, 32, 1);
  EXPECT_TRUE(EvaluatePlan(s, p, Hardware{}).ok());  // vpp 1: the plain 1F1B bubble, right for any M
  p.vpp = 2;
  auto one = EvaluatePlan(s, p, Hardware{});
  ASSERT_FALSE(one.ok());
  ASSERT_EQ(one.status().fields().size(), 1u);
  EXPECT_EQ(one.status().fields()[0].field, "parallelism.vpp");
  EXPECT_NE(one.status().fields()[0].message.find("at least pp = 4 micro-batches"), std::string::npos)
      << one.status().fields()[0].message;
  s.training.global_batch_size = 128;  // M = 4 = pp
  EXPECT_TRUE(EvaluatePlan(s, p, Hardware{}).ok());

  for (int batch : {8, 16, 32, 64}) {
    s.training.global_batch_size = batch;
    s.parallelism.automatic = true;
    auto a = PlanJob(s, Hardware{});
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_TRUE(a->plan.vpp == 1 || a->plan.micro_batches >= a->plan.pp) << a->explanation;
  }
}

// 80 layers over pp 4: 20 per stage. vpp 4 splits them 5 and 5; vpp 7 cannot (Megatron needs a hand-written
// pipeline_model_parallel_layout). Accepted, and said; auto only searches equal chunks.
TEST(EvaluatePlan, UnequalVirtualStagesAreSaidAndNotSearched) {
  JobSpec s = Model(0, 80, 8192, 64, 4096, 128256, 256, 512);
  s.model.kv_heads = 8;
  Plan p = Layout(8, 4, 8, 1);
  p.vpp = 4;
  auto even = EvaluatePlan(s, p, Hardware{});
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(even->explanation.find("equal chunks"), std::string::npos) << even->explanation;
  p.vpp = 7;
  auto uneven = EvaluatePlan(s, p, Hardware{});
  ASSERT_TRUE(uneven.ok());
  EXPECT_NE(uneven->explanation.find("vpp 7 does not split every stage into equal chunks"), std::string::npos)
      << uneven->explanation;
  s.parallelism.automatic = true;
  auto a = PlanJob(s, Hardware{});
  ASSERT_TRUE(a.ok());
  if (a->plan.vpp > 1) {
    for (int layers : StageLayers(80, a->plan.pp)) EXPECT_EQ(layers % a->plan.vpp, 0) << a->explanation;
  }
}

// A planner auditor: "exceeds the 77.0 GB usable" and nothing more. A layout that does not fit now says
// what each single change (full recompute, ZeRO-3, micro-batch 1) would need, and which fit.
TEST(EvaluatePlan, ALayoutThatDoesNotFitSaysWhatEachChangeWouldNeed) {
  JobSpec s = Model(0, 80, 8192, 64, 4096, 128256, 64, 512);
  s.model.kv_heads = 8;
  s.model.ffn_hidden = 28672;
  s.model.mlp = Mlp::kSwiglu;
  auto e = EvaluatePlan(s, Layout(8, 1, 8, 1, /*mbs=*/4), Hardware{});
  ASSERT_TRUE(e.ok());
  ASSERT_FALSE(e->fits) << e->explanation;
  const std::string& x = e->explanation;
  EXPECT_NE(x.find("Each change alone: full activation recompute "), std::string::npos) << x;
  EXPECT_NE(x.find("ZeRO-3 "), std::string::npos) << x;
  EXPECT_NE(x.find("micro-batch size 1 "), std::string::npos) << x;
  // What it says fits does fit.
  s.training.activation_recompute = Recompute::kFull;
  auto full = EvaluatePlan(s, Layout(8, 1, 8, 1, 4), Hardware{});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(x.find("full activation recompute " +
                   planner_internal::Format("%.1f GB (fits)", full->memory.total / 1e9)) != std::string::npos,
            full->fits)
      << x;
  EXPECT_EQ(EvaluatePlan(s, Layout(8, 1, 8, 1, 1), Hardware{})->explanation.find("Each change alone"),
            std::string::npos);  // fits: no hints
}

TEST(EvaluatePlan, InvalidPlansNameTheirFields) {
  JobSpec s = Model(70e9, 80, 8192, 64, 4096, 128256, 256, 1024);
  auto tp = EvaluatePlan(s, Layout(3, 1, 1, 0), Hardware{});
  ASSERT_FALSE(tp.ok());
  EXPECT_EQ(tp.status().code(), Code::kInvalidContent);
  EXPECT_TRUE(HasField(tp.status(), "parallelism.tp"));  // 3 does not divide 64 heads
  EXPECT_TRUE(HasField(tp.status(), "parallelism.dp"));  // 3 ≠ 256 GPUs

  auto wide = EvaluatePlan(s, Layout(16, 1, 16, 0), Hardware{});  // divides heads, exceeds NVLink
  ASSERT_FALSE(wide.ok());
  ASSERT_EQ(wide.status().fields().size(), 1u);
  EXPECT_EQ(wide.status().fields()[0].field, "parallelism.tp");
  EXPECT_NE(wide.status().fields()[0].message.find("NVLink"), std::string::npos);

  JobSpec s81 = s;
  s81.resources.gpus = 81;
  auto pp = EvaluatePlan(s81, Layout(1, 81, 1, 0), Hardware{});  // 81 stages for 80 layers
  ASSERT_FALSE(pp.ok());
  EXPECT_TRUE(HasField(pp.status(), "parallelism.pp"));
  JobSpec s24 = s;
  s24.resources.gpus = 192;
  EXPECT_TRUE(EvaluatePlan(s24, Layout(8, 3, 8, 0), Hardware{}).ok());  // 3 ∤ 80: balanced stages

  JobSpec gqa = s;
  gqa.model.kv_heads = 4;  // TP 8 would split KV heads
  auto kv = EvaluatePlan(gqa, Layout(8, 4, 8, 0), Hardware{});
  ASSERT_FALSE(kv.ok());
  EXPECT_TRUE(HasField(kv.status(), "parallelism.tp"));

  Plan cp = Layout(8, 4, 4, 0);
  cp.cp = 3;  // 2·3 ∤ 4096, and 8·3·4·4 = 384 ≠ 256
  auto bad_cp = EvaluatePlan(s, cp, Hardware{});
  ASSERT_FALSE(bad_cp.ok());
  EXPECT_TRUE(HasField(bad_cp.status(), "parallelism.cp"));
  EXPECT_TRUE(HasField(bad_cp.status(), "parallelism.dp"));

  Plan vpp = Layout(8, 1, 32, 0);
  vpp.vpp = 2;  // no pipeline to interleave
  auto bad_vpp = EvaluatePlan(s, vpp, Hardware{});
  ASSERT_FALSE(bad_vpp.ok());
  EXPECT_TRUE(HasField(bad_vpp.status(), "parallelism.vpp"));

  Plan uneven = Layout(8, 4, 8, 0);
  uneven.pipeline_layers = {19, 21, 21, 20};  // sums to 81
  auto bad_layers = EvaluatePlan(s, uneven, Hardware{});
  ASSERT_FALSE(bad_layers.ok());
  EXPECT_TRUE(HasField(bad_layers.status(), "parallelism.pipeline_layers"));

  auto batch = EvaluatePlan(s, Layout(8, 4, 8, 0, 256), Hardware{});  // 1024 % (256·8) ≠ 0
  ASSERT_FALSE(batch.ok());
  ASSERT_EQ(batch.status().fields().size(), 1u);
  EXPECT_EQ(batch.status().fields()[0].field, "training.global_batch_size");

  auto zero = EvaluatePlan(s, Layout(8, 4, 8, 4), Hardware{});
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(HasField(zero.status(), "parallelism.zero_stage"));

  // "mla_up_proj" recomputes what only multi-head latent attention has.
  JobSpec up = s;
  up.training.recompute_modules.mla_up_proj = true;
  auto no_mla = EvaluatePlan(up, Layout(8, 4, 8, 0), Hardware{});
  ASSERT_FALSE(no_mla.ok());
  EXPECT_TRUE(HasField(no_mla.status(), "training.recompute_modules"));
  up.model.mla = {.kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64, .v_head_dim = 128};
  EXPECT_TRUE(EvaluatePlan(up, Layout(8, 4, 8, 0), Hardware{}).ok());

  JobSpec empty = s;
  empty.model.layers = 0;
  auto model = EvaluatePlan(empty, Layout(8, 4, 8, 0), Hardware{});
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(HasField(model.status(), "model.layers"));

  EXPECT_TRUE(EvaluatePlan(s, Layout(8, 4, 8, 1), Hardware{}).ok());
}

}  // namespace
}  // namespace shepherd
