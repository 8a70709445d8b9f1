// The costs of one (spec, layout) candidate, built once (LayoutCostsOf) and read by the communication, time
// and memory models (comm_model.cpp, step_time.cpp, memory_model.cpp, planner.cpp's Estimate). Its rows are
// per layer and, where time is concerned, per micro-batch on one rank: a transformer layer's parameters and
// their model state (weights, gradients, optimizer state, master weights), the activations it keeps, its
// GEMM and attention FLOPs, memory-bound seconds, TP collectives and recompute; the same for the embedding,
// the output layer and loss, and one MTP depth. A stage's memory and time are sums over the rows it holds
// (StageMemory, StepTimeOf); the bytes each axis moves per step (CommBytes) are the largest stage's rows
// times its micro-batches. Not part of the module's API. Pure values and functions: safe on any thread.
// REQUIRES for every function: the spec and plan passed planner validation (planner_internal.h).
#pragma once

#include <vector>

#include "core/job.h"
#include "planner/memory_model.h"
#include "planner/model_arch.h"
#include "planner/planner.h"

namespace shepherd::planner_internal {

// HBM bytes one rank moves per layer and micro-batch through memory-bound element-wise kernels (see
// ElementwiseBytesPerLayer in comm_model.cpp for what each term counts).
struct ElementwiseBytes {
  double layer = 0, scores = 0, fp8_forward = 0, fp8_backward = 0, recomputed = 0;
};

// Bytes one rank sends in one collective of one layer and micro-batch, by axis: the rows CommBytes sums.
struct LayerBytes {
  double tp = 0;         // a TP all-reduce (or reduce-scatter plus all-gather) of the activation tensor
  double tp_expert = 0;  // a MoE layer's expert-half collective over the etp group (ExpertHalvesOffTp)
  double cp = 0;         // a ring-attention pass of the rank's K and V chunk
  double ep = 0;         // a MoE all-to-all, dispatch or combine (AllToAllBytes)
};

// One candidate's table: built once (LayoutCostsOf), then summed by stage and by axis.
struct LayoutCosts {
  ModelCounts model;  // the architecture's counts (the same for every candidate of a model)
  // The layout.
  std::vector<int> stage_layers;  // transformer layers per stage (StageLayers)
  int max_stage_layers = 0;       // the largest stage's layers: it sets the per-step communication
  double tokens = 0;              // s · b, per micro-batch
  double activation_bytes = 0;    // s/cp · b · h elements: what a rank exchanges with its TP group
  double tp_collectives = 0;      // TP collectives per layer and micro-batch (TpCollectivesPerLayer)
  double expert_halves = 0;       // MoE layers' expert halves over the etp group instead (ExpertHalvesOffTp)
  double mlp_again = 0;           // the share of layers whose MLP selective recompute runs again
  LayerBytes bytes;               // per collective of a layer and micro-batch
  RankParams params;              // the heaviest stage's rank (MaxStageParams: a sum of memory's rows)
  CommBytes comm;                 // bytes each rank sends per step, by axis (EstimateCommBytes)
  LayerMemoryCosts memory;        // parameters, model state and activations per row (memory_model.h)
  // Per layer and micro-batch on one rank (filled on the hardware by step_time.cpp's Add*Costs).
  double model_ranks = 0;          // tp · cp: the ranks a layer's FLOPs are split over
  double rate = 0;                 // FLOP/s of the dense GEMMs
  double expert_rate = 0;          // FLOP/s of the routed experts' grouped GEMMs
  double attention_rate = 0;       // FLOP/s of the attention kernels
  double layer_flops = 0;          // GEMM FLOPs, forward and backward, plus selective/op recompute's
  double up_proj_flops = 0;        // MLA up projections run again (selective "mla_up_proj")
  double attention_flops = 0;      // QKᵀ and AV, forward and backward
  double attention_again = 0;      // the share of attention FLOPs selective recompute runs again
  double layer_elementwise_s = 0;  // memory-bound kernels, forward and backward
  double refwd_elementwise_s = 0;  // memory-bound kernels of one forward again
  double recompute_s = 0;          // one layer's forward again under full recompute
  // The last stage only, per micro-batch.
  double output_layer_s = 0;
  double loss_s = 0;
  double mtp_s = 0;  // every multi-token-prediction depth
};

// The hardware-free part of the table: stages, activation bytes, collectives, parameters and CommBytes.
// `counts`: ModelCountsOf(spec.model), which a search counts once.
LayoutCosts LayoutCostsOf(const JobSpec& spec, const Plan& plan, const ModelCounts& counts);
// The whole table: LayoutCostsOf plus the per-layer compute costs on `hw`.
LayoutCosts LayoutCostsOf(const JobSpec& spec, const Plan& plan, const Hardware& hw, const ModelCounts& counts);

// Step time from a complete table (step_time.cpp).
StepTime StepTimeOf(const JobSpec& spec, const Plan& plan, const Hardware& hw, const LayoutCosts& c);

// Shared helpers (comm_model.cpp).
double ActivationElementBytes(Precision p);
bool SequenceParallel(const Plan& p);
double ActivationBytes(const JobSpec& spec, const Plan& plan);
RankParams MaxStageParams(const JobSpec& spec, const Plan& plan, const std::vector<int>& layers,
                          const LayerMemoryCosts& costs);
double WeightBytes(const TrainingSpec& t, double params, double vocab);
double StageMoeLayers(const ModelSpec& m, int stage_layers);
double ExpertHalvesOffTp(const JobSpec& spec, const Plan& plan, int stage_layers);
double AllToAllBytes(const JobSpec& spec, const Plan& plan);
ElementwiseBytes ElementwiseBytesPerLayer(const JobSpec& spec, const Plan& plan);
double LossBytesPerLogit(const TrainingSpec& t);
bool FsdpPipelined(const TrainingSpec& t, const Plan& plan);
int ZeroStageOf(const TrainingSpec& t, const Plan& plan);
double TpCollectivesPerLayer(const TrainingSpec& t, int stage_layers, int vpp);
double MlpRecomputedShare(const JobSpec& spec);

}  // namespace shepherd::planner_internal
