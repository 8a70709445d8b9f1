// Goodput answers (docs/api.md, "Goodput"; docs/goodput.md): a job's accounting with its checkpoint
// advice, and the fleet's totals. Pure: records and `now` in, JSON out; the handlers gather the records
// (api/handlers_goodput.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "control/controller.h"
#include "core/json.h"
#include "goodput/accounting.h"
#include "goodput/checkpoint_advice.h"
#include "goodput/plan_advice.h"

namespace shepherd {

// The fleet's interruption rate from every job's history (MeasureFleetRate). Control thread.
FleetRate FleetRateOf(const Controller& c, Time now) REQUIRES_SHARED(kControl);

// The inputs of a job's checkpoint advice, from its records and accounting (`whole`: the job's whole
// life, not a window) and the fleet's rate; or why there is none yet.
struct AdviceOrReason {
  std::optional<AdviceInput> input;
  std::string rate_source;  // "fleet" | "default"
  std::string reason;       // when no input
};
AdviceOrReason AdviceInputFor(const Controller::GoodputRecords& r, const JobGoodput& whole,
                              const FleetRate& fleet);

Json RenderJobGoodput(const Job& job, const JobGoodput& g, const AdviceOrReason& advice);

// Sums of many jobs' accounting, for GET /v1/goodput.
struct FleetGoodput {
  double wall_s = 0;
  std::array<Span, kBucketCount> buckets{};
  RecoveryParts recovery;
  std::map<BadputCause, Span> by_cause;
  std::map<BadputCause, int> incidents;
  struct JobLine {
    std::string job;
    JobState state = JobState::kQueued;
    double wall_s = 0, gpu_hours = 0, ettr = 0;
  };
  std::vector<JobLine> jobs;
  void Add(const Job& job, const JobGoodput& g);
};
// `since` unset: all time.
Json RenderFleetGoodput(const FleetGoodput& f, std::optional<Time> since, Time until, const FleetRate& rate);

}  // namespace shepherd
