#include "agent/agent.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "agent/fence_keeper.h"
#include "agent/health_check.h"
#include "agent/protocol.h"
#include "agent/supervisor.h"
#include "core/time.h"
#include "net/endpoint_list.h"
#include "net/http_client.h"

namespace shepherd::agent {
namespace {

using namespace std::chrono_literals;
using net::EscapePathSegment;
using net::HttpClient;
using net::HttpResult;
using net::RetryDelay;
using Clock = std::chrono::steady_clock;

class AgentImpl final : public Agent {
 public:
  AgentImpl(AgentOptions o, std::unique_ptr<Supervisor> sup, std::unique_ptr<HttpClient> main_http,
            std::unique_ptr<HttpClient> poll_http, std::optional<Clock::time_point> inherited_lease)
      : o_(std::move(o)),
        sup_(std::move(sup)),
        http_(std::move(main_http)),
        poll_http_(std::move(poll_http)),
        lease_until_(inherited_lease) {
    identity_ = {::getpid(), FormatRfc3339(std::chrono::system_clock::now())};
    node_path_ = "/v1/nodes/" + EscapePathSegment(o_.node_id);
  }

  Status Run() override {
    spdlog::info("agent {}: state dir {}, server {}", o_.node_id, o_.state_dir, o_.server);
    if (!o_.health_check.empty())
      health_check_ =
          std::make_unique<HealthCheck>(o_.health_check, o_.health_check_interval, o_.health_check_timeout);
    std::thread poller([this] { PollLoop(); });
    SuperviseLoop();
    poller.join();
    spdlog::info("agent {}: stopped; ranks left running", o_.node_id);
    return Status::Ok();
  }

  void Stop() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    stopping_ = true;
    cv_.notify_all();
    http_->Cancel();
    poll_http_->Cancel();
  }

 private:
  // ---- supervision thread ----
  void SuperviseLoop() {
    Clock::time_point next_register = Clock::now(), next_heartbeat = Clock::now();
    Clock::duration register_backoff = 250ms;
    while (true) {
      std::optional<Assignments> incoming;
      bool registered;
      {
        std::lock_guard lock(mu_);
        if (stop_) return;
        incoming.swap(mailbox_);
        registered = registered_;
      }
      Clock::time_point now = Clock::now();
      // The daemon asked us to hold off (429/503 with Retry-After): no register or heartbeat until then.
      const bool held = now < hold_until_;
      if (!registered && now >= next_register && !held) {
        const Registration r = Register();
        if (r != Registration::kFailed) {
          registered = true;
          register_backoff = 250ms;
          next_heartbeat = now;
          retry_register_ =
              r == Registration::kRefused ? std::optional(now + kRetryRefusedRegistration) : std::nullopt;
          {
            std::lock_guard lock(mu_);
            registered_ = true;
          }
          cv_.notify_all();
        } else {
          next_register = now + register_backoff;
          register_backoff = std::min<Clock::duration>(register_backoff * 2, 10s);
        }
      } else if (registered && retry_register_ && now >= *retry_register_ && !held) {
        retry_register_ = Register() == Registration::kRefused
                              ? std::optional(now + kRetryRefusedRegistration)
                              : std::nullopt;
      }
      if (incoming) sup_->SetDesired(std::move(incoming->ranks), now, std::move(incoming->keep));
      Fence(now);
      int exits = sup_->Poll(now);
      if (registered && !held && (exits > 0 || now >= next_heartbeat)) {
        next_heartbeat = now + o_.heartbeat_interval;
        if (!Heartbeat()) next_register = Clock::now();
      }
      Clock::time_point wake = now + o_.supervise_interval;
      if (registered) wake = std::min(wake, std::max(next_heartbeat, hold_until_));
      if (lease_until_ && !fenced_) wake = std::min(wake, *lease_until_ - o_.fence_grace);
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, wake, [this] { return stop_ || mailbox_.has_value(); });
    }
  }

