// Lease renewal by a follower replica (docs/agent-protocol.md, "Lease"; docs/operations.md, "Replicas and
// leadership"). An agent whose heartbeat the leader did not answer asks again with the header
// `Shepherd-Renew-Only: 1`; a follower that serves reads answers that heartbeat itself, from its read view
// of the replicated state (daemon/follower_reads.h), instead of redirecting it to the leader.
//
// The rule (DecideRenewal), with S = follower_renewal_max_age_s:
//   - the view's revision was confirmed (the linearizable read that confirmed it was sent) no more than S
//     before the answer; an older view is refreshed first, and one that cannot be refreshed renews nothing;
//   - the node is in the view;
//   - a running rank whose attempt has a node_lost finding naming this node: the answer stops every rank
//     at once (lease_s 0, node_lost true), whatever else runs there;
//   - otherwise every running rank the heartbeat lists is desired in the view (placed on this node in its
//     job's current attempt, the job launching or running): the lease is renewed (lease_s agent_lease_s);
//     any other: refused (503), the agent keeps the lease it holds.
// The answer takes nothing (`renew_only: true`): no exit acknowledged, no relayed report taken, no
// assignment changed; the agent keeps them for the leader. The leader's side of the rule (a lost node's
// replacements wait S longer) is in control/agent_board.h.
//
// Pure: values in, decisions out. Called on the follower's view thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/agent_protocol.h"
#include "core/json.h"
#include "core/status.h"

namespace shepherd {

inline constexpr std::string_view kRenewOnlyHeader = "Shepherd-Renew-Only";

// What the view says of one running rank of the heartbeat.
enum class RankInView {
  kDesired,     // placed on this node in its job's current attempt, the job launching or running
  kLost,        // its attempt has a node_lost finding naming this node
  kNotDesired,  // anything else: an older attempt, an ended job, a job the view does not have
};

struct RenewalInput {
  std::optional<std::chrono::steady_clock::time_point> confirmed_at;  // none: no view
  std::chrono::steady_clock::time_point now;
  std::chrono::nanoseconds max_age{0};  // S
  bool node_known = false;
  std::vector<RankInView> running;  // one per running rank the heartbeat lists
};

enum class RenewalVerdict { kRenew, kStop, kRefuse };
enum class RenewalRefusal { kNone, kStaleView, kUnknownNode, kNotDesired };
struct RenewalDecision {
  RenewalVerdict verdict = RenewalVerdict::kRefuse;
  RenewalRefusal why = RenewalRefusal::kNone;
  bool operator==(const RenewalDecision&) const = default;
};
RenewalDecision DecideRenewal(const RenewalInput& in);
const char* ToString(RenewalRefusal why);

// The running ranks a heartbeat body lists (`processes[i]` with `state` "running"), checked as far as the
// follower reads them: kInvalidContent naming the field (processes[2].attempt) otherwise. At most
// kMaxRenewalRanks entries are read (the protocol's bound on `processes`).
inline constexpr std::size_t kMaxRenewalRanks = 256;
Result<std::vector<RankRef>> RunningRanksOf(const Json& body);

}  // namespace shepherd
