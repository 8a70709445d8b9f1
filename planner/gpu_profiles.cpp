#include "planner/gpu_profiles.h"

#include <array>

namespace shepherd {

namespace {

// Datasheets: A100 SXM 312 TFLOP/s bf16 and no FP8 tensor cores (0: "fp8" is refused), NVLink3 600 GB/s both
// directions, HDR 200 Gb/s per GPU; H100 SXM 989 / 1979 (fp8), NVLink4 900 GB/s, NDR 400 Gb/s; H200 the same;
// H800 SXM the H100's compute, HBM and NIC with NVLink cut to 400 GB/s (DeepSeek-V3's report, §3.2.2,
// measured 160 GB/s of NVLink and 50 GB/s of InfiniBand per GPU on its H800 nodes: 0.8 × one direction, as
// below); HGX B200 2.25 / 4.5 PFLOP/s, NVLink5 1.8 TB/s, 400 Gb/s; GB200 NVL72 2.5 / 5 PFLOP/s per GPU,
// NVLink5 1.8 TB/s across 72 GPUs, 400 Gb/s. Blackwell Ultra keeps Blackwell's dense 16-bit and FP8 rates
// (its gains are FP4 and the softmax exponent units): HGX B300 2.25 / 4.5 PFLOP/s, GB300 NVL72 2.5 / 5
// PFLOP/s; both NVLink5 and one ConnectX-8 800 Gb/s NIC per GPU. Achievable = 0.8 × one direction. HBM
// bandwidth: A100 40GB SXM 1.555 TB/s, A100 80GB SXM 2.039 TB/s, H100 SXM 3.35 TB/s, H200 4.8 TB/s, B200,
// GB200, B300 and GB300 8 TB/s; achievable = 0.8 ×. HBM size: the total the driver reports (nvidia-smi
// memory.total, MiB): A100 40GB 40960, A100 80GB 81920, H100 SXM 81559, H200 143771, B200 183359, GB200
// 189471, B300 275040, GB300 284208. The datasheets' "141 GB", "180 GB", "186 GB", "270 GB", "279 GB" are
// about these sizes in GiB; read as 10^9 bytes they are 7 % short. Attention kernels: FlashAttention-2
// reaches 50-73 % of the A100's peak (Dao 2023, arXiv:2307.08691) and 35 % of the H100's (Shah et al. 2024,
// arXiv:2407.08608, which reaches up to 75 % forward with Hopper-specific FlashAttention-3); we take the
// FlashAttention-2 figures, 0.5 and 0.35, and 0.35 for Blackwell (no published figure used). Host link (CPU
// activation offloading), one direction: PCIe Gen4 x16 32 GB/s on A100, PCIe Gen5 x16 64 GB/s on the HGX and
// DGX boards (H100, H200, B200; B300 assumed the same), NVLink-C2C 900 GB/s both directions (450 each)
// between a Grace CPU and its GPUs on GB200 and GB300; achievable = 0.8 ×. Sustained: the Grace-Blackwell
// datasheets' peaks are 11 % above HGX B200's and B300's, but Megatron-Bridge's performance summary
// (docs/performance-summary-archive.md) runs the same 8-GPU workload, layout and container on both at
// GB200/B200 0.96-1.03 (25.11 Llama 3 8B FP8 1.03; 26.02.01, 26.04 and 26.04.01 Qwen3-30B-A3B MXFP8 0.99,
// 0.97, 0.96; 26.04.01 Nemotron 3 Nano 1.00; mean 0.99) and GB300/B300 1.03-1.11 (26.04.01 and 26.06
// Qwen3-30B-A3B 1.03, 1.11; Nemotron 3 Nano 1.06, 1.07; mean 1.07): GB200 0.99/1.11 = 0.9 of its peak,
// GB300 1.07/1.11 = 0.96. GEMM shares: the best `torch.matmul` each GPU reaches over its 16-bit and fp8
// peaks in the Maximum Achievable Matmul FLOPS table (stas00/ml-engineering, compute/accelerator/README.md):
// A100 SXM 86.9 %, H100 SXM 80.3 % and 70.9 %, H200 80.3 % and 73.4 %, B200 77.6 % and 76.3 %, B300 78.6 %
// and 74.5 %; H800 as H100, GB200 and GB300 as their HGX siblings (their `sustained` is measured against
// those).
constexpr GpuProfile kA100Sxm40GB = {
    .name = "A100-40GB",
    .peak_bf16_flops = 312e12,
    .peak_fp8_flops = 0,
    .memory_bytes = 40960 * kMiB,
    .nvlink_domain_gpus = 8,
    .nvlink_bytes_per_s = kAchievable * 300e9,
    .net_bytes_per_s = kAchievable * 25e9,
    .hbm_bytes_per_s = kAchievable * 1555e9,
    .attention_efficiency = 0.5,
    .host_bytes_per_s = kAchievable * 32e9,
    .gemm_bf16 = 0.869,
    .gemm_fp8 = 0,
};

constexpr GpuProfile kA100Sxm80GB = {
    .name = "A100-80GB",
    .peak_bf16_flops = 312e12,
    .peak_fp8_flops = 0,
    .memory_bytes = 81920 * kMiB,
    .nvlink_domain_gpus = 8,
    .nvlink_bytes_per_s = kAchievable * 300e9,
    .net_bytes_per_s = kAchievable * 25e9,
    .hbm_bytes_per_s = kAchievable * 2039e9,
    .attention_efficiency = 0.5,
    .host_bytes_per_s = kAchievable * 32e9,
    .gemm_bf16 = 0.869,
    .gemm_fp8 = 0,
};

constexpr GpuProfile kH800 = {
    .name = "H800",
    .peak_bf16_flops = 989e12,
    .peak_fp8_flops = 1979e12,
    .memory_bytes = 81559 * kMiB,
    .nvlink_domain_gpus = 8,
    .nvlink_bytes_per_s = kAchievable * 200e9,
    .net_bytes_per_s = kAchievable * 50e9,
    .hbm_bytes_per_s = kAchievable * 3350e9,
    .attention_efficiency = 0.35,
    .host_bytes_per_s = kAchievable * 64e9,
    .gemm_bf16 = 0.803,
    .gemm_fp8 = 0.709,
};

constexpr GpuProfile kH200 = {
    .name = "H200",
    .peak_bf16_flops = 989e12,
    .peak_fp8_flops = 1979e12,
    .memory_bytes = 143771 * kMiB,
    .nvlink_domain_gpus = 8,
    .nvlink_bytes_per_s = kAchievable * 450e9,
    .net_bytes_per_s = kAchievable * 50e9,
    .hbm_bytes_per_s = kAchievable * 4800e9,
    .attention_efficiency = 0.35,
    .host_bytes_per_s = kAchievable * 64e9,
    .gemm_bf16 = 0.803,
    .gemm_fp8 = 0.734,
};

constexpr GpuProfile kB200 = {
    .name = "B200",
    .peak_bf16_flops = 2250e12,
    .peak_fp8_flops = 4500e12,
    .memory_bytes = 183359 * kMiB,
    .nvlink_domain_gpus = 8,
    .nvlink_bytes_per_s = kAchievable * 900e9,
    .net_bytes_per_s = kAchievable * 50e9,
    .hbm_bytes_per_s = kAchievable * 8000e9,
    .attention_efficiency = 0.35,
    .host_bytes_per_s = kAchievable * 64e9,
    .gemm_bf16 = 0.776,
    .gemm_fp8 = 0.763,
};

constexpr GpuProfile kGb200Nvl72 = {
    .name = "GB200-NVL72",
    .peak_bf16_flops = 2500e12,
    .peak_fp8_flops = 5000e12,
    .memory_bytes = 189471 * kMiB,
    .nvlink_domain_gpus = 72,
    .nvlink_bytes_per_s = kAchievable * 900e9,
    .net_bytes_per_s = kAchievable * 50e9,
    .hbm_bytes_per_s = kAchievable * 8000e9,
    .attention_efficiency = 0.35,
    .host_bytes_per_s = kAchievable * 450e9,
    .gemm_bf16 = 0.776,
    .gemm_fp8 = 0.763,
    .sustained = 0.9,
};

constexpr GpuProfile kB300 = {
    .name = "B300",
    .peak_bf16_flops = 2250e12,
    .peak_fp8_flops = 4500e12,
    .memory_bytes = 275040 * kMiB,
    .nvlink_domain_gpus = 8,
    .nvlink_bytes_per_s = kAchievable * 900e9,
    .net_bytes_per_s = kAchievable * 100e9,
    .hbm_bytes_per_s = kAchievable * 8000e9,
    .attention_efficiency = 0.35,
    .host_bytes_per_s = kAchievable * 64e9,
    .gemm_bf16 = 0.786,
    .gemm_fp8 = 0.745,
};

constexpr GpuProfile kGb300Nvl72 = {
    .name = "GB300-NVL72",
    .peak_bf16_flops = 2500e12,
    .peak_fp8_flops = 5000e12,
    .memory_bytes = 284208 * kMiB,
    .nvlink_domain_gpus = 72,
    .nvlink_bytes_per_s = kAchievable * 900e9,
    .net_bytes_per_s = kAchievable * 100e9,
    .hbm_bytes_per_s = kAchievable * 8000e9,
    .attention_efficiency = 0.35,
    .host_bytes_per_s = kAchievable * 450e9,
    .gemm_bf16 = 0.786,
    .gemm_fp8 = 0.745,
    .sustained = 0.96,
};

constexpr std::array<GpuProfile, 9> kProfiles = {
    kA100Sxm40GB, kA100Sxm80GB, kH100Sxm, kH800, kH200, kB200, kGb200Nvl72, kB300, kGb300Nvl72,
};

}  // namespace

std::optional<GpuProfile> FindGpuProfile(const std::string& name) {
  for (const GpuProfile& p : kProfiles) {
    if (name == p.name) return p;
  }
  return std::nullopt;
}

}  // namespace shepherd
