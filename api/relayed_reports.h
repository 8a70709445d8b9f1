// The `reports` field of an agent heartbeat (docs/agent-protocol.md, "Relayed reports"): rank reports an
// agent relays for the ranks of its node, parsed into typed entries for Controller::NodeHeartbeat.
// Pure: no clock reads (the receive time is passed in), no I/O; thread-compatible.
#pragma once

#include <cstddef>
#include <vector>

#include "control/controller.h"
#include "core/json.h"
#include "core/json_lite.h"
#include "core/status.h"
#include "core/time.h"

namespace shepherd {

// Entries one heartbeat may carry, and reports per entry (the agent reads at most this many per rank).
inline constexpr std::size_t kMaxRelayedEntries = 64;
inline constexpr std::size_t kMaxRelayedReportsPerEntry = 256;

// Parses `field` (the heartbeat's `reports`; null means none). Each entry is
// {"job": id, "attempt": n, "rank": n, "reports": [report, ...]}. A malformed entry adds a FieldError
// naming it ("reports[2].job", "reports[0].reports", ...) to `errs` (the heartbeat is refused, 422); a
// malformed report, or one naming another rank or attempt than its entry, is only rejected (listed in its
// entry's batch.rejected with its index), as POST /v1/jobs/{id}/reports would. `received_at` is the
// default `time` of a report without one.
std::vector<RelayedReports> ParseRelayedReports(const Json& field, Time received_at,
                                                std::vector<FieldError>* errs);
// The same for the field read by the heartbeat's fast path (core/json_lite.h): the same result.
std::vector<RelayedReports> ParseRelayedReports(const LiteJson& field, Time received_at,
                                                std::vector<FieldError>* errs);

}  // namespace shepherd
