// One vocabulary of GPU names for the planner, job specs and the inventory.
//
// The planner's profiles (planner/gpu_profiles.h) are named "A100-40GB", "A100-80GB", "H100-80GB", "H800",
// "H200", "B200", "GB200-NVL72", "B300", "GB300-NVL72". Nodes report their GPUs as nvidia-smi, Slurm's gres
// or an operator writes them ("NVIDIA H100 80GB HBM3", "h100", "H100"); CanonicalGpuName maps each spelling
// that names exactly one profile to that profile's name.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shepherd {

// The profile name `name` denotes: case, a leading "NVIDIA", spaces, '_' and '-' do not matter, nor the
// board's form ("SXM", "SXM5", "HBM3"). A bare "A100" (40 or 80 GB) names none: nullopt, as for any
// unknown name.
std::optional<std::string> CanonicalGpuName(std::string_view name);

}  // namespace shepherd
