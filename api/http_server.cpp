// HttpServer and its ServerCore: the acceptor, connection accounting (max_connections, 503), request ids,
// and graceful shutdown (drain, grace timer, force close). The per-connection Session is in
// api/http_session.cpp; both share api/http_server_internal.h.
#include "api/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <exception>
#include <random>
#include <utility>
#include <vector>

#include "api/http_server_internal.h"

namespace shepherd {
namespace http_internal {
namespace {

// Connections beyond max_connections are answered 503 by at most this many sessions at a time; more are
// closed without an answer.
constexpr std::size_t kMaxRejecting = 64;

}  // namespace

ServerCore::ServerCore(asio::io_context& ioc, HttpHandler handler, HttpServerOptions options)
    : ioc_(ioc),
      acceptor_(ioc),
      accept_retry_timer_(ioc),
      grace_timer_(ioc),
      handler_(std::move(handler)),
      options_(std::move(options)),
      request_id_seed_(std::random_device{}() * 0x100000000ull + std::random_device{}()) {}

Status ServerCore::Listen(const std::string& host, uint16_t port) {
  error_code ec;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(ioc_);
    const auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return InvalidArgument(fmt::format("cannot resolve listen host '{}': {}", host,
                                         ec ? ec.message() : std::string("no address")));
    }
    endpoint = results.begin()->endpoint();
  }
  const std::string where = fmt::format("{}:{}", host, port);
  if (acceptor_.open(endpoint.protocol(), ec)) {
    return Unavailable(fmt::format("listen on {}: open: {}", where, ec.message()));
  }
  acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (acceptor_.bind(endpoint, ec)) {
    return Unavailable(fmt::format("listen on {}: bind: {}", where, ec.message()));
  }
  const int backlog = options_.listen_backlog > 0 ? options_.listen_backlog : asio::socket_base::max_listen_connections;
  if (acceptor_.listen(backlog, ec)) {
    return Unavailable(fmt::format("listen on {}: listen: {}", where, ec.message()));
  }
  const auto local = acceptor_.local_endpoint(ec);
  if (ec) return Unavailable(fmt::format("listen on {}: local_endpoint: {}", where, ec.message()));
  port_ = local.port();
  return Status::Ok();
}

void ServerCore::DoAccept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(ioc_, [self = shared_from_this()](error_code ec, tcp::socket socket) {
    self->OnAccept(ec, std::move(socket));
  });
}

void ServerCore::OnAccept(const error_code& ec, tcp::socket socket) {
  if (closed_ || shutting_down_ || ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // E.g. out of file descriptors: back off briefly instead of spinning. A connection waits that the
    // daemon cannot take: its own capacity.
    spdlog::warn("http accept failed: {}", ec.message());
    Shed(ShedReason::kListenQueue);
    accept_retry_timer_.expires_after(std::chrono::milliseconds(100));
    accept_retry_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->DoAccept();
    });
    return;
  }
  if (ListenQueueFull()) Shed(ShedReason::kListenQueue);
  error_code aec;
  const auto remote = socket.remote_endpoint(aec);
  const std::string address = aec ? std::string() : remote.address().to_string();
  // Make room by closing untrusted idle connections (oldest first), then idle connections of an identity
  // over its share, before refusing anyone. Trusted connections are not in per_address_.
  auto per_address = [&] {
    auto it = per_address_.find(address);
    return it == per_address_.end() ? std::size_t{0} : it->second;
  };
  // Full (this address's share, or all): the probe reserve still answers /healthz and /readyz, so
  // connections held by one address (even authenticated ones) never blind the host's health probes.
  const SessionKind full =
      options_.on_head && reserve_ < options_.probe_reserve ? SessionKind::kReserve : SessionKind::kRejecting;
  SessionKind kind = SessionKind::kServing;
  if (per_address() >= options_.max_connections_per_address && !EvictOne(&address)) kind = full;
  if (kind == SessionKind::kServing && sessions_.size() - rejecting_ - reserve_ >= options_.max_connections &&
      !EvictOne(nullptr) && !EvictOverShare())
    kind = full;
  if (kind == SessionKind::kRejecting && rejecting_ >= kMaxRejecting) {
    error_code ignored;
    socket.close(ignored);
    Rejected(503);
    Shed(ShedReason::kConnectionCap);
  } else {
    const uint64_t id = next_session_id_++;
    auto session = std::make_shared<Session>(shared_from_this(), id, std::move(socket), kind, address);
    sessions_.emplace(id, session);
    if (kind == SessionKind::kRejecting) ++rejecting_;
    if (kind == SessionKind::kReserve) ++reserve_;
    if (kind == SessionKind::kServing) ++per_address_[address];
    active_.store(sessions_.size(), std::memory_order_relaxed);
    session->Start();
  }
  DoAccept();
}

