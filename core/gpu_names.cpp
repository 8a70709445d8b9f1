#include "core/gpu_names.h"

#include <array>
#include <cctype>
#include <utility>

namespace shepherd {
namespace {

// Upper case, without separators and the words that name the board's form rather than the GPU.
std::string Squeeze(std::string_view name) {
  std::string s;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c))) s += static_cast<char>(std::toupper(c));
  if (s.starts_with("NVIDIA")) s.erase(0, 6);
  for (std::string_view word : {"SXM5", "SXM4", "SXM", "HBM3E", "HBM3", "HBM2E", "PCIE", "NVL"}) {
    if (std::size_t at = s.find(word); at != std::string::npos) s.erase(at, word.size());
  }
  return s;
}

}  // namespace

std::optional<std::string> CanonicalGpuName(std::string_view name) {
  // Squeezed spelling -> profile. "NVL" is squeezed away, so "GB200-NVL72" is "GB20072".
  static const std::array<std::pair<std::string_view, std::string_view>, 17> kNames{{
      {"A10040GB", "A100-40GB"},
      {"A10080GB", "A100-80GB"},
      {"H100", "H100-80GB"},
      {"H10080GB", "H100-80GB"},
      {"H800", "H800"},
      {"H80080GB", "H800"},
      {"H200", "H200"},
      {"H200141GB", "H200"},
      {"B200", "B200"},
      {"B200180GB", "B200"},
      {"GB200", "GB200-NVL72"},
      {"GB20072", "GB200-NVL72"},
      {"B300", "B300"},
      {"B300288GB", "B300"},
      {"GB300", "GB300-NVL72"},
      {"GB30072", "GB300-NVL72"},
      {"H100SXM80GB", "H100-80GB"},
  }};
  const std::string s = Squeeze(name);
  for (const auto& [spelling, canonical] : kNames)
    if (s == spelling) return std::string(canonical);
  return std::nullopt;
}

}  // namespace shepherd
