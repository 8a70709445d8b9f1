// The control plane's state as Prometheus series: per-job series (labelled job="<id>") and fleet counts.
// Runs on the reader thread with the ControlLock held shared (api/front_door.h); reads only the
// Controller's const accessors. Cost O(jobs + nodes) per scrape, no placement visited (docs/api.md,
// "/metrics").
#pragma once

#include <string>

#include "control/controller.h"
#include "core/time.h"

namespace shepherd {

// How long an ended job keeps its per-job series after it ended (updated_at): long enough for a scrape
// and an alert to see the final state; afterwards the series stop, so their number stays bounded by the
// active jobs plus those ended within this window.
inline constexpr double kEndedJobSeriesSeconds = 3600;

// Appends the series (with HELP and TYPE) to `out`.
void AppendStateMetrics(const Controller& c, Time now, std::string* out) REQUIRES_SHARED(kControl);

}  // namespace shepherd
