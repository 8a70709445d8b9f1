// Shared by the job spec tests.
#pragma once

#include <set>
#include <string>

#include "core/status.h"

namespace shepherd::testing {

// The fields a refusal names.
inline std::set<std::string> Fields(const Status& s) {
  std::set<std::string> out;
  for (const auto& f : s.fields()) out.insert(f.field);
  return out;
}

}  // namespace shepherd::testing