bool ServerCore::EvictOne(const std::string* address) {
  for (uint64_t id : evictable_) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) continue;
    if (address && it->second->address() != *address) continue;
    spdlog::debug("http conn {} evicted: idle and unauthenticated, making room", id);
    auto session = it->second;
    session->CloseNow();  // unregisters, erasing it from evictable_
    Rejected(0);          // counted as an eviction
    Shed(ShedReason::kEvicted);
    return true;
  }
  return false;
}

bool ServerCore::EvictIdleOf(const std::string& identity, bool for_another) {
  auto it = identities_.find(identity);
  if (it == identities_.end() || it->second.idle.empty()) return false;
  const uint64_t id = *it->second.idle.begin();
  auto session = sessions_.find(id);
  if (session == sessions_.end()) {
    it->second.idle.erase(id);
    return false;
  }
  spdlog::debug("http conn {} evicted: idle, making room for its identity's connections", id);
  auto keep = session->second;
  keep->CloseNow();  // unregisters, erasing it from the idle set
  Rejected(0);
  if (for_another) Shed(ShedReason::kEvicted);
  return true;
}

bool ServerCore::EvictOverShare() {
  // Linear in the identities holding connections; runs only at max_connections.
  const std::string* biggest = nullptr;
  std::size_t most = 0;
  for (const auto& [identity, state] : identities_) {
    if (!state.idle.empty() && state.connections > most) {
      most = state.connections;
      biggest = &identity;
    }
  }
  const std::size_t share = options_.max_connections / (identities_.size() + 1);
  if (!biggest || most <= share) return false;
  const std::string identity = *biggest;  // the eviction may erase the entry
  return EvictIdleOf(identity, /*for_another=*/true);
}

void ServerCore::SetIdle(uint64_t session_id, const std::string& identity, bool idle) {
  auto it = identities_.find(identity);
  if (it == identities_.end()) return;
  if (idle)
    it->second.idle.insert(session_id);
  else
    it->second.idle.erase(session_id);
}

bool ServerCore::ClaimIdentity(uint64_t session_id, const std::string& address, const std::string& from,
                               const std::string& to, std::size_t cap) {
  if (from == to) return true;
  auto at = identities_.find(to);
  if (at != identities_.end() && at->second.connections >= cap && !EvictIdleOf(to, /*for_another=*/false)) return false;
  if (from.empty()) {
    auto it = per_address_.find(address);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  } else {
    auto it = identities_.find(from);
    if (it != identities_.end()) {
      it->second.idle.erase(session_id);
      if (--it->second.connections == 0) identities_.erase(it);
    }
  }
  ++identities_[to].connections;
  return true;
}

void ServerCore::SetEvictable(uint64_t session_id, bool evictable) {
  if (evictable)
    evictable_.insert(session_id);
  else
    evictable_.erase(session_id);
}

