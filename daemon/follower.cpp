#include "daemon/follower.h"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "api/http_server.h"
#include "api/problem.h"
#include "api/route_table.h"
#include "daemon/follower_lease.h"

namespace asio = boost::asio;

namespace shepherd {
namespace {

constexpr auto kWatchEvery = std::chrono::milliseconds(50);  // how soon a won election ends the phase
constexpr auto kRebindFor = std::chrono::seconds(10);        // the previous phase's socket may linger

std::string PathOnly(const std::string& target) {
  return target.substr(0, target.find('?'));
}

// The node of an agent's renew-only heartbeat (daemon/follower_lease.h), or nullopt for any other request.
std::optional<std::string> RenewOnlyNode(const HttpRequest& req) {
  if (req.method != "POST" || req.Header(kRenewOnlyHeader).empty()) return std::nullopt;
  std::map<std::string, std::string> params;
  bool known = false;
  const RouteRule* rule = FindRouteRule(req.method, PathOnly(req.target), &params, &known);
  if (!rule || rule->pattern != "/v1/nodes/{id}/heartbeat") return std::nullopt;
  return params["id"];
}

}  // namespace

std::string LeadershipMetrics(const LeadershipView& view, bool leading) {
  std::string out;
  out += "# HELP shepherd_leader 1 while this replica leads, else 0.\n# TYPE shepherd_leader gauge\n";
  out += std::string("shepherd_leader ") + (leading ? "1" : "0") + "\n";
  out +=
      "# HELP shepherd_store_up 1 while etcd answers this replica (0: unreachable or without quorum).\n"
      "# TYPE shepherd_store_up gauge\n";
  out += std::string("shepherd_store_up ") + (view.store_up ? "1" : "0") + "\n";
  out +=
      "# HELP shepherd_leader_changes_total Terms this replica began as leader.\n"
      "# TYPE shepherd_leader_changes_total counter\n";
  out += "shepherd_leader_changes_total " + std::to_string(view.changes) + "\n";
  return out;
}

HttpResponse FollowerAnswer(const HttpRequest& request, const LeadershipView& view,
                            const std::string& own_url, bool serves_reads, const std::string& extra_metrics) {
  const std::string path = PathOnly(request.target);
  const bool get = request.method == "GET" || request.method == "HEAD";
  std::optional<std::string> leader;
  if (view.leader && view.leader->url != own_url) leader = view.leader->url;
  if (get && path == "/healthz") return JsonResponse(200, {{"status", "ok"}, {"role", "follower"}});
  if (get && path == "/readyz") {
    return JsonResponse(503, {{"ready", false},
                              {"role", "follower"},
                              {"leader", leader ? Json(*leader) : Json(nullptr)},
                              {"store", view.store_up ? "up" : "no quorum"},
                              {"serves_reads", serves_reads}});
  }
  if (get && path == "/metrics") {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = LeadershipMetrics(view, false) + extra_metrics;
    return r;
  }
  if (!leader) {
    HttpResponse r =
        Problem(503, view.store_up ? "this replica follows and no leader is known yet; retry"
                                   : "etcd has no quorum (or is unreachable): nobody leads; retry");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  HttpResponse r = JsonResponse(307, {{"leader", *leader}});
  r.headers.emplace_back("Location", *leader + request.target);
  return r;
}

Result<FollowerEnd> RunFollowerPhase(const FollowerPhase& phase, uint16_t* bound) {
  asio::io_context ioc(1);
  Leadership* leadership = phase.leadership;
  const std::string own_url = phase.own_url;
  // Declared after `ioc` and reset before the server: its threads answer through the server's sessions.
  std::unique_ptr<FollowerReads> reads;
  if (phase.reads) reads = std::make_unique<FollowerReads>(*phase.reads);
  FollowerReads* const reader = reads.get();
  auto handler = [leadership, own_url, reader](HttpRequest req, Respond respond) {
    const std::string path = PathOnly(req.target);
    const bool probe = path == "/healthz" || path == "/readyz" || path == "/metrics";
    if (reader && !probe && ClassifyFollowerRoute(req.method, req.target) == FollowerRoute::kRead)
      return reader->Serve(std::move(req), std::move(respond));
    // An agent the leader did not answer asks for its lease alone: answered from the view, not redirected.
    if (reader && reader->renews())
      if (std::optional<std::string> node = RenewOnlyNode(req))
        return reader->Renew(std::move(req), std::move(*node), std::move(respond));
    std::string extra;
    if (reader && path == "/metrics") reader->AppendMetrics(&extra);
    respond(FollowerAnswer(req, leadership->View(), own_url, reader != nullptr, extra));
  };
  const auto give_up = std::chrono::steady_clock::now() + kRebindFor;
  Result<std::unique_ptr<HttpServer>> server = Unavailable("not started");
  while (true) {
    server = HttpServer::Start(ioc, phase.host, phase.port, handler);
    if (server.ok() || std::chrono::steady_clock::now() > give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the port is still held; retry
  }
  if (!server.ok()) return server.status();
  if (bound) *bound = (*server)->port();
  if (phase.on_bound) {
    if (Status s = phase.on_bound((*server)->port()); !s.ok()) return s;
  }
  FollowerEnd end = FollowerEnd::kStop;
  bool done = false;
  bool settled_told = false;
  asio::steady_timer watch(ioc);
  uint64_t hangups_seen = phase.hangups ? phase.hangups->load(std::memory_order_acquire) : 0;
  auto reload_tokens = [&] {
    const uint64_t now_seen = phase.hangups ? phase.hangups->load(std::memory_order_acquire) : 0;
    if (now_seen == hangups_seen) return;
    hangups_seen = now_seen;
    if (!reader || phase.tokens_file.empty()) return;
    auto tokens = LoadTokensFile(phase.tokens_file);
    if (!tokens.ok() || tokens->empty()) {
      spdlog::error("SIGHUP: keeping the current tokens: {}",
                    tokens.ok() ? phase.tokens_file + " lists none" : tokens.status().message());
      return;
    }
    spdlog::info("SIGHUP: {} tokens loaded from {}", tokens->size(), phase.tokens_file);
    reader->SetTokens(std::move(tokens).value());
  };
  std::function<void()> arm = [&] {
    watch.expires_after(kWatchEvery);
    watch.async_wait([&](const boost::system::error_code& ec) {
      if (ec || done) return;
      reload_tokens();
      if (!settled_told && phase.on_settled) {
        const LeadershipView view = leadership->View();
        if (view.settled && view.role == ReplicaRole::kFollower &&
            !leadership->HeldAt(std::chrono::steady_clock::now())) {
          settled_told = true;
          phase.on_settled();
        }
      }
      if (phase.stop->load(std::memory_order_acquire)) {
        end = FollowerEnd::kStop;
      } else if (leadership->HeldAt(std::chrono::steady_clock::now())) {
        end = FollowerEnd::kLeading;
      } else {
        return arm();
      }
      done = true;
      // No drain: every answer a follower gives is immediate.
      (*server)->Shutdown(std::chrono::milliseconds(0), [&ioc] { ioc.stop(); });
    });
  };
  arm();
  ioc.run();
  reads.reset();  // the view is dropped: a replica that leads recovers from the store as a leader
  server->reset();
  return end;
}

}  // namespace shepherd
