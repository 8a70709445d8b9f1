// Small formatting helpers for findings' detail sentences. Internal to health/.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace shepherd::health_text {

// Three significant digits: 11, 1.5, 0.333, 1.2e+03.
inline std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// "1,3,7", or the first 16 and the total.
inline std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ",... (" + std::to_string(ranks.size()) + " ranks)";
  return out;
}

}  // namespace shepherd::health_text
