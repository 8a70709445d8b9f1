// Communication volume, collective times, pipeline bubble and step time of a parallel transformer layout.
// Building blocks of planner/planner.h, exposed for tests. Formulas and sources: docs/planner.md.
// REQUIRES for every function taking a plan: the plan and spec passed planner validation.
#pragma once

#include "core/job.h"
#include "planner/planner.h"

namespace shepherd {

// Bytes each of `n` ranks sends in a ring all-reduce of a `bytes`-sized buffer: 2·(n − 1)/n · bytes.
double RingAllReduceBytes(double bytes, int n);
// Bytes each of `n` ranks sends in a ring all-gather or reduce-scatter: (n − 1)/n · bytes.
double AllGatherBytes(double bytes, int n);

// Seconds of a collective over `n` ranks at bus bandwidth `bw` with per-step latency `latency`:
// bytes moved per rank / bw + latency × steps, where steps is the smaller of the ring's (2(n − 1) for an
// all-reduce, n − 1 for an all-gather or reduce-scatter) and a tree's (2·⌈log2 n⌉, ⌈log2 n⌉). NCCL picks
// the tree for small, latency-bound messages; the bandwidth term is the ring's for both. 0 for n = 1.
double AllReduceSeconds(double bytes, int n, double bw, double latency);
double AllGatherSeconds(double bytes, int n, double bw, double latency);

// Bus bandwidth of a ring collective over a group spanning `span` consecutive ranks with
// `members_per_domain` of its members in each NVLink domain: NVLink inside one domain; across domains
// each member's own NIC (one per GPU, rail-optimized nodes) carries one of NCCL's channels between
// domains, so min(NVLink, members_per_domain × network). A DP group of TP 8 ranks on 8-GPU nodes has one
// member per node (the network's rate); a TP 1 group, all eight (8 × 50 = 400 GB/s on H100, where
// nccl-tests' multi-node all-reduce bus bandwidth is quoted at 400-450 GB/s).
double DataParallelBusBandwidth(long long span, int members_per_domain, const Hardware& hw);

// Bytes one rank of the slowest stage sends per step, by axis (M micro-batches, L layers on the stage,
// A = s/cp · b · h · 2 bytes (4 for fp32)):
//   tp: L · M · (4, or 6 with full recompute) ring all-reduces of A (with sequence parallelism a
//       reduce-scatter plus an all-gather each, the same bytes);
//   cp: ring attention: L · M · 3 · (cp − 1) · K and V chunks of the rank's kv_heads/tp heads
//       (2 · s/cp · b · kv_heads/tp · head_dim · 2 bytes),
//       once forward, twice backward (K, V and their gradients);
//   ep: MoE token dispatch and combine: L_moe · M · 4 (6 with full recompute) all-to-alls of the rank's
//       tokens (s/cp · b, ÷ tp with sequence parallelism) × top_k × h × 2 bytes, (ep − 1)/ep of it leaving
//       the rank; L_moe = the stage's layers × the share of MoE layers (in the step time the share sent
//       to EP peers in the rank's NVLink domain goes over NVLink, the rest over the network, concurrently);
//   pp: 2 · M · vpp activation slices A/tp, forward and backward (each TP rank sends its slice; without
//       sequence parallelism the receiving TP group all-gathers them, priced in the step time);
//   dp (shards N = dp·cp, or dp·cp/ep for routed experts, parameters P of the rank, gradients reduced in fp32
//       by megatron and fsdp, in the weight precision by deepspeed; timed at DataParallelBusBandwidth):
//       all-reduce of gradients (ZeRO 0), reduce-scatter of gradients plus all-gather of 16-bit weights
//       (megatron distributed optimizer, ZeRO-1), M reduce-scatters plus one gather (ZeRO-2),
//       M · (two weight all-gathers + a gradient reduce-scatter) (ZeRO-3, FSDP).
CommBytes EstimateCommBytes(const JobSpec& spec, const Plan& plan);

// Seconds of one training step, see EvaluatePlan in planner/planner.h for the model.
struct StepTime {
  double compute = 0;                             // micro_batches · slowest stage time
  double bubble = 0;                              // (pp − 1)/vpp · slowest stage time
  double tp = 0, cp = 0, ep = 0, pp = 0, dp = 0;  // total time of each axis' collectives
  double offload = 0;                             // CPU activation offloading's copies, to the host and back
  double exposed = 0;                             // communication (and offload copies) on the critical path
  double step = 0;                                // compute + bubble + exposed
  double comm() const { return tp + cp + ep + pp + dp + offload; }
};
StepTime EstimateStepTime(const JobSpec& spec, const Plan& plan, const Hardware& hw);

// Fraction of peak the dense matmuls of a rank reach: hw.matmul_efficiency · d / (d + hw.matmul_half_size)
// at the GEMM's smaller side, d = min(hidden / tp, s/cp · b): a context-parallel rank multiplies only its
// s/cp · b tokens, and a GEMM that thin fills fewer tiles and moves more weight bytes per FLOP.
double MatmulEfficiency(const JobSpec& spec, const Plan& plan, const Hardware& hw);
// The same curve at size d: hw.matmul_efficiency · d / (d + hw.matmul_half_size).
double MatmulEfficiencyAt(double d, const Hardware& hw);

// DeepEP's and HybridEP's network copies per token: the expected number of the other `domains` − 1 NVLink
// domains of an EP group that hold at least one of a token's top_k experts, the experts spread evenly over
// the domains and chosen without repeats (balanced routing): (n − 1) · (1 − C(E − E/n, k) / C(E, k)). The
// alltoall dispatcher sends k · (n − 1)/n. Qwen3-30B-A3B (128 experts, top 8) over 2 domains: 0.997
// against 4.
double NetworkCopiesPerToken(int experts, int top_k, double domains);

// Tokens each routed expert receives per micro-batch with balanced routing: the EP group's ep ranks each
// dispatch s/cp · b tokens × top_k over the model's experts, s/cp · b · top_k · ep / experts per local expert
// (with expert tensor parallelism = tp every TP rank sees all of them and holds 1/tp of each expert).
// REQUIRES: model.moe.enabled().
double ExpertTokensPerMicroBatch(const JobSpec& spec, const Plan& plan);
// Fraction of peak the routed experts' grouped GEMMs reach: the dense curve at the GEMM's smallest
// dimension, min(hidden/tp, ExpertTokensPerMicroBatch) (an expert GEMM is tokens × h × F_e/tp).
// REQUIRES: model.moe.enabled().
double ExpertMatmulEfficiency(const JobSpec& spec, const Plan& plan, const Hardware& hw);

}  // namespace shepherd