  // The lease ran out (or is about to: fence_grace before): stop every rank, SIGKILL by the expiry.
  void Fence(Clock::time_point now) {
    if (!lease_until_ || fenced_ || now < *lease_until_ - o_.fence_grace) return;
    fenced_ = true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*lease_until_ - now);
    if (!declared_lost_)
      spdlog::error("agent {}: no heartbeat answer within the daemon's lease: stopping every rank (fencing)",
                    o_.node_id);
    sup_->StopAll(now, std::max(left, std::chrono::milliseconds(0)));
  }

  // The keeper enforces what <state-dir>/lease says; a lease it cannot be told is removed, never left stale.
  void MirrorLease() {
    Status s = WriteLease(o_.state_dir, {*lease_until_, o_.fence_grace});
    if (s.ok()) return;
    spdlog::warn("agent {}: {}: the fence keeper enforces no lease until the next renewal", o_.node_id,
                 s.message());
    ClearLease(o_.state_dir);
  }

  // A heartbeat must not block past the next fencing step (the SIGTERMs, then the SIGKILLs).
  std::chrono::milliseconds HeartbeatTimeout(Clock::time_point now) const {
    if (!lease_until_) return o_.request_timeout;
    Clock::time_point next = fenced_ ? *lease_until_ : *lease_until_ - o_.fence_grace;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - now);
    return std::clamp(left, std::chrono::milliseconds(100), o_.request_timeout);
  }

  // kRefused: the daemon knows the node and refused these settings (409: it runs ranks, which keep what
  // they were given: another GPU count, leaf or hostname than this agent's flags). The agent serves the
  // node as the daemon knows it (heartbeats renew the lease, so its ranks are not fenced and the node is
  // not lost) and offers its settings again every kRetryRefusedRegistration, e.g. once the node is free.
  enum class Registration { kRegistered, kRefused, kFailed };
  static constexpr auto kRetryRefusedRegistration = std::chrono::seconds(60);
  Registration Register() {
    NodeRegistration n{o_.node_id, o_.hostname,       o_.gpus,     o_.topology,
                       o_.spare,   o_.gpu_memory_gib, o_.gpu_model};
    Result<HttpResult> r = http_->Request("POST", "/v1/nodes", RegisterBody(n).dump(), o_.request_timeout);
    if (r.ok() && (r->status == 200 || r->status == 201)) {
      if (retry_register_) spdlog::info("agent {}: registered with its own settings now", o_.node_id);
      spdlog::info("agent {}: registered ({})", o_.node_id, r->status);
      reachable_ = true;
      return Registration::kRegistered;
    }
    if (r.ok() && r->status == 409) {
      spdlog::error(
          "agent {}: the daemon keeps its own record of this node, which runs ranks: {}; serving the node "
          "as registered (heartbeats go on, its ranks keep running) and offering these settings again in "
          "{} s",
          o_.node_id, r->body.substr(0, 300), kRetryRefusedRegistration.count());
      reachable_ = true;
      return Registration::kRefused;
    }
    LogFailure("register", r);
    return Registration::kFailed;
  }

  // Returns false when the daemon no longer knows the node (404): the caller registers again.
  bool Heartbeat() {
    Json body =
        HeartbeatBody(identity_, ReadGpuFaults(o_.state_dir + "/gpu_faults.json", o_.gpus), sup_->Report());
    if (health_check_)
      if (std::optional<HealthCheckResult> h = health_check_->Latest())
        body["health_check"] = {{"seq", h->seq}, {"ok", h->ok}, {"output", h->output}, {"at", h->at}};
    // The ranks' relayed reports ride along (agent/relay.h); their files go once the daemon answers 200.
    std::vector<Supervisor::Relayed> relayed = sup_->ReadRelayed();
    if (!relayed.empty()) {
      Json entries = Json::array();
      for (Supervisor::Relayed& e : relayed)
        entries.push_back({{"job", e.key.job},
                           {"attempt", e.key.attempt},
                           {"rank", e.key.rank},
                           {"reports", std::move(e.read.reports)}});
      body["reports"] = std::move(entries);
    }
    Clock::time_point sent = Clock::now();
    const std::string text = body.dump();
    Result<HttpResult> r = http_->Request("POST", node_path_ + "/heartbeat", text, HeartbeatTimeout(sent));
    // The leader did not answer (no replica reached it, or none knows one): ask any replica for the lease
    // alone. A follower answers it from replicated state; a leader answers it as any heartbeat.
    if (!stopping_ && (!r.ok() || r->status == 502 || r->status == 503 || r->status == 504)) {
      LogFailure("heartbeat", r);
      sent = Clock::now();
      r = http_->Request("POST", node_path_ + "/heartbeat", text, HeartbeatTimeout(sent),
                         {{kRenewOnlyHeader, "1"}});
    }
    if (r.ok() && r->status == 404) {
      spdlog::warn("agent {}: daemon does not know the node: registering again", o_.node_id);
      std::lock_guard lock(mu_);
      registered_ = false;
      return false;
    }
    if (!r.ok() || r->status != 200) {
      LogFailure("heartbeat", r);
      return true;
    }
    reachable_ = true;
    Result<Json> j = ParseJsonText(r->body);
    // A follower's renew-only answer took nothing: exits and relayed files wait for the leader's answer.
    bool renew_only = false;
    if (j.ok() && j->is_object())
      if (auto it = j->find("renew_only"); it != j->end() && it->is_boolean()) renew_only = it->get<bool>();
    if (!renew_only)
      for (const Supervisor::Relayed& e : relayed) DeleteRelayFiles(e.read.files);
    if (renew_only != renewed_by_follower_) {
      renewed_by_follower_ = renew_only;
      if (renew_only)
        spdlog::warn(
            "agent {}: the leader does not answer; a follower renews the lease (exits and relayed "
            "reports wait for the leader)",
            o_.node_id);
      else
        spdlog::info("agent {}: the leader answers again", o_.node_id);
    }
    if (j.ok() && j->is_object())
      if (auto rej = j->find("reports_rejected"); rej != j->end() && rej->is_number_integer() && *rej > 0)
        spdlog::warn("agent {}: the daemon refused {} of the reports relayed with this heartbeat", o_.node_id,
                     rej->get<int64_t>());
    Result<HeartbeatAnswer> answer = j.ok() ? ParseHeartbeatAnswer(*j) : Result<HeartbeatAnswer>(j.status());
    if (!answer.ok()) {
      spdlog::warn("agent {}: bad heartbeat answer: {}", o_.node_id, answer.status().message());
      return true;
    }
    if (answer->node_lost) {
      // Every rank stops now: SIGTERM at once, SIGKILL fence_grace later (Fence, on this loop's next turn).
      const Clock::time_point end = Clock::now() + o_.fence_grace;
      if (!lease_until_ || *lease_until_ > end) {
        spdlog::error("agent {}: the daemon declared this node lost: stopping every rank", o_.node_id);
        lease_until_ = end;
        fenced_ = false;
        declared_lost_ = true;
        if (o_.fence_keeper) MirrorLease();
      }
      return true;
    }
    if (!renew_only) sup_->AckExits(answer->ack_exits);
    if (answer->lease_s) {
      declared_lost_ = false;
      if (fenced_) spdlog::info("agent {}: the daemon answers again; lease renewed", o_.node_id);
      lease_until_ =
          sent + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*answer->lease_s));
      fenced_ = false;
      if (o_.fence_keeper) MirrorLease();
    }
    return true;
  }

  // Logs the first failure after a success at warn level, the rest at debug: a daemon restart must not
  // flood the log.
  // Also honours Retry-After (with jitter) for the supervision thread's calls: see hold_until_.
  void LogFailure(const char* what, const Result<HttpResult>& r) {
    if (stopping_) return;  // calls aborted by Stop()
    if (r.ok() && std::string_view(what) != "assignments")
      if (auto delay = RetryDelay(*r, Jitter())) hold_until_ = Clock::now() + *delay;
    std::string why =
        r.ok() ? "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 200) : r.status().message();
    if (reachable_.exchange(false)) {
      spdlog::warn("agent {}: {} failed: {} (retrying; ranks keep running)", o_.node_id, what, why);
    } else {
      spdlog::debug("agent {}: {} failed: {}", o_.node_id, what, why);
    }
  }

  // ---- poll thread ----
  void PollLoop() {
    std::int64_t version = 0;
    bool have_version = false;  // false: ask with wait=0 for an answer at once
    Clock::duration backoff = 250ms;
    while (true) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || registered_; });
        if (stop_) return;
      }
      std::string target = node_path_ + "/assignments?version=" + std::to_string(version) +
                           "&wait=" + std::to_string(have_version ? o_.long_poll_wait.count() : 0) +
                           "&keep=1";  // this agent honours `keep` (docs/agent-protocol.md)
      auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o_.long_poll_wait) + 10s;
      Result<HttpResult> r = poll_http_->Request("GET", target, "", timeout);
      Result<Assignments> a = InvalidArgument("");
      if (r.ok() && r->status == 200) {
        Result<Json> j = ParseJsonText(r->body);
        a = j.ok() ? ParseAssignments(*j) : Result<Assignments>(j.status());
        if (!a.ok()) spdlog::warn("agent {}: bad assignments answer: {}", o_.node_id, a.status().message());
      } else if (r.ok() && r->status == 404) {
        have_version = false;
        std::lock_guard lock(mu_);
        registered_ = false;
      } else {
        LogFailure("assignments", r);
      }
      if (a.ok()) {
        if (!have_version || version != a->version)
          spdlog::info("agent {}: assignments version {} ({} ranks)", o_.node_id, a->version,
                       a->ranks.size());
        version = a->version;
        have_version = true;
        backoff = 250ms;
        {
          std::lock_guard lock(mu_);
          mailbox_ = std::move(*a);
        }
        cv_.notify_all();
        continue;
      }
      Clock::duration wait = backoff;
      if (r.ok())
        if (auto delay = RetryDelay(*r, Jitter())) wait = std::max<Clock::duration>(wait, *delay);
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, wait, [this] { return stop_; });
      backoff = std::min<Clock::duration>(backoff * 2, 5s);
    }
  }

  const AgentOptions o_;
  std::unique_ptr<Supervisor> sup_;            // supervision thread only
  std::unique_ptr<HealthCheck> health_check_;  // its own thread; Latest() is read by the supervision thread
  std::unique_ptr<HttpClient> http_;           // supervision thread only (Cancel from any)
  std::unique_ptr<HttpClient> poll_http_;      // poll thread only (Cancel from any)
  AgentIdentity identity_;
  std::string node_path_;
  std::optional<Clock::time_point> lease_until_;     // supervision thread only; unset: no lease granted yet
  std::optional<Clock::time_point> retry_register_;  // supervision thread only: a refused registration
  bool fenced_ = false;                              // supervision thread only: ranks stopped for the lease
  bool renewed_by_follower_ = false;  // supervision thread only: the last answer was a follower's renew-only
  bool declared_lost_ = false;        // supervision thread only: a node_lost answer ends the lease now
  std::atomic<bool> reachable_{true};
  // Supervision thread only: no register or heartbeat before this (the daemon's Retry-After, jittered).
  Clock::time_point hold_until_{};
  // A uniform draw in [0, 1) for jitter; per thread, so both threads may call it.
  static double Jitter() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                   // guarded by mu_
  bool registered_ = false;             // guarded by mu_
  std::optional<Assignments> mailbox_;  // guarded by mu_: newest unapplied assignments answer
};

