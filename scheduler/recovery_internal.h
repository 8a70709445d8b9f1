// Pieces shared by DecideRecovery and ManualRestart. Not part of the public scheduler interface.
#pragma once

#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "scheduler/recovery.h"

namespace shepherd::recovery_internal {

// Moves the job off `faulty` nodes (cordoned or failed per their NodeAction), off `avoid` nodes, and off
// any node of the placement that is no longer usable; fills d->new_placement, d->replaced and the
// "replace ..." action lines, and sets d->action to kRestart, or to kQueue (with d->reason) when neither
// replacement nor a whole new placement fits. Sees `cluster` with the job's GPUs released and the faulty
// nodes out of service (through the placement options; nothing is copied).
void Relocate(const Job& job, const Placement& placement, const Cluster& cluster,
              const std::vector<NodeAction>& faulty, const std::set<std::string>& avoid, RecoveryDecision* d);

// policy.straggler_action cordon_after_restart: the nodes named by straggler findings (arrival order) of
// the job's current attempt, among `earlier` and `current` (may be null), that a restart replaces and
// leaves cordoned, each with the reason naming its finding. Nodes in `blamed`, or not in the placement,
// are left out; none under another policy or for a job another launcher runs.
std::vector<NodeAction> StragglerMarks(const Job& job, const Placement& placement, std::span<const Finding> earlier,
                                       const Finding* current, const std::vector<NodeAction>& blamed);

// "restart from checkpoint <id> (step <s>, <status>)" or "restart from scratch (step 0)...".
std::string ResumeLine(const std::optional<Checkpoint>& c, const std::string& why);

}  // namespace shepherd::recovery_internal
