// Step time of a layout (EstimateStepTime, comm_model.h; the model is EvaluatePlan's, planner.h), from the
// candidate's table of costs (layout_costs.h), by concern: the per-layer compute costs (GEMMs, attention,
// memory-bound kernels, recompute, the last stage's extras), the slowest stage (compute and bubble), and the
// exposed communication of each axis (tp, cp, ep, pp, dp) and of CPU activation offloading.
#include <algorithm>
#include <vector>

#include "planner/comm_model.h"
#include "planner/layout_costs.h"
#include "planner/memory_model.h"
#include "planner/model_arch.h"

namespace shepherd {

namespace planner_internal {

namespace {

// Assumptions (docs/planner.md): Megatron's default gradient bucket of 40M parameters is the part of the
// once-per-step reduction that cannot overlap; per-micro-batch ZeRO-3/FSDP traffic overlaps compute at
// 80 % (prefetch is per layer, the first gather and SM contention are not hidden).
constexpr double kBucketParams = 40e6;
constexpr double kPerMicroBatchOverlap = 0.8;
// training.moe_a2a_overlap hides this share of the all-to-all time it pairs with compute, as measured in
// Megatron-Bridge's controlled A/B (skills/nemo-mbridge-perf-expert-parallel-overlap: Qwen3-30B-A3B, 16
// H100, EP 16 over HybridEP, only the overlap changed): the step fell from 24.71 to 20.99 s, 3.72 s of the
// 8.25 s of communication kernels Nsight counted without it (9.08 ms, 0.11 %, beside compute).
constexpr double kEpOverlapHidden = 0.45;

// The GEMM rates and one layer's GEMM FLOPs per micro-batch, the routed experts' scaled to run at the dense
// rate. FP8 runs the transformer layers' GEMMs at the fp8 peak; attention (Transformer Engine's fused
// attention without fp8_dot_product_attention) and the output layer (Megatron's ColumnParallelLinear) stay
// 16-bit. Routed experts run as grouped GEMMs over the tokens each expert receives
// (ExpertMatmulEfficiency); everything else (attention projections, dense MLPs, routers, shared experts) at
// the dense curve.
void AddGemmCosts(const JobSpec& spec, const Plan& plan, const Hardware& hw, LayoutCosts* c) {
  const ModelSpec& m = spec.model;
  const TrainingSpec& t = spec.training;
  const double peak = t.precision == Precision::kFp8 ? hw.peak_fp8_flops * hw.fp8_gemm_ratio : hw.peak_flops;
  const double tokens = c->tokens;
  const LayerParamSplit& split = c->model.layer;
  const double routed = m.moe.enabled() ? split.expert * m.moe.top_k / m.moe.experts : 0;
  c->rate = peak * MatmulEfficiency(spec, plan, hw);
  c->expert_rate = m.moe.enabled() ? peak * ExpertMatmulEfficiency(spec, plan, hw) : c->rate;
  // Selective recompute of MLA's up projections runs their forward (2 FLOPs per weight and token) again.
  const bool up_proj_again =
      m.mla.enabled() && t.activation_recompute == Recompute::kSelective && t.recompute_modules.mla_up_proj;
  c->up_proj_flops = up_proj_again ? 2 * tokens * MlaUpProjParams(m) : 0;
  // Selective recompute of "mlp" runs the dense layers' MLP forward (2 FLOPs per weight and token) again.
  const double mlp_again_flops =
      c->mlp_again * 2 * tokens * m.hidden * m.ffn() * (m.mlp == Mlp::kSwiglu ? 3 : 2);
  // OpCheckpointing runs k, the output projection and the MLP's second matmul (w3, fc2; the activated
  // experts' on MoE layers) forward again.
  const double share = static_cast<double>(m.moe.count(m.layers)) / m.layers;
  const double op_mlp_width =
      (1 - share) * m.ffn() + share * (m.moe.top_k + m.moe.shared_experts) * m.expert_ffn();
  const double op_again_params =
      OpCheckpointing(t) ? static_cast<double>(m.hidden) * (m.k_width() + m.o_width() + op_mlp_width) : 0;
  c->layer_flops = 6 * tokens * ((split.activated - routed) + routed * c->rate / c->expert_rate) +
                   c->up_proj_flops + mlp_again_flops + 2 * tokens * op_again_params;
}

// Flash kernels skip the masked half of causal QKᵀ and AV (3·s·(q + o) per token and layer, q = a·d the
// width of Q and o of AV's output, not the 6·s·(q + o) = 12·s·a·d of the model-FLOP convention) and, on
// windowed layers, all but the w keys before each query (6·w·(q + o)); eager attention computes the full
// score matrix and masks it. Windowed layers are spread evenly. The attention kernels (QKᵀ, softmax, AV)
// reach their own fraction of peak, not the GEMMs'. Selective recompute of core attention runs their
// forward, a third of their FLOPs, again on every layer.
void AddAttentionCosts(const JobSpec& spec, const Hardware& hw, LayoutCosts* c) {
  const ModelSpec& m = spec.model;
  const bool eager = spec.training.attention == Attention::kEager;
  const double windowed = eager ? 0 : static_cast<double>(m.windowed_layers()) / m.layers;
  c->attention_flops = ((eager ? 6.0 : 3.0) * m.seq_len * (1 - windowed) + 6.0 * m.window * windowed) *
                       (m.q_width() + m.o_width()) * c->tokens;
  c->attention_rate = hw.peak_flops * hw.attention_efficiency;
  c->attention_again = CoreAttentionRecomputed(spec.training) ? 1.0 / 3 : 0;
}

// Memory-bound kernels run between the matmuls, not beside them: forward once, backward twice (the
// gradient and the saved input read, the input gradient written), the forward again on a layer full
// recompute runs again (recompute_s); selective recompute runs its modules' kernels again (hbm.recomputed).
// A layer's forward again: a third of its GEMM FLOPs (forward 2, backward 4 per weight and token), its
// forward element-wise passes; and a third of its attention (in the stage's sum). Cross-entropy over the
// rank's s/cp · b · V/tp logits, LossBytesPerLogit each; the output layer at the 16-bit dense curve.
void AddElementwiseAndOutputCosts(const JobSpec& spec, const Plan& plan, const Hardware& hw, LayoutCosts* c) {
  const ModelSpec& m = spec.model;
  const ElementwiseBytes hbm = ElementwiseBytesPerLayer(spec, plan);
  c->layer_elementwise_s =
      ((hbm.layer + hbm.scores) * 3 + hbm.recomputed + hbm.fp8_forward + hbm.fp8_backward) /
      hw.hbm_bytes_per_s;
  c->refwd_elementwise_s = (hbm.layer + hbm.scores + hbm.fp8_forward) / hw.hbm_bytes_per_s;
  c->recompute_s = c->layer_flops / 3 / c->model_ranks / c->rate + c->refwd_elementwise_s;
  c->loss_s = LossBytesPerLogit(spec.training) * c->tokens / plan.cp * m.vocab / plan.tp / hw.hbm_bytes_per_s;
  c->output_layer_s = 6.0 * m.vocab * m.hidden * c->tokens / c->model_ranks /
                      (hw.peak_flops * MatmulEfficiency(spec, plan, hw));
}

// Each multi-token-prediction depth on the last stage: its layer (the MoE kind where the model has MoE,
// full attention), its input projection, the output layer and the loss once more (its TP, EP and pipeline
// communication is not counted).
void AddMtpCosts(const JobSpec& spec, LayoutCosts* c) {
  const ModelSpec& m = spec.model;
  const TrainingSpec& t = spec.training;
  if (m.mtp_layers <= 0) return;
  const bool eager = t.attention == Attention::kEager;
  const LayerParamSplit& mtp = c->model.mtp;
  const double mtp_routed = mtp.activated - mtp.dense;
  const double mtp_attention = 3.0 * (eager ? 2 : 1) * m.seq_len * (m.q_width() + m.o_width()) * c->tokens;
  // Block recompute (recompute_num_layers) leaves MTP layers alone (multi_token_prediction.py).
  const double recompute =
      t.activation_recompute == Recompute::kFull && t.recompute_num_layers == 0 ? 4.0 / 3 : 1;
  c->mtp_s =
      m.mtp_layers *
      ((6 * c->tokens * (mtp.dense + mtp_routed * c->rate / c->expert_rate) + c->up_proj_flops) * recompute /
           c->model_ranks / c->rate +
       mtp_attention * (recompute + c->attention_again) / c->model_ranks / c->attention_rate +
       c->layer_elementwise_s + (recompute > 1 ? c->refwd_elementwise_s : 0) + c->output_layer_s + c->loss_s);
}

// The slowest stage's time per micro-batch, and its attention kernels' share (what ring attention hides
// behind).
struct SlowestStage {
  double seconds = 0;
  double attention_s = 0;
};
SlowestStage SlowestStageOf(const TrainingSpec& t, const Plan& plan, const LayoutCosts& c) {
  SlowestStage slowest;
  for (int i = 0; i < plan.pp; ++i) {
    const int layers = c.stage_layers[i];
    const double recomputed = RecomputedLayers(t, layers, plan.vpp);
    const double attention_s = (layers * (1 + c.attention_again) + recomputed / 3) * c.attention_flops /
                               c.model_ranks / c.attention_rate;
    const double s = layers * c.layer_flops / c.model_ranks / c.rate + attention_s +
                     layers * c.layer_elementwise_s + recomputed * c.recompute_s +
                     (i == plan.pp - 1 ? c.output_layer_s + c.loss_s + c.mtp_s : 0);
    if (s > slowest.seconds) slowest = {s, attention_s};
  }
  return slowest;
}

// Contiguous placement in rank order tp, cp, dp, pp: a group stays in one NVLink domain when its span does.
double Bandwidth(long long span, const Hardware& hw) {
  return span <= hw.nvlink_domain_gpus ? hw.nvlink_bytes_per_s : hw.ib_bytes_per_s;
}
double Latency(long long span, const Hardware& hw) {
  return span <= hw.nvlink_domain_gpus ? hw.nvlink_latency_s : hw.ib_latency_s;
}

// TP collectives of the largest stage: the layers' all-reduces (or reduce-scatter plus all-gather), the MoE
// layers' expert halves over the etp group, and selective "mlp" recompute's one more per dense layer.
double TpSeconds(const JobSpec& spec, const Plan& plan, const Hardware& hw, const LayoutCosts& c) {
  const double mb = plan.micro_batches, a = c.activation_bytes;
  const int etp = plan.expert_tp();
  const double tp_all_reduce = AllReduceSeconds(a, plan.tp, Bandwidth(plan.tp, hw), Latency(plan.tp, hw));
  return mb * c.tp_collectives *
             ((c.max_stage_layers - c.expert_halves) * tp_all_reduce +
              c.expert_halves *
                  AllReduceSeconds(a * etp / plan.tp, etp, Bandwidth(etp, hw), Latency(etp, hw))) +
         mb * c.max_stage_layers * c.mlp_again * tp_all_reduce;
}

// Ring attention's K/V passes over the cp group.
double CpSeconds(const Plan& plan, const Hardware& hw, const LayoutCosts& c) {
  if (plan.cp <= 1) return 0;
  const long long span = static_cast<long long>(plan.tp) * plan.cp;
  return c.comm.cp / Bandwidth(span, hw) + c.max_stage_layers * static_cast<double>(plan.micro_batches) *
                                               3.0 * (plan.cp - 1) * Latency(span, hw);
}

// MoE all-to-alls over the EP group (Megatron-Core's expert grid, etp fastest, then ep: it spans etp·ep
// ranks, members etp apart), one latency each (NCCL sends to all peers at once), all on the critical
// path. A rank reaches the EP peers inside its NVLink domain over NVLink and the others over the network
// at the same time, so the slower share sets the time. DeepEP and HybridEP send each token once to every
// other domain holding any of its experts and forward the copies over NVLink there: the network carries
// NetworkCopiesPerToken of the k·(n − 1)/n copies the alltoall dispatcher sends, NVLink all of them.
double EpSeconds(const JobSpec& spec, const Plan& plan, const Hardware& hw, const LayoutCosts& c) {
  if (plan.ep <= 1) return 0;
  const ModelSpec& m = spec.model;
  const int domain = hw.nvlink_domain_gpus, etp = plan.expert_tp();
  const long long span = static_cast<long long>(etp) * plan.ep;
  const double all_to_alls = StageMoeLayers(m, c.max_stage_layers) * plan.micro_batches * c.tp_collectives;
  const long long local = span <= domain ? plan.ep : std::max(1, domain / etp);  // incl. itself
  const double nvlink_share = static_cast<double>(local - 1) / (plan.ep - 1);
  double nvlink = c.comm.ep * nvlink_share, network = c.comm.ep * (1 - nvlink_share);
  if (spec.training.moe_dispatcher != MoeDispatcher::kAllToAll && local < plan.ep) {
    const double domains = static_cast<double>(plan.ep) / local;
    nvlink = c.comm.ep;
    network *=
        NetworkCopiesPerToken(m.moe.experts, m.moe.top_k, domains) / (m.moe.top_k * (domains - 1) / domains);
  }
  return std::max(nvlink / hw.nvlink_bytes_per_s, network / hw.ib_bytes_per_s) +
         all_to_alls * Latency(span, hw);
}

// Pipeline sends and receives; without sequence parallelism the receiving TP group all-gathers the slices
// back into the whole tensor.
double PpSeconds(const Plan& plan, const Hardware& hw, const LayoutCosts& c) {
  if (plan.pp <= 1) return 0;
  const double mb = plan.micro_batches;
  const long long world = plan.world_size();
  double s = c.comm.pp / Bandwidth(world, hw) + 2.0 * mb * plan.vpp * Latency(world, hw);
  if (!SequenceParallel(plan)) {
    s += 2.0 * mb * plan.vpp *
         AllGatherSeconds(c.activation_bytes, plan.tp, Bandwidth(plan.tp, hw), Latency(plan.tp, hw));
  }
  return s;
}

// Data-parallel collectives: their total time and the part on the critical path.
struct DpTime {
  double total = 0, exposed = 0;
};
// Dense parameters over the dp·cp ranks of one TP index (tp apart: domain/tp of them share an NVLink
// domain) plus routed experts over the expert-data-parallel ranks of one expert shard (etp·ep apart).
// The last gradient bucket's reduction starts after the backward ends: never hidden. DeepSpeed's pipeline
// engine reduces gradients after the last backward (its schedule's ReduceGrads step), so with pp > 1 none
// of it overlaps. Pipelined FSDP reduce-scatters the stage's gradients after its last backward (the
// pipeline stage's post-backward): not overlapped; the one gather per layer is prefetched during the first
// forward.
DpTime DpSeconds(const TrainingSpec& t, const Plan& plan, const Hardware& hw, const LayoutCosts& c,
                 double stage_s) {
  const int domain = hw.nvlink_domain_gpus, etp = plan.expert_tp();
  const long long dp_span = static_cast<long long>(plan.tp) * plan.cp * plan.dp;
  const int n = plan.dp * plan.cp, n_expert = ExpertDataParallelSize(plan);
  const RankParams& params = c.params;
  const double ge = GradientElementBytes(t), mb = plan.micro_batches;
  const double b = DataParallelBusBandwidth(dp_span, std::max(1, domain / plan.tp), hw);
  const double be = DataParallelBusBandwidth(dp_span, std::max(1, domain / (etp * plan.ep)), hw);
  const double l = Latency(dp_span, hw);
  const double all_reduce =
      AllReduceSeconds(params.dense * ge, n, b, l) + AllReduceSeconds(params.expert * ge, n_expert, be, l);
  const double reduce =
      AllGatherSeconds(params.dense * ge, n, b, l) + AllGatherSeconds(params.expert * ge, n_expert, be, l);
  const double gather = AllGatherSeconds(WeightBytes(t, params.dense, params.vocab), n, b, l) +
                        AllGatherSeconds(WeightBytes(t, params.expert, 0), n_expert, be, l);
  const double backward = 2.0 / 3 * stage_s, forward = stage_s / 3;
  const double bucket_params = std::min(params.dense + params.expert, kBucketParams);
  DpTime dp;
  switch (ZeroStageOf(t, plan)) {
    case 0:
      dp.total = all_reduce;
      dp.exposed = std::max(dp.total - backward, AllReduceSeconds(bucket_params * ge, n, b, l));
      break;
    case 1:
      dp.total = reduce + gather;
      dp.exposed = std::max(reduce - backward, AllGatherSeconds(bucket_params * ge, n, b, l)) +
                   std::max(0.0, gather - forward);
      break;
    case 2:
      dp.total = mb * reduce + gather;
      dp.exposed =
          mb * (std::max(0.0, reduce - backward) + (1 - kPerMicroBatchOverlap) * std::min(reduce, backward)) +
          std::max(0.0, gather - forward);
      break;
    default: {
      const double per_mb = 2 * gather + reduce;
      dp.total = mb * per_mb;
      dp.exposed =
          mb * (std::max(0.0, per_mb - stage_s) + (1 - kPerMicroBatchOverlap) * std::min(per_mb, stage_s));
      break;
    }
  }
  if (t.framework == Framework::kDeepSpeed && plan.pp > 1) dp.exposed = std::max(dp.exposed, dp.total);
  if (FsdpPipelined(t, plan)) dp.exposed = reduce + std::max(0.0, gather - forward);
  return dp;
}

// CPU activation offloading (Transformer Engine's cpu_offload.py on its own stream): each offloaded
// layer's activations go to the host during the forward and come back during the backward, per
// micro-batch; what a direction's copies take beyond that pass's compute is exposed.
struct OffloadTime {
  double total = 0, exposed = 0;
};
OffloadTime OffloadSeconds(const TrainingSpec& t, const Plan& plan, const Hardware& hw, const LayoutCosts& c,
                           double stage_s) {
  if (t.cpu_offload_layers <= 0) return {};
  const double mb = plan.micro_batches;
  const double backward = 2.0 / 3 * stage_s, forward = stage_s / 3;
  const double copy = t.cpu_offload_layers * c.memory.layer_activations / hw.host_bytes_per_s;
  return {2 * mb * copy, mb * (std::max(0.0, copy - forward) + std::max(0.0, copy - backward))};
}

// training.moe_a2a_overlap, Megatron-Core's combined 1F1B (model_chunk_schedule_plan.py): each
// steady-state forward chunk runs beside another micro-batch's backward chunk, the dispatch and combine
// of each on the communication stream under the other's attention or expert compute. The warm-up
// forwards and cool-down backwards run alone: on stage 0, 2(pp − 1) + (vpp − 1)·pp + 1 of the
// micro_batches·vpp chunks each; one of each without a pipeline. Of the paired time kEpOverlapHidden is
// hidden, of the all-to-alls or of the compute beside them, whichever is shorter.
double EpExposed(const TrainingSpec& t, const Plan& plan, const StepTime& st) {
  if (!t.moe_a2a_overlap || plan.ep <= 1) return st.ep;
  const double chunks = static_cast<double>(plan.micro_batches) * plan.vpp;
  const double alone =
      plan.pp > 1 ? std::min(chunks, 2.0 * (plan.pp - 1) + (plan.vpp - 1.0) * plan.pp + 1) : 1;
  return st.ep - kEpOverlapHidden * (chunks - alone) / chunks * std::min(st.ep, st.compute);
}

}  // namespace

LayoutCosts LayoutCostsOf(const JobSpec& spec, const Plan& plan, const Hardware& hw,
                          const ModelCounts& counts) {
  LayoutCosts c = LayoutCostsOf(spec, plan, counts);
  c.model_ranks = static_cast<double>(plan.tp) * plan.cp;
  AddGemmCosts(spec, plan, hw, &c);
  AddAttentionCosts(spec, hw, &c);
  AddElementwiseAndOutputCosts(spec, plan, hw, &c);
  AddMtpCosts(spec, &c);
  return c;
}

StepTime StepTimeOf(const JobSpec& spec, const Plan& plan, const Hardware& hw, const LayoutCosts& c) {
  const TrainingSpec& t = spec.training;
  const SlowestStage stage = SlowestStageOf(t, plan, c);
  const double mb = plan.micro_batches;
  StepTime st;
  st.compute = mb * stage.seconds;
  st.bubble = static_cast<double>(plan.pp - 1) / plan.vpp * stage.seconds;
  st.tp = TpSeconds(spec, plan, hw, c);
  st.cp = CpSeconds(plan, hw, c);
  st.ep = EpSeconds(spec, plan, hw, c);
  st.pp = PpSeconds(plan, hw, c);
  const DpTime dp = DpSeconds(t, plan, hw, c, stage.seconds);
  st.dp = dp.total;
  const OffloadTime offload = OffloadSeconds(t, plan, hw, c, stage.seconds);
  st.offload = offload.total;
  // Ring attention hides behind the attention kernels; --tp-comm-overlap pipelines each TP collective's tp
  // chunks with its GEMM: one chunk's transfer is exposed.
  const double cp_exposed = std::max(0.0, st.cp - mb * stage.attention_s);
  const double tp_exposed = t.tp_comm_overlap && SequenceParallel(plan) ? st.tp / plan.tp : st.tp;
  st.exposed = tp_exposed + cp_exposed + EpExposed(t, plan, st) + st.pp + dp.exposed + offload.exposed;
  st.step = st.compute + st.bubble + st.exposed;
  return st;
}

}  // namespace planner_internal

StepTime EstimateStepTime(const JobSpec& spec, const Plan& plan, const Hardware& hw) {
  return planner_internal::StepTimeOf(
      spec, plan, hw, planner_internal::LayoutCostsOf(spec, plan, hw, ModelCountsOf(spec.model)));
}

}  // namespace shepherd
