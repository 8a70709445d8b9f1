// A follower replica's HTTP answers (docs/operations.md, "Replicas and leadership"). A follower answers
// probes and metrics itself, serves the read routes whose answers come from durable state from its read
// view (daemon/follower_reads.h; unless follower reads are off), and sends every other request to the
// leader with 307 Temporary Redirect (method and body kept), or 503 + Retry-After while no leader is known.
// An agent's renew-only heartbeat (header Shepherd-Renew-Only) it answers from its view as well, when it
// renews leases (daemon/follower_lease.h); otherwise that heartbeat goes to the leader like any other.
//
// FollowerAnswer is pure (the request and what the replica knows in, the answer out). RunFollowerPhase runs
// a small HTTP server on the calling thread (the follower's I/O thread) until this replica leads or the
// process is asked to stop; reads go from it to the FollowerReads view thread, which the phase owns: the
// view is dropped when the phase ends (a follower that wins leadership recovers as a leader does).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "api/http_types.h"
#include "core/status.h"
#include "daemon/follower_reads.h"
#include "daemon/leadership.h"

namespace shepherd {

// `own_url`: this replica's URL (a leader record naming it is stale: never redirect to oneself).
// `serves_reads`: /readyz says whether this follower serves reads; `extra_metrics` is appended to /metrics.
HttpResponse FollowerAnswer(const HttpRequest& request, const LeadershipView& view,
                            const std::string& own_url, bool serves_reads = false,
                            const std::string& extra_metrics = "");

// The Prometheus lines of a replica's role: shepherd_leader, shepherd_store_up,
// shepherd_leader_changes_total.
std::string LeadershipMetrics(const LeadershipView& view, bool leading);

enum class FollowerEnd { kLeading, kStop };

struct FollowerPhase {
  std::string host;
  uint16_t port = 0;  // 0 only for the first phase: then *bound receives the port
  Leadership* leadership = nullptr;
  std::string own_url;
  const std::atomic<bool>* stop = nullptr;        // set by the process's SIGTERM/SIGINT handler
  // Counted by the process's SIGHUP handler: when it grows, a follower serving reads re-reads
  // `tokens_file` (an invalid file keeps the current tokens, as the leader does). Optional.
  const std::atomic<uint64_t>* hangups = nullptr;
  std::string tokens_file;
  std::function<Status(uint16_t port)> on_bound;  // optional: once listening
  // Optional: once this replica has looked at the leader key (and campaigned) and follows, so a port file
  // written here tells a client that the replica answers as it will (307 to a leader, or 503).
  std::function<void()> on_settled;
  // Follower reads (daemon/follower_reads.h); none: every request but the probes goes to the leader.
  std::optional<FollowerReadsOptions> reads;
};

// Serves until leadership->HeldAt(now) (kLeading) or *stop (kStop). The port is re-bound when still held
// by the previous phase's socket (for a few seconds). kUnavailable when it cannot be bound.
Result<FollowerEnd> RunFollowerPhase(const FollowerPhase& phase, uint16_t* bound);

}  // namespace shepherd
