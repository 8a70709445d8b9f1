// Shared by the planner's translation units (planner.cpp, auto_plan.cpp); not part of the module's API.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "planner/model_arch.h"
#include "planner/planner.h"

namespace shepherd::planner_internal {

// Rules on the model, training, resources and hardware that hold for every layout, by request JSON path.
std::vector<FieldError> ValidateSpec(const JobSpec& spec, const Hardware& hw);

// Rules on the layout itself. REQUIRES: ValidateSpec(spec, hw) is empty.
std::vector<FieldError> ValidateLayout(const JobSpec& spec, const Plan& plan, const Hardware& hw);

// Memory, bubble, communication and time of `plan`, explanation left empty.
// REQUIRES: both validations pass and plan.micro_batches is derived from the batch.
PlanEstimate Estimate(const JobSpec& spec, const Plan& plan, const Hardware& hw);
// The same with the model's counts (ModelCountsOf(spec.model)), which a search counts once.
PlanEstimate Estimate(const JobSpec& spec, const Plan& plan, const Hardware& hw, const ModelCounts& counts);

double UsableBytes(const Hardware& hw);

// PlanJob for an explicit layout that leaves some of vpp, zero_stage, training.micro_batch_size and
// training.activation_recompute open (auto_plan.cpp): `given` with each open one chosen as auto would.
Result<PlanEstimate> CompleteLayout(const JobSpec& spec, const Plan& given, const Hardware& hw);

// "" when model.parameters matches the architecture's count within 5 %; else the discrepancy (or, when
// parameters was omitted, the count), as a sentence for the explanation.
std::string ParameterNote(const ModelSpec& m);

// "tp=8 pp=4 dp=8 ZeRO-1, 32 micro-batches of 1"
std::string Describe(const Plan& plan);
// "fits: 61.2 GB of 77.3 GB usable per GPU (...)" and the step-time sum.
std::string DescribeEstimate(const PlanEstimate& e, const Hardware& hw);
// printf-style formatting into a std::string.
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace shepherd::planner_internal
