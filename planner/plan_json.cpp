// PlanEstimate -> the POST /v1/plan answer. Field names are the API.md contract.
#include "planner/launch_args.h"
#include "planner/planner.h"

namespace shepherd {

Json ToJson(const PlanEstimate& e) {
  const Plan& p = e.plan;
  const MemoryBreakdown& m = e.memory;
  Json out{
      {"plan",
       {{"tp", p.tp},
        {"pp", p.pp},
        {"dp", p.dp},
        {"zero_stage", p.zero_stage},
        {"micro_batches", p.micro_batches},
        {"micro_batch_size", p.micro_batch_size},
        {"cp", p.cp},
        {"ep", p.ep},
        {"etp", p.expert_tp()},
        {"vpp", p.vpp},
        {"sequence_parallel", p.sequence_parallel},
        {"activation_recompute", ToString(e.activation_recompute)},
        {"pipeline_layers", e.stage_layers}}},
      {"fits", e.fits},
      {"memory_per_gpu_bytes",
       {{"weights", m.weights},
        {"gradients", m.gradients},
        {"optimizer", m.optimizer},
        {"master_weights", m.master_weights},
        {"activations", m.activations},
        {"working", m.working},
        {"total", m.total},
        {"stage", m.stage}}},
      {"gpu_memory_bytes", e.gpu_memory_bytes},
      {"bubble_fraction", e.bubble_fraction},
      {"comm_bytes_per_step",
       {{"tp", e.comm.tp}, {"cp", e.comm.cp}, {"ep", e.comm.ep}, {"pp", e.comm.pp}, {"dp", e.comm.dp}}},
      {"step_time_s", e.step_time_s},
      {"compute_time_s", e.compute_time_s},
      {"comm_time_s", e.comm_time_s},
      {"exposed_comm_s", e.exposed_comm_s},
      {"model_parameters", e.model_parameters},
      {"activated_parameters", e.activated_parameters},
      {"tflops_per_gpu", e.tflops_per_gpu},
      {"mfu", e.mfu},
      {"tokens_per_s", e.tokens_per_s},
      {"explanation", e.explanation},
  };
  if (e.fits_with_gpus > 0) out["fits_with_gpus"] = e.fits_with_gpus;
  if (e.recompute_num_layers > 0) out["plan"]["recompute_num_layers"] = e.recompute_num_layers;
  LaunchArgs args = MakeLaunchArgs(e);
  out["launch_args"] = {{"megatron", std::move(args.megatron)}, {"torchtitan", std::move(args.torchtitan)}};
  return out;
}

}  // namespace shepherd
