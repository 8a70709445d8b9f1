// Per-GPU hardware profiles for the planner (resources.gpu): one constant per GPU model, nothing mutable,
// safe on any thread. Peak figures are the vendors' dense
// (no sparsity) datasheet numbers; bandwidths are ACHIEVABLE bandwidths, an assumption of the model:
// 80 % of the one-direction NVLink rate, of the per-GPU network line rate and of the HBM datasheet rate
// (docs/planner.md).
#pragma once

#include <optional>
#include <string>

namespace shepherd {

// Achievable bandwidth over the datasheet's one-direction rate (the same factor for NVLink, the network,
// HBM and the host link; docs/planner.md).
inline constexpr double kAchievable = 0.8;
inline constexpr double kMiB = 1024.0 * 1024;

// One GPU model; every field is named where a profile is written (designated initializers).
struct GpuProfile {
  const char* name = "";
  double peak_bf16_flops = 0;       // dense
  double peak_fp8_flops = 0;        // dense; 0 where the GPU has no fp8 tensor cores (A100: "fp8" is refused)
  double memory_bytes = 0;          // HBM, as the driver reports it
  int nvlink_domain_gpus = 8;       // GPUs per NVLink domain (8 for HGX boards, 72 for NVL72 racks)
  double nvlink_bytes_per_s = 0;    // achievable bus bandwidth per GPU inside the domain
  double net_bytes_per_s = 0;       // achievable bus bandwidth per GPU across domains (one NIC rail per GPU)
  double hbm_bytes_per_s = 0;       // achievable HBM bandwidth (memory-bound element-wise kernels)
  double attention_efficiency = 0;  // fraction of the 16-bit peak flash-attention kernels reach (fwd + bwd)
  double host_bytes_per_s = 0;  // achievable GPU↔host bandwidth, one direction (CPU activation offloading)
  // The share of its 16-bit and fp8 peaks the GPU's best GEMM reaches (Maximum Achievable Matmul FLOPS,
  // docs/planner.md); 0 where it has no fp8. The matmul efficiency curve is the H100's: other GPUs' scale by
  // their share over the H100's 16-bit one.
  double gemm_bf16 = 0;
  double gemm_fp8 = 0;
  // The share of the datasheet peaks its kernels run at beside those of its HGX sibling (1 unless measured
  // otherwise): the GEMM and attention efficiencies are scaled by it, MFU stays over the datasheet peak.
  double sustained = 1;
};

// H100 SXM: 989 / 1979 (fp8) TFLOP/s dense, NVLink4 900 GB/s both directions, NDR 400 Gb/s per GPU, HBM3
// 3.35 TB/s, PCIe Gen5 x16 to the host (sources in gpu_profiles.cpp). The default GPU: the planner's
// `Hardware` defaults are read from it.
inline constexpr GpuProfile kH100Sxm = {
    .name = "H100-80GB",
    .peak_bf16_flops = 989e12,
    .peak_fp8_flops = 1979e12,
    .memory_bytes = 81559 * kMiB,
    .nvlink_domain_gpus = 8,
    .nvlink_bytes_per_s = kAchievable * 450e9,
    .net_bytes_per_s = kAchievable * 50e9,
    .hbm_bytes_per_s = kAchievable * 3350e9,
    .attention_efficiency = 0.35,
    .host_bytes_per_s = kAchievable * 64e9,
    .gemm_bf16 = 0.803,
    .gemm_fp8 = 0.709,
};

// The H100 SXM's gemm_bf16, the share the matmul efficiency curve (Hardware::matmul_efficiency) is fitted at.
inline constexpr double kReferenceGemmShare = kH100Sxm.gemm_bf16;

// The profile called `name` ("A100-40GB", "A100-80GB", "H100-80GB", "H800", "H200", "B200", "GB200-NVL72",
// "B300", "GB300-NVL72"); nullopt otherwise.
std::optional<GpuProfile> FindGpuProfile(const std::string& name);

}  // namespace shepherd
