// Slurm hostlist expressions (`n[0-3,7]`, `gpu-[01-16]`, `r[1-2]-n[0-1]`, `a,b[1-2]`). Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace shepherd::slurm {

// The largest expansion accepted; a longer one is kInvalidArgument (it would be a typo, not a cluster).
inline constexpr std::size_t kMaxHostlistHosts = 1 << 20;

// Expands `expr` into host names in Slurm's order: comma-separated terms left to right; inside a term with
// several bracket groups, the first group varies slowest. A range keeps the zero padding of its lower
// bound (`[01-10]` → 01..10). Duplicates are kept. Empty input → no hosts. kInvalidArgument: unbalanced
// brackets, a bad range (`[3-1]`, `[a-b]`, empty), or more than kMaxHostlistHosts names.
Result<std::vector<std::string>> ExpandHostlist(std::string_view expr);

// The shortest expression this module writes for `hosts`, preserving their order (so
// ExpandHostlist(CompressHostlist(h)) == h): adjacent names with the same prefix and numeric suffix width
// merge into one bracket group (`n0,n1,n2,n4` → `n[0-2,4]`); a lone name stays bare (`n5`). Names without a
// numeric suffix are written as they are.
std::string CompressHostlist(const std::vector<std::string>& hosts);

}  // namespace shepherd::slurm