ServerCore::BodyGrant ServerCore::ReserveBody(std::uint64_t bytes, BodyClass c, const std::string& owner) {
  const auto fits = [bytes](std::uint64_t used, std::uint64_t limit) {
    return used <= limit && bytes <= limit - used;
  };
  const std::uint64_t share =
      std::max(c == BodyClass::kLow ? options_.body_share_low_role : options_.body_share_per_identity,
               options_.body_limit);
  auto owned = body_by_owner_.find(owner);
  if (!fits(owned == body_by_owner_.end() ? 0 : owned->second, share)) return BodyGrant::kOwnShare;
  const auto& used = body_in_use_;
  const std::uint64_t live = used[static_cast<int>(BodyClass::kLiveness)];
  const std::uint64_t standard = used[static_cast<int>(BodyClass::kStandard)];
  const std::uint64_t low = used[static_cast<int>(BodyClass::kLow)];
  if (!fits(live + standard + low, options_.body_budget)) return BodyGrant::kClassFull;
  if (c != BodyClass::kLiveness &&
      !fits(standard + low,
            options_.body_budget - std::min(options_.body_reserve_liveness, options_.body_budget)))
    return BodyGrant::kClassFull;
  if (c == BodyClass::kLow && !fits(low, std::max(options_.body_budget_low_roles, options_.body_limit)))
    return BodyGrant::kClassFull;
  body_in_use_[static_cast<int>(c)] += bytes;
  body_by_owner_[owner] += bytes;
  return BodyGrant::kGranted;
}

void ServerCore::ReleaseBody(std::uint64_t bytes, BodyClass c, const std::string& owner) {
  if (bytes == 0) return;
  auto& used = body_in_use_[static_cast<int>(c)];
  used -= std::min(bytes, used);
  auto it = body_by_owner_.find(owner);
  if (it == body_by_owner_.end()) return;
  it->second -= std::min(bytes, it->second);
  if (it->second == 0) body_by_owner_.erase(it);
}

void ServerCore::Unregister(uint64_t session_id, SessionKind kind, const std::string& address,
                            const std::string& identity) {
  evictable_.erase(session_id);
  if (sessions_.erase(session_id) == 0) return;
  if (kind == SessionKind::kRejecting) --rejecting_;
  if (kind == SessionKind::kReserve) --reserve_;
  if (kind == SessionKind::kServing && identity.empty()) {
    auto it = per_address_.find(address);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  }
  if (kind == SessionKind::kServing && !identity.empty()) {
    auto it = identities_.find(identity);
    if (it != identities_.end()) {
      it->second.idle.erase(session_id);
      if (--it->second.connections == 0) identities_.erase(it);
    }
  }
  active_.store(sessions_.size(), std::memory_order_relaxed);
  if (shutting_down_ && sessions_.empty()) Drained();
}

bool ServerCore::LogRefusal() {
  const Clock::time_point now = Clock::now();
  if (now - refusal_window_start_ >= kRefusalWindow) {
    if (refusals_unlogged_ > 0)
      spdlog::info("http: {} more requests refused on their head in the last {} s (not logged one by one)",
                   refusals_unlogged_, kRefusalWindow.count());
    refusal_window_start_ = now;
    refusals_logged_ = 0;
    refusals_unlogged_ = 0;
  }
  if (refusals_logged_ < kRefusalLines) {
    ++refusals_logged_;
    return true;
  }
  ++refusals_unlogged_;
  return false;
}

void ServerCore::Rejected(int status) {
  if (!options_.on_rejected) return;
  try {
    options_.on_rejected(status);
  } catch (const std::exception& e) {
    spdlog::error("http on_rejected threw: {}", e.what());
  } catch (...) {
    spdlog::error("http on_rejected threw an unknown exception");
  }
}

bool ServerCore::ListenQueueFull() {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(acceptor_.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // The queue holds up to limit + 1; one was just taken.
  return info.tcpi_sacked > 0 && info.tcpi_unacked + 1 >= info.tcpi_sacked;
}

void ServerCore::Shed(ShedReason reason) {
  if (!options_.on_shed) return;
  try {
    options_.on_shed(reason);
  } catch (const std::exception& e) {
    spdlog::error("http on_shed threw: {}", e.what());
  } catch (...) {
    spdlog::error("http on_shed threw an unknown exception");
  }
}

std::string ServerCore::NewRequestId() {
  // splitmix64 of seed + counter: a bijection, so ids are unique within a server, and look random across
  // restarts.
  uint64_t z = request_id_seed_ + (++request_counter_) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return fmt::format("{:016x}", z);
}

void ServerCore::BeginShutdown(std::chrono::milliseconds grace, std::function<void()> on_drained) {
  if (closed_ || shutting_down_) return;
  shutting_down_ = true;
  on_drained_ = std::move(on_drained);
  error_code ec;
  acceptor_.close(ec);
  accept_retry_timer_.cancel();
  spdlog::info("http server on port {} shutting down: {} connections, grace {} ms", port_, sessions_.size(),
               grace.count());
  std::vector<std::shared_ptr<Session>> sessions;
  for (const auto& [id, session] : sessions_) sessions.push_back(session);
  for (const auto& session : sessions) session->OnServerShutdown();
  if (sessions_.empty()) {
    Drained();
    return;
  }
  grace_timer_.expires_after(grace);
  grace_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->sessions_.empty()) return;
    spdlog::warn("http server on port {}: grace period over, closing {} connections", self->port_,
                 self->sessions_.size());
    self->ForceCloseSessions();
  });
}

