// Megatron-LM README rows of the published runs (published_runs.h): the GPT-3 175B example of January
// 2021, the A100 weak-scaling table of April 2021, the H100 table of Megatron-Core r0.8.0 and the A100 FLOPs
// utilization table of May 2022.
#include <string>

#include "tests/planner/published_runs_builders.h"

namespace shepherd::testing {

void AddMegatronLmReadmeRuns(std::vector<PublishedRun>* runs) {
  // GPT-3 175B on 1024 A100 (Megatron-LM README at 152aab304d, Jan 2021, "GPT-3 Example": "With full
  // global batch size of 1536 on 1024 A100 GPUs, each iteration takes around 32 seconds resulting in 138
  // teraFLOPs per GPU"; the layout is examples/pretrain_gpt3_175B.sh at the same commit): 96 layers,
  // h 12288, 96 heads, sequence 2048, TP 8, PP 16 (so DP 8), micro-batch 1, global batch 1536, fp16,
  // --checkpoint-activations (full recompute), Megatron without a distributed optimizer (ZeRO-0), GPT-2
  // BPE vocabulary padded to a multiple of 128 × TP (51,200). Convention: the README's figure is
  // Narayanan et al.'s 96·B·s·l·h²·(1 + s/6h + V/16lh), which counts the recomputed forward pass (32 s
  // gives 137.7 with it), so model FLOPs are 3/4 of it. 2021 software: no sequence parallelism, eager
  // attention (the fused masked softmax), no interleaving (the schedule came later).
  {
    JobSpec s = GptStyle(96, 12288, 96, 51200, 2048, 1536, 1024, "A100-80GB");
    s.model.tied_embeddings = true;  // Megatron's GPT of 2021 reuses the word embeddings as the output layer
    s.training.precision = Precision::kFp16;
    s.training.activation_recompute = Recompute::kFull;
    s.training.attention = Attention::kEager;
    runs->push_back({"GPT-3 175B 1024 A100 TP8 PP16 DP8", "Megatron-LM README (Jan 2021), GPT-3 example", s,
                     Historic(Layout(8, 1, 16, 8, 1, 0)), HardwareForResources(s.resources), 138 * 0.75});
    runs->back().convention = "Narayanan et al. eq. 3, the recomputed forward pass counted: × 3/4";
    runs->back().published_as_stated = 138;
  }
  // Megatron-LM's A100 weak-scaling table (Narayanan et al. 2021, arXiv:2104.04473 Table 1; the README's
  // images/cases_april2021.png, read from the repository's history): GPT models of 1.7B to 1T on Selene's
  // DGX A100 80 GB, vocabulary 51,200, sequence 2048, "Achieved teraFLOPs per GPU" per row. The layouts
  // are the paper's own scripts, examples/sc21/run_table_1.sh: TP, PP, micro-batch, global batch, heads,
  // --activations-checkpoint-method uniform (full recompute) and --num-layers-per-virtual-pipeline-stage
  // (76B: 5 of 15 layers per stage, vpp 3; 145B: 5 of 10, vpp 2; 310B: 3 of 6, vpp 2; 530B: 1 of 3,
  // vpp 3). 2021 software as for the GPT-3 example above: fp16, tied output layer, no sequence
  // parallelism, eager attention, no distributed optimizer. Convention: eq. 3 of the paper,
  // 96·B·s·l·h²·(1 + s/6h + V/16lh), counts the recomputed forward pass of every layer (and three passes
  // of the output layer); model FLOPs are 72·B·s·l·h²·(1 + s/6h + V/12lh), so each figure is scaled by
  // the ratio of the two (0.762 at 1.7B, 0.750 at 1T).
  const char* weak_a100 = "Megatron-LM README (Apr 2021), A100 weak scaling; arXiv:2104.04473 Table 1";
  struct A100Gpt {
    const char* name;
    int heads, hidden, layers, tp, pp, vpp, micro_batch, gpus, batch;
    double published_eq3_tflops;
  };
  const A100Gpt a100_gpts[] = {
      {"Megatron GPT 1.7B 32 A100 TP1 PP1 DP32", 24, 2304, 24, 1, 1, 1, 16, 32, 512, 137},
      {"Megatron GPT 3.6B 64 A100 TP2 PP1 DP32", 32, 3072, 30, 2, 1, 1, 16, 64, 512, 138},
      {"Megatron GPT 7.5B 128 A100 TP4 PP1 DP32", 32, 4096, 36, 4, 1, 1, 16, 128, 512, 142},
      {"Megatron GPT 18B 256 A100 TP8 PP1 DP32", 48, 6144, 40, 8, 1, 1, 8, 256, 1024, 135},
      {"Megatron GPT 39B 512 A100 TP8 PP2 DP32", 64, 8192, 48, 8, 2, 1, 4, 512, 1536, 138},
      {"Megatron GPT 76B 1024 A100 TP8 PP4 VP3 DP32", 80, 10240, 60, 8, 4, 3, 2, 1024, 1792, 140},
      {"Megatron GPT 145B 1536 A100 TP8 PP8 VP2 DP24", 96, 12288, 80, 8, 8, 2, 2, 1536, 2304, 148},
      {"Megatron GPT 310B 1920 A100 TP8 PP16 VP2 DP15", 128, 16384, 96, 8, 16, 2, 1, 1920, 2160, 155},
      {"Megatron GPT 530B 2520 A100 TP8 PP35 VP3 DP9", 128, 20480, 105, 8, 35, 3, 1, 2520, 2520, 163},
      {"Megatron GPT 1T 3072 A100 TP8 PP64 DP6", 160, 25600, 128, 8, 64, 1, 1, 3072, 3072, 163},
  };
  for (const A100Gpt& g : a100_gpts) {
    JobSpec s = GptStyle(g.layers, g.hidden, g.heads, 51200, 2048, g.batch, g.gpus, "A100-80GB");
    s.model.tied_embeddings = true;
    s.training.precision = Precision::kFp16;
    s.training.activation_recompute = Recompute::kFull;
    s.training.attention = Attention::kEager;
    Plan p = Historic(Layout(g.tp, 1, g.pp, g.gpus / (g.tp * g.pp), g.vpp, 0));
    p.micro_batch_size = g.micro_batch;
    const double s_6h = 2048.0 / (6.0 * g.hidden);
    const double v_lh = 51200.0 / (static_cast<double>(g.layers) * g.hidden);
    const double model_over_eq3 = 72 * (1 + s_6h + v_lh / 12) / (96 * (1 + s_6h + v_lh / 16));
    runs->push_back({g.name, weak_a100, s, p, HardwareForResources(s.resources),
                     g.published_eq3_tflops * model_over_eq3});
    runs->back().convention = RunName("eq. 3, the recomputed forward pass counted: × model FLOPs / eq. 3 = " +
                                      Fixed(model_over_eq3, 3));
    runs->back().published_as_stated = g.published_eq3_tflops;
  }
  // Megatron-LM README, "Performance Benchmarking" (github.com/NVIDIA/Megatron-LM, images/model_table.png,
  // Megatron-Core r0.8.0 weak scaling on H100): GPT models, vocabulary 131,072, sequence 4096, the layout,
  // GPU count and batch per row as published, "Per-GPU teraFLOP/s" in Megatron's own convention
  // (megatron/training/training.py num_floating_point_operations at core_r0.8.0: 12·B·s·L·h²·((1 + kv/a +
  // s/h) + F/h + V/(2·L·h)), i.e. 72·B·s·L·h²·(1 + s/6h + V/12Lh) for GPT: ours exactly, no conversion).
  // Architecture: GeLU MLP of 4h, LayerNorm, untied output layer (the published sizes count it: 462B =
  // 12·112·18432² + 2·131,072·18432). With --overlap-grad-reduce and --overlap-param-gather, so the
  // distributed optimizer (ZeRO-1), and --tp-comm-overlap (training.tp_comm_overlap). Not published, assumed:
  // no recompute (every layout fits without; selective would run the attention forward again, 1-5 % slower
  // in the planner), no interleaving (vpp 1), micro-batch
  // 1 with a pipeline and 2 without (NeMo 24.07's H100 performance table runs its PP = 1 GPT-3 5B and 20B at
  // micro-batch 4 and 2; docs/planner.md shows the sensitivity).
  const char* megatron = "Megatron-LM README, H100 weak scaling (images/model_table.png)";
  struct Gpt {
    const char* name;
    int heads, hidden, layers, tp, pp, dp, batch;
    double tflops;
  };
  const Gpt gpts[] = {
      {"Megatron GPT 1.7B 48 H100 TP1 PP1 DP48", 16, 2048, 24, 1, 1, 48, 192, 408.8},
      {"Megatron GPT 7.1B 96 H100 TP2 PP1 DP48", 32, 4096, 30, 2, 1, 48, 192, 465.9},
      {"Megatron GPT 16B 192 H100 TP4 PP1 DP48", 48, 6144, 32, 4, 1, 48, 192, 489.1},
      {"Megatron GPT 32B 384 H100 TP8 PP1 DP48", 56, 7168, 48, 8, 1, 48, 192, 459.6},
      {"Megatron GPT 70B 768 H100 TP8 PP2 DP48", 64, 8192, 84, 8, 2, 48, 384, 419.7},
      {"Megatron GPT 119B 1536 H100 TP8 PP4 DP48", 80, 10240, 92, 8, 4, 48, 768, 420.5},
      {"Megatron GPT 177B 2304 H100 TP8 PP6 DP48", 96, 12288, 96, 8, 6, 48, 1152, 432.8},
      {"Megatron GPT 314B 3072 H100 TP8 PP8 DP48", 128, 16384, 96, 8, 8, 48, 1536, 474.4},
      {"Megatron GPT 462B 6144 H100 TP8 PP16 DP48", 144, 18432, 112, 8, 16, 48, 3072, 459.9},
  };
  for (const Gpt& g : gpts) {
    JobSpec s = GptStyle(g.layers, g.hidden, g.heads, 131072, 4096, g.batch, g.tp * g.pp * g.dp, "H100-80GB");
    s.training.tp_comm_overlap = true;
    s.training.activation_recompute = Recompute::kNone;
    Plan p = Layout(g.tp, 1, g.pp, g.dp, 1, 1);
    if (g.pp == 1) p.micro_batch_size = 2;  // see above
    runs->push_back({g.name, megatron, s, p, HardwareForResources(s.resources), g.tflops});
    runs->back().convention = "Megatron's own count: ours";
  }
  // Megatron-LM README of May 2022 (commit 2e90a342f5, "Update numbers in README": model and hardware FLOPs
  // utilization, "measured using a data parallel size of one"), from Korthikanti et al. 2022
  // (arXiv:2205.05198): Table 3's configurations on Selene's A100 80 GB (TP 8; 22B: 48 layers of 6144, 64
  // heads, PP 1, 8 GPUs, global batch 4 in one micro-batch of 4; 175B: 96 of 12288, 96 heads, PP 8, 64 GPUs,
  // batch 64; 530B: 105 of 20480, 128 heads, PP 35, 280 GPUs, batch 280; 1T: 128 of 25600, 160 heads, PP 64,
  // 512 GPUs, batch 512; micro-batch 1; interleaving of 3 for 175B and 530B; sequence 2048, vocabulary
  // 51,200). Table 5: MFU with sequence parallelism and selective recompute (the attention's QKᵀ, softmax,
  // dropout and AV run again: 2022 Megatron's fused softmax, eager attention in the planner) 41.5, 51.4, 56.0
  // and 56.3 %, and the iteration times of full recompute without sequence parallelism, 1.42, 18.13, 49.05,
  // 94.42 s, against 1.10, 13.75, 37.83, 71.49 s. §6.3: the 530B at 8-way data parallelism (2240 GPUs,
  // batch 2240) 39.15 s, MFU 54.2 % (42.1 % with full recompute, the abstract), "we do not use any
  // overlapping of gradient all-reduces with back-propagation" (the planner overlaps them: optimistic
  // there). Convention: Appendix A's model FLOPs, 72·B·L·s·h²·(1 + s/6h + V/12hL), ours: MFU × 312.
  // Tied output layer and fp16 as the 2021 rows; no distributed optimizer (ZeRO-0).
  const char* mfu_2022 =
      "Megatron-LM README (May 2022); Korthikanti et al. 2022 (arXiv:2205.05198) Tables 3, 5";
  struct Selene2022 {
    const char* name;
    int heads, hidden, layers, pp, vpp, micro_batch, gpus, batch;
    double mfu, full_recompute_mfu;
  };
  const Selene2022 rows_2022[] = {
      {"Megatron GPT 22B 8 A100 TP8 (2022)", 64, 6144, 48, 1, 1, 4, 8, 4, 0.415, 0.415 * 1.10 / 1.42},
      {"Megatron GPT 175B 64 A100 TP8 PP8 VP3 (2022)", 96, 12288, 96, 8, 3, 1, 64, 64, 0.514,
       0.514 * 13.75 / 18.13},
      {"Megatron GPT 530B 280 A100 TP8 PP35 VP3 (2022)", 128, 20480, 105, 35, 3, 1, 280, 280, 0.560,
       0.560 * 37.83 / 49.05},
      {"Megatron GPT 1T 512 A100 TP8 PP64 (2022)", 160, 25600, 128, 64, 1, 1, 512, 512, 0.563,
       0.563 * 71.49 / 94.42},
      {"Megatron GPT 530B 2240 A100 TP8 PP35 VP3 DP8 (2022)", 128, 20480, 105, 35, 3, 1, 2240, 2240, 0.542,
       0.421},
  };
  for (const Selene2022& g : rows_2022) {
    for (const bool selective : {true, false}) {
      JobSpec s = GptStyle(g.layers, g.hidden, g.heads, 51200, 2048, g.batch, g.gpus, "A100-80GB");
      s.model.tied_embeddings = true;
      s.training.precision = Precision::kFp16;
      s.training.attention = Attention::kEager;
      s.training.activation_recompute = selective ? Recompute::kSelective : Recompute::kFull;
      Plan p = Layout(8, 1, g.pp, g.gpus / (8 * g.pp), g.vpp, 0);
      if (!selective) p = Historic(p);
      p.micro_batch_size = g.micro_batch;
      const std::string name = std::string(g.name) + (selective ? " SP selective" : " full recompute");
      runs->push_back({RunName(name), mfu_2022, s, p, HardwareForResources(s.resources),
                       312 * (selective ? g.mfu : g.full_recompute_mfu)});
      runs->back().convention =
          RunName("MFU " + Fixed(100 * (selective ? g.mfu : g.full_recompute_mfu), 1) + " % × 312" +
                  (selective || g.gpus == 2240 ? "" : ", the MFU Table 5's scaled by the iteration times") +
                  "; Appendix A's count: ours");
    }
  }
}

}  // namespace shepherd::testing
