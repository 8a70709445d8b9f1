// The replica loop (daemon/serve_term.h): follower phases (daemon/follower.h) and leader terms (ServeTerm).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <thread>

#include "api/http_server.h"
#include "api/problem.h"
#include "daemon/follower.h"
#include "daemon/serve_term.h"
#include "daemon/store_open.h"

namespace asio = boost::asio;

namespace shepherd {
namespace {

// What a follower phase serves reads with; none when follower_read_max_age_s is 0 or the tokens file does
// not load (the follower then redirects reads: it never serves them without the leader's auth).
std::optional<FollowerReadsOptions> FollowerReadsFor(const DaemonConfig& config,
                                                    const StoreLocation& location) {
  if (config.follower_read_max_age_s <= 0) return std::nullopt;
  FollowerReadsOptions o;
  o.endpoints = location.endpoints;
  o.prefix = config.store_prefix;
  o.max_age = std::chrono::nanoseconds(static_cast<int64_t>(config.follower_read_max_age_s * 1e9));
  o.renew_max_age = std::chrono::nanoseconds(static_cast<int64_t>(config.follower_renewal_max_age_s * 1e9));
  o.controller = config.controller;
  o.controller.slurm = config.slurm.enabled;
  o.api.job_policy = config.job_policy;
  o.api.quotas = config.quotas;
  o.api.slurm_users = config.slurm.users;
  if (!config.tokens_file.empty()) {
    auto tokens = LoadTokensFile(config.tokens_file);
    if (!tokens.ok() || tokens->empty()) {
      spdlog::error("follower reads off: the tokens file {} does not load{}", config.tokens_file,
                    tokens.ok() ? " (no token)" : ": " + tokens.status().message());
      return std::nullopt;
    }
    o.tokens = std::move(tokens).value();
  }
  return o;
}

// A leader term's configuration: a lost node's replacements wait for the longest a follower may have
// renewed its lease (control/agent_board.h).
DaemonConfig LeaderConfig(const DaemonConfig& config) {
  DaemonConfig c = config;
  c.controller.follower_renewal_s = config.follower_renewal_max_age_s;
  return c;
}

}  // namespace

// A replica over an etcd store: follower -> (wins) leader -> (loses) follower, until SIGTERM/SIGINT. The
// signals are caught for the whole run (a thread of their own), so one arriving between two phases is a
// stop, never the default action.
int RunReplica(const DaemonConfig& config, const StoreLocation& location) {
  std::string host;
  uint16_t port = 0;
  if (Status s = SplitHostPort(config.listen, &host, &port); !s.ok()) {
    spdlog::error("{}", s.message());
    return 2;
  }
  std::atomic<bool> stop{false};
  asio::io_context signal_ioc(1);
  asio::signal_set signals(signal_ioc, SIGINT, SIGTERM);
  signals.async_wait([&stop](const boost::system::error_code& ec, int) {
    if (!ec) stop.store(true, std::memory_order_release);
  });
  // SIGHUP re-reads the tokens file: the leader's term handles it (daemon/serve.cpp), a follower's phase
  // through `hangups`; caught here for the whole run, so it never takes its default action (exit).
  std::atomic<uint64_t> hangups{0};
  asio::signal_set hup(signal_ioc, SIGHUP);
  std::function<void()> arm_hup = [&] {
    hup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      hangups.fetch_add(1, std::memory_order_acq_rel);
      arm_hup();
    });
  };
  arm_hup();
  std::thread signal_thread([&signal_ioc] { signal_ioc.run(); });
  struct SignalThreadJoin {
    asio::io_context* ioc;
    asio::signal_set* set;
    asio::signal_set* hup;
    std::thread* thread;
    ~SignalThreadJoin() {
      asio::post(*ioc, [set = set, hup = hup] {
        set->cancel();
        hup->cancel();
      });
      thread->join();
    }
  } join_signals{&signal_ioc, &signals, &hup, &signal_thread};

  // Refusals at start-up (an unreachable etcd, a prefix holding another application's keys, a newer
  // schema) come from opening the store once, unfenced and read-only in effect, before campaigning.
  {
    auto probe = OpenConfiguredStore(config, std::nullopt);
    if (!probe.ok()) {
      spdlog::error("cannot open the store ({}): {}", DescribeStore(config), probe.status().message());
      return 1;
    }
  }

  // The first follower phase binds the port (port 0: any free one), which every later phase binds again.
  const std::string replica_id = !config.replica_id.empty() ? config.replica_id : [] {
    char name[256] = {};
    (void)::gethostname(name, sizeof(name) - 1);
    return std::string(name) + "-" + std::to_string(::getpid());
  }();
  const DaemonConfig leader_config = LeaderConfig(config);
  std::unique_ptr<Leadership> leadership;
  uint16_t bound = port;
  std::string own_url;
  int exit_code = 0;
  bool port_written = false;
  while (!stop.load(std::memory_order_acquire)) {
    FollowerPhase phase{
        .host = host, .port = bound, .leadership = leadership.get(), .own_url = own_url, .stop = &stop};
    if (!leadership) {
      // Bind once to learn the port, then campaign with the URL it gives: the leader key must carry the
      // URL clients can reach.
      asio::io_context probe_ioc(1);
      auto probe = HttpServer::Start(probe_ioc, host, bound,
                                     [](HttpRequest, Respond respond) { respond(Problem(503, "starting")); });
      if (!probe.ok()) {
        spdlog::error("cannot listen on {}: {}", config.listen, probe.status().message());
        return 1;
      }
      bound = (*probe)->port();
      probe->reset();
      own_url = !config.advertise_url.empty()
                    ? config.advertise_url
                    : "http://" + (host == "0.0.0.0" ? std::string("127.0.0.1") : host) + ":" +
                          std::to_string(bound);
      auto started = Leadership::Start(LeadershipOptions{.endpoints = location.endpoints,
                                                         .prefix = config.store_prefix,
                                                         .replica_id = replica_id,
                                                         .advertise_url = own_url,
                                                         .ttl_s = config.leader_ttl_s});
      if (!started.ok()) {
        spdlog::error("{}", started.status().message());
        return 2;
      }
      leadership = std::move(started).value();
      phase.leadership = leadership.get();
      phase.port = bound;
      phase.own_url = own_url;
    }
    // The port file is written once the replica answers as it will: as a follower that has looked at the
    // leader key, or as the leader serving (ServeTerm writes it then).
    if (!port_written && !config.port_file.empty())
      phase.on_settled = [&config, &port_written, &bound] {
        if (Status s = WritePortFile(config.port_file, bound); !s.ok()) spdlog::error("{}", s.message());
        port_written = true;
      };
    phase.reads = FollowerReadsFor(config, location);
    phase.hangups = &hangups;
    phase.tokens_file = config.tokens_file;
    auto followed = RunFollowerPhase(phase, nullptr);
    if (!followed.ok()) {
      spdlog::error("cannot serve on {}: {}", config.listen, followed.status().message());
      exit_code = 1;
      break;
    }
    if (*followed == FollowerEnd::kStop) break;
    const LeadershipView view = leadership->View();
    if (!view.fence) {  // lost again before the term began
      leadership->EndTerm();
      continue;
    }
    spdlog::info("leader of {} (term {}, fence revision {})", config.store_prefix, view.changes,
                 view.fence->create_revision);
    // A leader's writes wait for an unanswering etcd no longer than its lease lasts (then it has lost
    // leadership anyway), so a deposed term ends within about a TTL even without a quorum.
    EtcdStoreOptions store_options = EtcdOptionsFor(config, location);
    store_options.fence = view.fence;
    store_options.timeout =
        std::chrono::milliseconds(std::max<int64_t>(1000, config.leader_ttl_s * 1000 / 3));
    store_options.unavailable_wait = std::chrono::seconds(config.leader_ttl_s);
    auto store = OpenEtcdStore(store_options);
    if (!store.ok()) {
      spdlog::error("cannot open the store ({}) as leader: {}", DescribeStore(config),
                    store.status().message());
      leadership->EndTerm();
      continue;
    }
    const TermEnd end = ServeTerm(leader_config, TermContext{.store = store->get(),
                                                             .store_name = DescribeStore(config),
                                                             .leadership = leadership.get(),
                                                             .port = bound,
                                                             .write_port_file = !port_written});
    port_written = true;
    store->reset();
    leadership->EndTerm();
    if (!end.deposed) {
      exit_code = end.exit_code;
      break;
    }
  }
  if (leadership) leadership->Stop();  // the lease is revoked: another replica leads without waiting
  spdlog::info("shepherdd stopped (exit {})", exit_code);
  return exit_code;
}

}  // namespace shepherd
