// JSON renderings of the control layer's values (API.md shapes). The only place api/ turns domain values
// into response bodies; pure functions, no state.
#pragma once

#include <string>
#include <vector>

#include "control/controller.h"
#include "core/json.h"

namespace shepherd {

Json RenderNode(const NodeView& v);
Json RenderNodeList(const NodeList& list);
Json RenderJob(const JobView& e);
// Written as text, not through a JSON tree: a 131,072-rank tree costs ~90 MB of heap that the allocator
// keeps; the text is ~9 MB.
std::string RenderPlacement(const PlacementView& v);
Json RenderIngest(const IngestSummary& s);
Json RenderCheckpoints(const CheckpointList& c);
Json RenderFailures(const std::vector<Finding>& fs);
Json RenderRestart(const RestartOutcome& r);
Json RenderAssignments(const Assignments& a);
Json RenderHeartbeatAck(const HeartbeatAck& a);

}  // namespace shepherd
