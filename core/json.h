// JSON <-> domain records. Parse* functions validate untrusted input field by field and report every
// invalid field by its JSON path (Status kInvalidContent); they also decode what storage wrote, so one
// codec serves the API, inventory files and the database. ToJson writes what Parse* reads back.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/node.h"
#include "core/status.h"

namespace shepherd {

using Json = nlohmann::json;

// What ParseJsonText accepts. Every limit is checked in one linear scan before any value is built, and a
// document over one is refused (kInvalidArgument naming the JSON path of the container over it, "$" for the
// top level). The defaults fit every body the API takes (docs/security.md, "Input hygiene"); files read at
// start-up and stored records pass kLargeJsonLimits.
struct JsonLimits {
  int max_depth = 64;                  // nested objects and arrays
  std::size_t max_members = 4096;      // members of one object
  std::size_t max_elements = 1 << 19;  // elements of one array
  std::size_t max_values = 1 << 19;    // members and elements of the whole document
};
inline constexpr JsonLimits kLargeJsonLimits{
    .max_depth = 256, .max_members = 1 << 20, .max_elements = 1 << 24, .max_values = 1 << 26};

// Parses `text` as JSON within `limits`: nesting too deep is refused before anything deep is built
// (nlohmann-json 3.11 recurses when copying, dumping or destroying deep values), and a key given twice in one
// object is refused by its path (the parser would keep the last value without a word). Time and memory are
// linear in the text (n log n for the keys of one object). kInvalidArgument when malformed or over a limit.
Result<Json> ParseJsonText(std::string_view text, const JsonLimits& limits = {});
// The default limits with another depth.
Result<Json> ParseJsonText(std::string_view text, int max_depth);

Result<Node> ParseNode(const Json& j, const TopologyLevels& levels);
// A registration of a known node updates what it names: the optional fields `body` leaves out (hostname,
// gpus, gpu_memory_gib, gpu_model, spare, topology.nvlink_domain) keep `stored`'s values instead of the
// defaults ParseNode gave them (an agent restarted without --gpu-model must not reset the inventory's).
void KeepOmittedFields(const Json& body, const Node& stored, Node* node);
Json ToJson(const Node& n);  // without derived state; the API adds "state"

// A submitted job spec, with documented defaults for omitted optional fields (see docs/api.md).
Result<JobSpec> ParseJobSpec(const Json& j);
// The `model`, `training`, `parallelism` and `resources` parts only, for POST /v1/plan.
Result<JobSpec> ParsePlanRequest(const Json& j);
Json ToJson(const JobSpec& s);

Json ToJson(const Plan& p);
Result<Plan> ParsePlan(const Json& j);

Json ToJson(const Job& job);  // storage form: spec, plan, state, attempt, ...
Result<Job> JobFromJson(const Json& j);

Json ToJson(const RankSlot& r);
Json ToJson(const Attempt& a);
Result<Attempt> AttemptFromJson(const Json& j);

Json ToJson(const Checkpoint& c);
Result<Checkpoint> CheckpointFromJson(const Json& j);

Json ToJson(const Finding& f);
Result<Finding> FindingFromJson(const Json& j);

const char* ToString(Precision p);
const char* ToString(Optimizer o);
const char* ToString(Recompute r);
const char* ToString(Framework f);
const char* ToString(MoeDispatcher d);

}  // namespace shepherd
