// Random identifiers from the kernel's entropy (std::random_device: /dev/urandom on Linux with libstdc++).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace shepherd {

// `bytes` random bytes as 2·bytes lowercase hex digits.
inline std::string RandomHex(std::size_t bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;
  std::string out;
  out.reserve(bytes * 2);
  for (std::size_t i = 0; i < bytes; i += 4) {
    const uint32_t v = rd();
    for (std::size_t k = 0; k < 4 && i + k < bytes; ++k) {
      out += kHex[(v >> (8 * k + 4)) & 0xf];
      out += kHex[(v >> (8 * k)) & 0xf];
    }
  }
  return out;
}

}  // namespace shepherd
