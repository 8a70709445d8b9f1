// Follower reads (docs/operations.md, "Replicas and leadership"; docs/api.md, "Reads from a follower"). A
// follower replica answers the read routes whose answer comes from durable state itself, from a read view
// of the replicated state, and sends everything else to the leader (daemon/follower.h).
//
// Owns: the read view (the etcd store's records, loaded by the store's Load at one revision, recovered by a
// Controller over a memory store seeded with them, so the view never writes to etcd), the router and the
// authenticator that serve it (the same handlers, JSON shapes and route-table auth as the leader's), and an
// etcd client that asks for the store's revision.
//
// Freshness. A read is served from a view whose revision was confirmed no more than `max_age` ago (the
// time the confirming request was sent, on the steady clock). An older view is first checked with one
// cheap request (the schema key: its header carries the store's revision); the view is reloaded only when
// the revision moved. If etcd cannot be read, the read is answered 503 + Retry-After, never from an older
// view. Nothing runs while nobody reads: no periodic reload. An agent's renew-only heartbeat (Renew) is
// answered the same way from a view no older than `renew_max_age` (daemon/follower_lease.h).
//
// Threading. Serve() is called on the follower's I/O thread and only queues the read (bounded: beyond
// kMaxQueuedReads, 503). The view thread (one, owned here) runs every read in order: the age decision, the
// check and the reload (one at a time by construction; reads queued behind a reload wait for it, up to
// kMaxReadWait, then 503), then the handler. Planner searches (POST /v1/plan) run on a planner thread of
// their own. Respond is thread-safe; answers leave from the view or planner thread. AppendMetrics() may be
// called from any thread (atomics). The destructor joins both threads and drops the view: a follower that
// becomes leader keeps nothing of it.
//
// The pure parts (ClassifyFollowerRoute, JudgeView, JudgeRevision, WaitedTooLong) take values in and
// return decisions; tests drive them with a fake clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/auth.h"
#include "api/handlers.h"
#include "api/http_types.h"
#include "control/controller.h"
#include "core/status.h"

namespace shepherd {

using SteadyTime = std::chrono::steady_clock::time_point;

// Where a follower sends a request.
enum class FollowerRoute {
  kRead,      // served by the follower from its read view
  kToLeader,  // 307 to the leader: a write, or an answer from live, unpersisted state
};

struct FollowerRouteRule {
  std::string_view method;
  std::string_view pattern;  // as in api/route_table.h
  FollowerRoute route;
  std::string_view why;
};
// Every route a follower serves from its view, and the read routes it leaves to the leader (with why).
// Routes not listed (every write, unknown paths) go to the leader.
const std::vector<FollowerRouteRule>& FollowerRouteTable();
// The route of a request (method, target with its query). GET /v1/events with a non-zero `wait` (a long
// poll) goes to the leader. Probes (/healthz, /readyz, /metrics) are answered by FollowerAnswer before
// this is asked.
FollowerRoute ClassifyFollowerRoute(std::string_view method, std::string_view target);

// Whether the view may serve a read at `now` as it is (kFresh), or its revision must be checked first.
enum class ViewFreshness { kFresh, kCheck };
ViewFreshness JudgeView(std::optional<SteadyTime> confirmed_at, SteadyTime now,
                        std::chrono::nanoseconds max_age);
// After a check that read `current`: keep the view (its revision is current) or reload it.
enum class ViewRefresh { kKeep, kReload };
ViewRefresh JudgeRevision(std::optional<int64_t> view_revision, int64_t current);
// A read queued at `queued` is answered 503 instead of served when its turn comes after `max_wait`.
bool WaitedTooLong(SteadyTime queued, SteadyTime now, std::chrono::nanoseconds max_wait);

struct FollowerReadsOptions {
  std::vector<std::string> endpoints;  // etcd, "http://host:port"
  std::string prefix = "/shepherd";
  std::chrono::nanoseconds max_age = std::chrono::seconds(1);  // > 0
  std::chrono::milliseconds etcd_timeout{1000};                // per etcd call and endpoint
  ControllerOptions controller;                                // as the leader's
  ApiOptions api;                                              // job_policy, quotas (planner: set here)
  std::vector<TokenEntry> tokens;                              // empty: auth off, as on the leader
  // Lease renewals (daemon/follower_lease.h): the oldest view a renewal is answered from (S,
  // follower_renewal_max_age_s); 0: this follower renews no lease (renew-only heartbeats go to the leader).
  std::chrono::nanoseconds renew_max_age{0};
};

class FollowerReads {
 public:
  static constexpr std::size_t kMaxQueuedReads = 64;
  static constexpr auto kMaxReadWait = std::chrono::seconds(10);

  explicit FollowerReads(FollowerReadsOptions options);
  ~FollowerReads();
  FollowerReads(const FollowerReads&) = delete;
  FollowerReads& operator=(const FollowerReads&) = delete;

  // Queues a read (ClassifyFollowerRoute: kRead) for the view thread. Every answer carries
  // Shepherd-Served-By: follower; one served from the view also Shepherd-Read-Revision,
  // Shepherd-Read-Age (seconds since the revision was confirmed) and Shepherd-Read-Max-Age.
  void Serve(HttpRequest request, Respond respond);

  // Queues an agent's renew-only heartbeat (POST /v1/nodes/{id}/heartbeat with Shepherd-Renew-Only) for
  // the view thread, which answers it by DecideRenewal (daemon/follower_lease.h) from a view no older than
  // renew_max_age, with the heartbeat route's auth. REQUIRES renews().
  void Renew(HttpRequest request, std::string node, Respond respond);
  bool renews() const;

  // Replaces the static tokens (a SIGHUP re-read the tokens file): for the current view and every later one.
  // Thread-safe (queued for the view thread).
  void SetTokens(std::vector<TokenEntry> tokens);

  // shepherd_follower_reads_total{result}, shepherd_follower_view_age_seconds,
  // shepherd_follower_view_revision, shepherd_follower_view_loads_total,
  // shepherd_follower_lease_renewals_total{result} (renewed, stopped, refused) and
  // shepherd_follower_lease_refusals_total{reason}.
  void AppendMetrics(std::string* out) const;

 private:
  struct View;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shepherd
