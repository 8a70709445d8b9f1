// Leadership: one leader among the shepherdd replicas that share an etcd store (docs/operations.md,
// "Replicas and leadership").
//
// The rule. A replica campaigns for `<prefix>/leader` through an etcd lease of ttl_s seconds: one txn
// "create_revision(leader) == 0 -> put leader = {replica id, advertise URL} attached to the lease". The
// winner renews the lease every ttl_s/3 and leads only until (the time the last successful renewal was SENT
// + the TTL etcd confirmed), on the steady clock: etcd started counting that TTL after the renewal arrived,
// so the local deadline never outlasts etcd's. The store's fence is {leader key, its create_revision}: every
// write compares it, so a replica that lost the key can write nothing. Leadership is lost, at once, when a
// renewal answers TTL 0 (the lease expired), the key is gone or was created again (another replica's), the
// daemon reports a fenced write that failed (Relinquish), or the local deadline passed.
// Followers read the leader key every ttl_s/4, learn the leader's URL from its value, and campaign when it is
// gone.
//
// The pure part (TermDeadline, the record's encoding) takes values in and returns decisions; the Leadership
// object runs the campaign and the renewals on a thread of its own with its own EtcdClient.
//
// Threading: every public method is thread-safe. HeldAt is lock-free (the control thread calls it before
// every function it runs). After a term ends (lost or given up), the replica campaigns again only once the
// daemon called EndTerm: a deposed leader's daemon has stopped everything before it may lead again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/status.h"
#include "net/etcd_client.h"
#include "storage/etcd_store.h"

namespace shepherd {

using SteadyTime = std::chrono::steady_clock::time_point;

// The end of a term after a renewal sent at `sent` was answered with `ttl_s` seconds left (0: the lease had
// already expired; the term ended at the latest when the renewal was sent).
SteadyTime TermDeadline(SteadyTime sent, int64_t ttl_s);

// The leader key's value: who leads and where clients find it.
struct LeaderRecord {
  std::string replica_id;
  std::string url;
};
std::string EncodeLeaderRecord(const LeaderRecord& record);
// kInvalidArgument when `value` is not a JSON object with string "replica_id" and "url".
Result<LeaderRecord> DecodeLeaderRecord(const std::string& value);

enum class ReplicaRole { kFollower, kLeader };

// What the replica knows, for /readyz and /metrics.
struct LeadershipView {
  ReplicaRole role = ReplicaRole::kFollower;
  std::optional<LeaderRecord> leader;  // the current leader (this replica while it leads), when known
  bool store_up = false;               // the last call to etcd was answered (false: no quorum / unreachable)
  uint64_t changes = 0;                // terms this replica began
  std::optional<EtcdFence> fence;      // while this replica leads
  bool settled = false;                // the first look at the leader key (and campaign, if any) is over
};

struct LeadershipOptions {
  std::vector<std::string> endpoints;  // "http://host:port"
  std::string prefix = "/shepherd";    // the leader key is <prefix>/leader
  std::string replica_id;
  std::string advertise_url;  // what followers redirect to
  int64_t ttl_s = 5;          // at least 2
};

// kInvalidArgument naming --leader-ttl-s when ttl_s < 2.
Status CheckLeaderTtl(int64_t ttl_s);

class Leadership {
 public:
  // Starts the campaign thread, with an EtcdClient of its own (kInvalidArgument: a bad TTL or endpoint).
  static Result<std::unique_ptr<Leadership>> Start(LeadershipOptions options);
  ~Leadership();  // Stop()
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Whether this replica leads at `now` (see the rule above). Lock-free.
  bool HeldAt(SteadyTime now) const;
  LeadershipView View() const;
  // The daemon saw leadership lost (a fenced write failed): the term ends now.
  void Relinquish();
  // The daemon stopped everything its term started (after a loss, or at shutdown): the lease is revoked
  // (best effort, so followers need not wait for its expiry) and the replica follows, campaigning again.
  void EndTerm();
  // Ends the thread; a held lease is revoked first. Idempotent.
  void Stop();

 private:
  Leadership(LeadershipOptions options, std::unique_ptr<net::EtcdClient> client);
  void Run();
  void Follow(std::unique_lock<std::mutex>& lock);
  void Lead(std::unique_lock<std::mutex>& lock);
  void Lose(const std::string& why);  // REQUIRES: mu_ held

  const LeadershipOptions options_;
  const std::string key_;
  std::unique_ptr<net::EtcdClient> client_;
  // The term's end as steady-clock nanoseconds since epoch; 0: no term.
  std::atomic<int64_t> deadline_ns_{0};
  std::atomic<bool> lost_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool leading_ = false;  // a term began and EndTerm was not called yet
  bool end_requested_ = false;
  int64_t lease_ = 0;
  LeadershipView view_;
  std::thread thread_;
};

}  // namespace shepherd
