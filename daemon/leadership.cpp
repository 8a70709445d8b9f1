#include "daemon/leadership.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/json.h"

namespace shepherd {
namespace {

using Steady = std::chrono::steady_clock;

int64_t ToNs(SteadyTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

SteadyTime TermDeadline(SteadyTime sent, int64_t ttl_s) {
  return sent + std::chrono::seconds(std::max<int64_t>(ttl_s, 0));
}

std::string EncodeLeaderRecord(const LeaderRecord& record) {
  return Json{{"replica_id", record.replica_id}, {"url", record.url}}.dump();
}

Result<LeaderRecord> DecodeLeaderRecord(const std::string& value) {
  auto j = ParseJsonText(value);
  if (!j.ok()) return InvalidArgument("leader record: " + j.status().message());
  if (!j->is_object() || !j->contains("replica_id") || !(*j)["replica_id"].is_string() ||
      !j->contains("url") || !(*j)["url"].is_string())
    return InvalidArgument("leader record: not an object with string replica_id and url");
  return LeaderRecord{.replica_id = (*j)["replica_id"].get<std::string>(),
                      .url = (*j)["url"].get<std::string>()};
}

Status CheckLeaderTtl(int64_t ttl_s) {
  if (ttl_s < 2)
    return InvalidArgument("--leader-ttl-s " + std::to_string(ttl_s) +
                           ": must be at least 2 (renewals go every third of it)");
  return Status::Ok();
}

Result<std::unique_ptr<Leadership>> Leadership::Start(LeadershipOptions options) {
  if (Status s = CheckLeaderTtl(options.ttl_s); !s.ok()) return s;
  if (options.replica_id.empty()) return InvalidArgument("replica id: must not be empty");
  // A call must fail well inside a renewal period, so one unreachable member cannot eat a whole term.
  auto client = net::EtcdClient::Create(net::EtcdClientOptions{
      .endpoints = options.endpoints,
      .timeout = std::chrono::milliseconds(std::max<int64_t>(500, options.ttl_s * 1000 / 4))});
  if (!client.ok()) return client.status();
  std::unique_ptr<Leadership> l(new Leadership(std::move(options), std::move(client).value()));
  l->thread_ = std::thread([p = l.get()] { p->Run(); });
  return l;
}

Leadership::Leadership(LeadershipOptions options, std::unique_ptr<net::EtcdClient> client)
    : options_(std::move(options)), key_(options_.prefix + "/leader"), client_(std::move(client)) {}

Leadership::~Leadership() {
  Stop();
}

bool Leadership::HeldAt(SteadyTime now) const {
  if (lost_.load(std::memory_order_acquire)) return false;
  const int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
  return deadline != 0 && ToNs(now) < deadline;
}

LeadershipView Leadership::View() const {
  std::lock_guard lock(mu_);
  return view_;
}

void Leadership::Relinquish() {
  std::lock_guard lock(mu_);
  if (leading_ && !lost_.load()) Lose("a fenced write failed");
  cv_.notify_all();
}

void Leadership::EndTerm() {
  std::lock_guard lock(mu_);
  lost_.store(true, std::memory_order_release);
  deadline_ns_.store(0, std::memory_order_release);
  if (leading_) end_requested_ = true;
  cv_.notify_all();
}

void Leadership::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    lost_.store(true, std::memory_order_release);
    deadline_ns_.store(0, std::memory_order_release);
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Leadership::Lose(const std::string& why) {
  lost_.store(true, std::memory_order_release);
  deadline_ns_.store(0, std::memory_order_release);
  view_.role = ReplicaRole::kFollower;
  view_.fence.reset();
  view_.leader.reset();
  spdlog::warn("leadership lost: {}", why);
}

void Leadership::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (leading_)
      Lead(lock);
    else
      Follow(lock);
  }
  const int64_t lease = lease_;
  lease_ = 0;
  lock.unlock();
  if (lease != 0) (void)client_->LeaseRevoke(lease);  // followers need not wait for the TTL
}

void Leadership::Follow(std::unique_lock<std::mutex>& lock) {
  const auto poll = std::chrono::milliseconds(options_.ttl_s * 1000 / 4);
  auto wait = [&](std::chrono::milliseconds d) { cv_.wait_for(lock, d, [&] { return stop_; }); };
  lock.unlock();
  auto current = client_->Range(key_, false);
  lock.lock();
  if (stop_) return;
  view_.settled = true;
  if (!current.ok()) {
    if (view_.store_up) spdlog::warn("etcd does not answer: {}", current.status().message());
    view_.store_up = false;
    view_.leader.reset();  // not known any more: clients are told to retry rather than sent to a stale one
    return wait(poll);
  }
  view_.store_up = true;
  if (!current->kvs.empty()) {
    auto record = DecodeLeaderRecord(current->kvs.front().value);
    if (record.ok())
      view_.leader = std::move(record).value();
    else
      view_.leader.reset();
    return wait(poll);
  }
  view_.leader.reset();
  // The key is gone: campaign.
  const LeaderRecord me{.replica_id = options_.replica_id, .url = options_.advertise_url};
  lock.unlock();
  const SteadyTime sent = Steady::now();
  auto lease = client_->LeaseGrant(options_.ttl_s);
  Result<net::EtcdTxnResult> txn = Unavailable("no lease");
  if (lease.ok()) {
    txn = client_->Txn(
        {net::EtcdCompare{.key = key_,
                          .target = net::EtcdCompare::Target::kCreateRevision,
                          .result = net::EtcdCompare::Result::kEqual,
                          .number = 0}},
        {net::EtcdOp{
            .kind = net::EtcdOp::Kind::kPut, .key = key_, .value = EncodeLeaderRecord(me), .lease = *lease}});
    // Lost the race (or cannot tell): the lease goes, and with it the key should the put have happened.
    if (!txn.ok() || !txn->succeeded) (void)client_->LeaseRevoke(*lease);
  }
  lock.lock();
  if (!lease.ok() || !txn.ok()) {
    view_.store_up = false;
    return wait(poll);
  }
  if (!txn->succeeded) return;  // another replica won; read who
  lease_ = *lease;
  leading_ = true;
  end_requested_ = false;
  view_.role = ReplicaRole::kLeader;
  view_.leader = me;
  view_.fence = EtcdFence{.leader_key = key_, .create_revision = txn->revision};
  ++view_.changes;
  deadline_ns_.store(ToNs(TermDeadline(sent, options_.ttl_s)), std::memory_order_release);
  lost_.store(false, std::memory_order_release);
  spdlog::info("leading as {} (lease {:x}, fence revision {})", options_.replica_id, lease_, txn->revision);
}

void Leadership::Lead(std::unique_lock<std::mutex>& lock) {
  if (end_requested_) {
    const int64_t lease = lease_;
    lease_ = 0;
    leading_ = false;
    end_requested_ = false;
    view_.role = ReplicaRole::kFollower;
    view_.fence.reset();
    view_.leader.reset();
    lock.unlock();
    if (lease != 0) (void)client_->LeaseRevoke(lease);
    lock.lock();
    return;
  }
  if (lost_.load()) {
    cv_.wait(lock, [&] { return stop_ || end_requested_; });
    return;
  }
  const auto renew_every = std::chrono::milliseconds(options_.ttl_s * 1000 / 3);
  if (cv_.wait_for(lock, renew_every, [&] { return stop_ || end_requested_ || lost_.load(); })) return;
  const int64_t lease = lease_;
  const int64_t fence = view_.fence ? view_.fence->create_revision : 0;
  lock.unlock();
  const SteadyTime sent = Steady::now();
  auto ttl = client_->LeaseKeepAlive(lease);
  auto current = client_->Range(key_, false);
  lock.lock();
  if (stop_ || end_requested_ || lost_.load()) return;
  view_.store_up = ttl.ok() && current.ok();
  if (ttl.ok()) {
    if (*ttl <= 0) return Lose("the lease expired before it was renewed");
    const int64_t deadline = ToNs(TermDeadline(sent, *ttl));
    if (deadline > deadline_ns_.load()) deadline_ns_.store(deadline, std::memory_order_release);
  } else {
    spdlog::warn("lease renewal failed: {}", ttl.status().message());
  }
  if (current.ok()) {
    if (current->kvs.empty()) return Lose("the leader key is gone");
    if (current->kvs.front().create_revision != fence) return Lose("another replica holds the leader key");
  }
  if (!HeldAt(Steady::now())) Lose("no renewal within the lease's TTL (etcd unreachable or without quorum)");
}

}  // namespace shepherd
