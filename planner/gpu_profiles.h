// Per-GPU hardware profiles for the planner (resources.gpu). Peak figures are the vendors' dense
// (no sparsity) datasheet numbers; bandwidths are ACHIEVABLE bandwidths, an assumption of the model:
// 80 % of the one-direction NVLink rate, of the per-GPU network line rate and of the HBM datasheet rate
// (docs/planner.md).
#pragma once

#include <optional>
#include <string>

namespace shepherd {

struct GpuProfile {
  const char* name;
  double peak_bf16_flops;       // dense
  double peak_fp8_flops;        // dense; 0 where the GPU has no fp8 tensor cores (A100: "fp8" is refused)
  double memory_bytes;          // HBM
  int nvlink_domain_gpus;       // GPUs per NVLink domain (8 for HGX boards, 72 for NVL72 racks)
  double nvlink_bytes_per_s;    // achievable bus bandwidth per GPU inside the domain
  double net_bytes_per_s;       // achievable bus bandwidth per GPU across domains (one NIC rail per GPU)
  double hbm_bytes_per_s;       // achievable HBM bandwidth (memory-bound element-wise kernels)
  double attention_efficiency;  // fraction of the 16-bit peak flash-attention kernels reach (fwd + bwd)
  double host_bytes_per_s;      // achievable GPU↔host bandwidth, one direction (CPU activation offloading)
  // The share of its 16-bit and fp8 peaks the GPU's best GEMM reaches (Maximum Achievable Matmul FLOPS,
  // docs/planner.md); 0 where it has no fp8. The matmul efficiency curve is the H100's: other GPUs' scale by
  // their share over the H100's 16-bit one.
  double gemm_bf16;
  double gemm_fp8;
  // The share of the datasheet peaks its kernels run at beside those of its HGX sibling (1 unless measured
  // otherwise): the GEMM and attention efficiencies are scaled by it, MFU stays over the datasheet peak.
  double sustained = 1;
};

// The H100 SXM's gemm_bf16, the share the matmul efficiency curve (Hardware::matmul_efficiency) is fitted at.
inline constexpr double kReferenceGemmShare = 0.803;

// The profile called `name` ("A100-40GB", "A100-80GB", "H100-80GB", "H800", "H200", "B200", "GB200-NVL72",
// "B300", "GB300-NVL72"); nullopt otherwise.
std::optional<GpuProfile> FindGpuProfile(const std::string& name);

}  // namespace shepherd
