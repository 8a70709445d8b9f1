// POST /v1/simulate and `shepherdd simulate --json`: the request body to a SimInput, and a SimResult to the
// answer (docs/api.md "Simulate"). The only place the simulator meets JSON.
#pragma once

#include "core/json.h"
#include "goodput/simulator.h"

namespace shepherd {

// The request: the Llama 3 scenario ("scenario": "llama3", the default and the only one) with what the body
// overrides: nodes, spares_per_leaf, days, interval_s, seeds, seed, repair_hours, manual_response_hours,
// faults {cause: per node-hour}, timing {...}, policy {...}, detectors {...}. Unknown fields and causes,
// and values out of bounds, are kInvalidContent naming the field (ValidateSimInput's bounds included).
Result<SimInput> ParseSimRequest(const Json& body);

Json ToJson(const SimResult& r);

}  // namespace shepherd
