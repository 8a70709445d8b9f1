#include "planner/launch_args.h"

#include <algorithm>

namespace shepherd {
namespace {

void Flag(std::vector<std::string>* out, const char* name, long long value) {
  out->push_back(name);
  out->push_back(std::to_string(value));
}

// Megatron-LM takes uneven stages as the first and last stage's layers, the rest split evenly. True (and
// the flags added) when the layout has that shape; false when it is even or not expressible.
bool AddUnevenStages(const std::vector<int>& layers, std::vector<std::string>* out) {
  if (layers.size() < 2 || std::all_of(layers.begin(), layers.end(), [&](int l) { return l == layers[0]; }))
    return false;
  const bool middle_even = layers.size() < 3 || std::all_of(layers.begin() + 1, layers.end() - 1,
                                                            [&](int l) { return l == layers[1]; });
  if (!middle_even) return false;
  Flag(out, "--decoder-first-pipeline-num-layers", layers.front());
  Flag(out, "--decoder-last-pipeline-num-layers", layers.back());
  return true;
}

}  // namespace

LaunchArgs MakeLaunchArgs(const PlanEstimate& e) {
  const Plan& p = e.plan;
  const long long global_batch = static_cast<long long>(p.micro_batch_size) * p.micro_batches * p.dp;
  LaunchArgs a;
  std::vector<std::string>& m = a.megatron;
  Flag(&m, "--tensor-model-parallel-size", p.tp);
  Flag(&m, "--pipeline-model-parallel-size", p.pp);
  Flag(&m, "--context-parallel-size", p.cp);
  Flag(&m, "--expert-model-parallel-size", p.ep);
  if (p.ep > 1) Flag(&m, "--expert-tensor-parallel-size", p.expert_tp());
  if (p.vpp > 1) Flag(&m, "--num-virtual-stages-per-pipeline-rank", p.vpp);
  AddUnevenStages(e.stage_layers, &m);
  if (p.sequence_parallel) m.push_back("--sequence-parallel");
  // ZeRO 2 and 3 are Megatron-FSDP's sharding strategies (optimizer state and gradients; and parameters).
  if (p.zero_stage >= 2)
    m.insert(m.end(), {"--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                       p.zero_stage == 2 ? "optim_grads" : "optim_grads_params"});
  if (p.zero_stage >= 1) m.push_back("--use-distributed-optimizer");
  Flag(&m, "--micro-batch-size", p.micro_batch_size);
  Flag(&m, "--global-batch-size", global_batch);
  if (e.activation_recompute == Recompute::kSelective) {
    m.insert(m.end(), {"--recompute-granularity", "selective"});
  } else if (e.activation_recompute == Recompute::kFull) {
    m.insert(m.end(), {"--recompute-granularity", "full"});
    if (e.recompute_num_layers > 0) {
      m.insert(m.end(), {"--recompute-method", "block"});
      Flag(&m, "--recompute-num-layers", e.recompute_num_layers);
    } else {
      m.insert(m.end(), {"--recompute-method", "uniform", "--recompute-num-layers", "1"});
    }
  }

  Json& t = a.torchtitan;
  t["parallelism.tensor_parallel_degree"] = p.tp;
  t["parallelism.pipeline_parallel_degree"] = p.pp;
  t["parallelism.context_parallel_degree"] = p.cp;
  t["parallelism.expert_parallel_degree"] = p.ep;
  if (p.ep > 1) t["parallelism.expert_tensor_parallel_degree"] = p.expert_tp();
  // Sharded state (ZeRO 1-3, FSDP) is torchtitan's FSDP dimension; unsharded replicas are its DDP one.
  t["parallelism.data_parallel_shard_degree"] = p.zero_stage > 0 ? p.dp : 1;
  t["parallelism.data_parallel_replicate_degree"] = p.zero_stage > 0 ? 1 : p.dp;
  if (p.pp > 1) t["parallelism.pipeline_parallel_microbatch_size"] = p.micro_batch_size;
  // torchtitan's local batch is a data-parallel rank's share of the step: all its micro-batches.
  t["training.local_batch_size"] = static_cast<long long>(p.micro_batch_size) * p.micro_batches;
  t["training.global_batch_size"] = global_batch;
  t["activation_checkpoint.mode"] = e.activation_recompute == Recompute::kNone        ? "none"
                                    : e.activation_recompute == Recompute::kSelective ? "selective"
                                                                                      : "full";
  if (e.activation_recompute == Recompute::kSelective) t["activation_checkpoint.selective_ac_option"] = "op";
  return a;
}

}  // namespace shepherd