void ServerCore::ForceCloseSessions() {
  std::vector<std::shared_ptr<Session>> sessions;
  for (const auto& [id, session] : sessions_) sessions.push_back(session);
  for (const auto& session : sessions) session->CloseNow();
}

void ServerCore::Drained() {
  grace_timer_.cancel();
  auto on_drained = std::move(on_drained_);
  on_drained_ = nullptr;
  spdlog::info("http server on port {} drained", port_);
  if (!on_drained) return;
  try {
    on_drained();
  } catch (const std::exception& e) {
    spdlog::error("http on_drained threw: {}", e.what());
  } catch (...) {
    spdlog::error("http on_drained threw an unknown exception");
  }
}

void ServerCore::CloseAll() {
  closed_ = true;
  shutting_down_ = true;
  on_drained_ = nullptr;
  error_code ec;
  acceptor_.close(ec);
  accept_retry_timer_.cancel();
  grace_timer_.cancel();
  ForceCloseSessions();
}

}  // namespace http_internal

const char* ToString(ShedReason r) {
  switch (r) {
    case ShedReason::kConnectionCap:
      return "connection_cap";
    case ShedReason::kEvicted:
      return "evicted";
    case ShedReason::kBodyBudget:
      return "body_budget";
    case ShedReason::kQueueFull:
      return "queue_full";
    case ShedReason::kIdentityCap:
      return "identity_cap";
    case ShedReason::kBodyShare:
      return "body_share";
    case ShedReason::kRateLimited:
      return "rate_limited";
    case ShedReason::kListenQueue:
      return "listen_queue";
  }
  return "unknown";
}

HttpServer::HttpServer(std::shared_ptr<http_internal::ServerCore> core) : core_(std::move(core)) {}

HttpServer::~HttpServer() {
  core_->CloseAll();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(boost::asio::io_context& ioc, const std::string& host,
                                                      uint16_t port, HttpHandler handler,
                                                      HttpServerOptions options) {
  if (!handler) return InvalidArgument("http server needs a handler");
  if (options.header_limit == 0 || options.header_limit > UINT32_MAX) {
    return InvalidArgument("http server header_limit must be in [1, 2^32)");
  }
  try {
    auto core = std::make_shared<http_internal::ServerCore>(ioc, std::move(handler), std::move(options));
    if (Status status = core->Listen(host, port); !status.ok()) return status;
    // Accepting starts on the io thread, so the acceptor is only ever touched there.
    boost::asio::post(ioc, [core] { core->DoAccept(); });
    spdlog::info("http server listening on {}:{}", host, core->port());
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(core)));
  } catch (const std::exception& e) {
    return Internal(fmt::format("http server start on {}:{}: {}", host, port, e.what()));
  }
}

uint16_t HttpServer::port() const {
  return core_->port();
}

void HttpServer::Shutdown(std::chrono::milliseconds grace, std::function<void()> on_drained) {
  if (core_->shutdown_requested().exchange(true)) {
    spdlog::warn("http server on port {}: Shutdown called more than once; ignored", core_->port());
    return;
  }
  boost::asio::post(core_->ioc(), [core = core_, grace, on_drained = std::move(on_drained)]() mutable {
    core->BeginShutdown(grace, std::move(on_drained));
  });
}

std::size_t HttpServer::active_sessions() const {
  return core_->active_sessions();
}

}  // namespace shepherd
