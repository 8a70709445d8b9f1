// JSON <-> domain records. Parse* functions validate untrusted input field by field and report every
// invalid field by its JSON path (Status kInvalidContent); they also decode what storage wrote, so one
// codec serves the API, inventory files and the database. ToJson writes what Parse* reads back.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/node.h"
#include "core/status.h"

namespace shepherd {

using Json = nlohmann::json;

// Parses `text` as JSON, refusing nesting deeper than `max_depth` before building any value (nlohmann-json
// 3.11 recurses when copying, dumping or destroying deep values). kInvalidArgument when malformed.
Result<Json> ParseJsonText(std::string_view text, int max_depth = 64);

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
