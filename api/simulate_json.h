// POST /v1/simulate and `shepherdd simulate --json`: the request body to a SimInput, and a SimResult to the
// answer (docs/api.md "Simulate"). The only place the simulator meets JSON.
#pragma once

#include "core/json.h"
#include "goodput/simulator.h"

namespace shepherd {

// The daemon's inventory as a simulated fleet ("fleet": "inventory").
struct InventoryFleet {
  std::vector<Node> nodes;
  TopologyLevels levels;
};

// The request: the Llama 3 scenario ("scenario": "llama3", the default and the only one) with what the body
// overrides: fleet ("generated", the default, or "inventory"), nodes, spares_per_leaf, days, interval_s,
// seeds, seed, repair_hours, manual_response_hours, faults {cause: per node-hour}, timing {...},
// policy {...}, detectors {...}. Unknown fields and causes, and values out of bounds, are kInvalidContent
// naming the field (ValidateSimInput's bounds included). "fleet": "inventory" needs `inventory` (the
// command line has none): its nodes, as healthy, with their spare flags and topology; the job is `nodes`
// (default: every non-spare node) of the first non-spare node's GPU count, TP that count.
Result<SimInput> ParseSimRequest(const Json& body, const InventoryFleet* inventory = nullptr);

Json ToJson(const SimResult& r);

}  // namespace shepherd
