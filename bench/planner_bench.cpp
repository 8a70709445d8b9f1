// Planner benchmark: AutoPlan (planner/planner.h) for Llama 3 405B (126 layers, h 16384, 128 heads, 8 KV
// heads, SwiGLU FFN 53248, vocab 128256, seq 8192, 16M tokens per batch) on H100-80GB:
//   (a) 16,384 GPUs; (b) 131,072 GPUs (same model, 2048 sequences per batch); and the mixture-of-experts
//   DeepSeek-V3 architecture (61 layers, h 7168, 128 heads, 58 MoE layers of 256 experts of width 2048, top
//   8, 1 shared; 15,360 sequences of 4096) on (c) 131,072 GPUs, where ep and etp are searched
//   too.
// Prints the median wall time over runs (steady_clock), the median CPU time of the thread
// (CLOCK_THREAD_CPUTIME_ID: on a shared machine the wall time also counts the waits for a core) and the
// chosen layout. Target: < 1 s for (b).
// Usage: planner_bench [runs]   (default 5)
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "planner/planner.h"

namespace shepherd {
namespace {

JobSpec Llama405B(int gpus) {
  JobSpec s;
  s.model.layers = 126;
  s.model.hidden = 16384;
  s.model.heads = 128;
  s.model.kv_heads = 8;
  s.model.ffn_hidden = 53248;
  s.model.mlp = Mlp::kSwiglu;
  s.model.norm = Norm::kRmsNorm;
  s.model.vocab = 128256;
  s.model.seq_len = 8192;
  s.training.global_batch_size = 2048;
  s.training.activation_recompute = Recompute::kFull;
  s.resources.gpus = gpus;
  s.resources.gpu = "H100-80GB";
  return s;
}

JobSpec DeepSeekV3(int gpus) {
  JobSpec s;
  s.model.layers = 61;
  s.model.hidden = 7168;
  s.model.heads = 128;
  s.model.ffn_hidden = 18432;
  s.model.mlp = Mlp::kSwiglu;
  s.model.norm = Norm::kRmsNorm;
  s.model.vocab = 129280;
  s.model.seq_len = 4096;
  s.model.moe = {
      .experts = 256, .top_k = 8, .expert_ffn_hidden = 2048, .shared_experts = 1, .moe_layers = 58};
  s.training.global_batch_size = 15360;
  s.resources.gpus = gpus;
  s.resources.gpu = "H100-80GB";
  return s;
}

double ThreadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void Run(const char* name, const JobSpec& spec, int runs) {
  const int gpus = spec.resources.gpus;
  const Hardware hw = HardwareForResources(spec.resources);
  std::vector<double> ms, cpu_ms;
  Result<PlanEstimate> e = AutoPlan(spec, hw);
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuMs();
    e = AutoPlan(spec, hw);
    cpu_ms.push_back(ThreadCpuMs() - cpu_start);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu_ms.begin(), cpu_ms.end());
  if (!e.ok()) {
    std::printf("%s %d GPUs: error %s\n", name, gpus, e.status().message().c_str());
    return;
  }
  const Plan& p = e->plan;
  std::printf(
      "%s %7d GPUs: median %.1f ms (min %.1f, max %.1f), CPU %.1f ms | tp=%d cp=%d ep=%d etp=%d pp=%d vpp=%d "
      "dp=%d ZeRO-%d "
      "mbs=%d | "
      "%.0f TFLOP/s per GPU, %.1f GB per GPU, fits=%d\n",
      name, gpus, ms[ms.size() / 2], ms.front(), ms.back(), cpu_ms[cpu_ms.size() / 2], p.tp, p.cp, p.ep, p.expert_tp(), p.pp, p.vpp,
      p.dp, p.zero_stage, p.micro_batch_size, e->tflops_per_gpu, e->memory.total / 1e9, e->fits ? 1 : 0);
}

}  // namespace
}  // namespace shepherd

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  shepherd::Run("llama3-405b", shepherd::Llama405B(16384), runs);
  shepherd::Run("llama3-405b", shepherd::Llama405B(131072), runs);
  shepherd::Run("deepseek-v3", shepherd::DeepSeekV3(131072), runs);
  return 0;
}