bool AdoptsRunningRanks(const Supervisor& sup) {
  return std::any_of(sup.processes().begin(), sup.processes().end(),
                     [](const TrackedProcess& p) { return p.adopted && p.phase == ProcessPhase::kRunning; });
}

}  // namespace

Result<std::unique_ptr<Agent>> Agent::Create(AgentOptions o) {
  if (o.node_id.empty()) return InvalidArgument("--node-id is required");
  if (o.gpus <= 0) return InvalidArgument("--gpus must be positive");
  if (o.heartbeat_interval <= 0ms || o.supervise_interval <= 0ms || o.request_timeout <= 0ms)
    return InvalidArgument("intervals and timeouts must be positive");
  if (o.stop_grace < 0ms || o.long_poll_wait < 0s || o.fence_grace < 0ms)
    return InvalidArgument("--stop-grace must not be negative");
  if (o.hostname.empty()) {
    char buf[256] = {};
    ::gethostname(buf, sizeof(buf) - 1);
    o.hostname = buf;
  }
  if (o.state_dir.empty()) o.state_dir = "./var/agent-" + o.node_id;
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(o.state_dir, ec);
  if (ec) return Internal("state dir " + o.state_dir + ": " + ec.message());
  o.state_dir = dir.lexically_normal().string();
  while (o.state_dir.size() > 1 && o.state_dir.back() == '/') o.state_dir.pop_back();

  // Both threads follow leadership over the same list, each with its own client (net/endpoint_list.h).
  Result<std::unique_ptr<net::EndpointListClient>> main_http =
      net::EndpointListClient::Create({.base_url = o.server, .token = o.token, .token_file = o.token_file});
  if (!main_http.ok()) return InvalidArgument("--server: " + main_http.status().message());
  Result<std::unique_ptr<net::EndpointListClient>> poll_http =
      net::EndpointListClient::Create({.base_url = o.server, .token = o.token, .token_file = o.token_file});
  if (!poll_http.ok()) return InvalidArgument("--server: " + poll_http.status().message());
  Result<std::unique_ptr<Supervisor>> sup = Supervisor::Open({.state_dir = o.state_dir,
                                                              .stop_grace = o.stop_grace,
                                                              .run_as = o.run_as,
                                                              .allowed_run_as = o.allowed_run_as,
                                                              .secrets = {o.token},
                                                              .gpus = o.gpus});
  if (!sup.ok()) return sup.status();
  // Adopted ranks keep the lease of the agent that started them: the daemon may start their replacements
  // once that lease ends, whether or not this agent ever reaches it.
  std::optional<Clock::time_point> inherited;
  if (std::optional<Lease> left = ReadLease(o.state_dir); left && AdoptsRunningRanks(**sup)) {
    inherited = left->until;
    auto in_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left->until - Clock::now());
    spdlog::info(
        "agent {}: adopted ranks keep the lease of the agent that started them: fenced in {} ms "
        "unless the daemon answers",
        o.node_id, in_ms.count());
  } else {
    ClearLease(o.state_dir);
  }
  if (o.fence_keeper) {
    Result<pid_t> keeper = StartFenceKeeper(o.state_dir);
    if (!keeper.ok()) return keeper.status();
    spdlog::info("agent {}: fence keeper pid {}", o.node_id, *keeper);
  }
  return std::unique_ptr<Agent>(
      new AgentImpl(std::move(o), std::move(*sup), std::move(*main_http), std::move(*poll_http), inherited));
}

}  // namespace shepherd::agent
