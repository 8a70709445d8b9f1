// The daemon process on four threads: the control thread (this one) runs the controller, the router and
// the handlers of writes, signals and ticks on `ioc`, holding the ControlLock exclusively for each function
// it runs (control/control_lock.h); the I/O thread runs the HTTP server on `io_ioc` and its FrontDoor, which
// answers probes itself and feeds the bounded RequestQueues; the reader thread runs read routes on
// `read_ioc`, holding the ControlLock shared for each; the planner thread (api/plan_runner.h) runs planner
// searches, which touch no controller state. (The store's writer and the Slurm workers have their own
// threads and reach the controller only by posting to the control thread.)
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "api/front_door.h"
#include "api/handlers.h"
#include "api/http_server.h"
#include "api/plan_runner.h"
#include "core/open_files.h"
#include "daemon/overload.h"
#include "daemon/commands.h"
#include "daemon/follower.h"
#include "daemon/leadership.h"
#include "daemon/remediation_hook.h"
#include "daemon/serve_term.h"
#include "daemon/slurm_job_asker.h"
#include "daemon/slurm_launch_worker.h"
#include "daemon/slurm_sync_worker.h"
#include "daemon/store_open.h"
#include "daemon/webhooks.h"

namespace asio = boost::asio;

namespace shepherd {
namespace {

constexpr int kReaderNice = 10;  // the reader thread's nice value (lower priority than the other threads)
constexpr std::size_t kPlannerCapacity = 16;  // planner searches waiting or running (429 beyond)
constexpr std::size_t kSimulatorCapacity = 4;  // simulations waiting or running (429 beyond)

}  // namespace

Status WritePortFile(const std::string& path, uint16_t port) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out) return Internal("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp + ": " + ec.message());
  return Status::Ok();
}

namespace {

// Connections are file descriptors: a connection cap above the open-files limit is never reached, so the
// eviction of untrusted connections it drives never runs and accept() fails instead (EMFILE: agents'
// heartbeats and health probes refused while a flood holds every descriptor). The soft limit is raised to
// the hard one; a cap the hard limit still cannot hold is lowered to fit, less what the daemon needs
// besides (the database and its journal, logs, the Slurm worker's pipes, the probe reserve), with a warning.
std::size_t FitConnectionsToOpenFiles(std::size_t wanted, std::size_t probe_reserve) {
  constexpr std::size_t kBesidesConnections = 256;
  const OpenFilesLimit limit = RaiseOpenFilesLimit();
  spdlog::info("{}", Describe(limit));
  const std::size_t fit = ConnectionsThatFit(limit, wanted, kBesidesConnections + probe_reserve);
  if (fit < wanted)
    spdlog::warn(
        "max_connections {} is more than the open-files limit ({}) can hold: serving at most {} connections "
        "(raise the hard limit, e.g. LimitNOFILE= in the unit, to allow more; each node agent holds 2)",
        wanted, limit.soft, fit);
  return fit;
}

// Registers the inventory file's nodes through the controller (durably) before serving. A node the file
// would change in a way its running ranks forbid (a GPU count that shrinks, another leaf: kConflict) keeps
// its stored record, with an error in the log: refusing to start would leave every agent without its lease
// and stop every rank of the fleet. For the same reason a file that does not load (missing, not JSON, an
// invalid node) leaves the stored inventory whole, with the error in the log, once there is one; on a first
// start (no stored nodes) it stops the start. The store failing stops the start.
Status LoadInventory(const DaemonConfig& config, Controller* controller, Store* store, asio::io_context* ioc,
                     const std::function<bool()>& held) {
  auto nodes = LoadInventoryFile(config.inventory, config.controller.levels);
  if (!nodes.ok()) {
    controller->AssertReadable();  // start-up, on the control thread
    const std::size_t stored = controller->view().node_count();
    if (stored == 0) return nodes.status();
    spdlog::error("inventory {} not applied, the {} stored nodes kept as they are: {}", config.inventory,
                  stored, nodes.status().message());
    return Status::Ok();
  }
  Status first_error;
  size_t pending = nodes->size(), kept = 0;
  for (auto& [node, schedulable_given] : *nodes) {
    std::string id = node.id;
    controller->UpsertNode(std::move(node), schedulable_given, [&, id](Result<NodeUpsert> r) {
      --pending;
      if (r.ok()) return;
      if (r.status().code() == Code::kConflict) {
        ++kept;
        spdlog::error("inventory {}: node {} kept as stored: {} (apply the change once its ranks are gone)",
                      config.inventory, id, r.status().message());
      } else if (first_error.ok()) {
        first_error = Status(r.status().code(), "node " + id + ": " + r.status().message());
      }
    });
  }
  while (pending > 0) {
    if (!held()) return Unavailable("leadership lost while loading the inventory");
    store->Flush();
    ioc->restart();
    ioc->poll();
  }
  ioc->restart();  // poll() left the io_context stopped; run() must not return at once
  if (first_error.ok())
    spdlog::info("inventory {}: {} nodes registered, {} kept as stored", config.inventory,
                 nodes->size() - kept, kept);
  return first_error;
}

}  // namespace

// The daemon's whole path over an open store: recover, serve, tick, until SIGTERM/SIGINT, a storage failure,
// or (with leadership) the end of this replica's term. A deposed leader does nothing more: every function
// the control thread runs and every tick first checks leadership->HeldAt(now), and when it no longer holds,
// runs nothing, stops serving at once (no drain; what waits is answered 503 or dropped) and returns.
TermEnd ServeTerm(const DaemonConfig& config, const TermContext& term) {
  const std::string host = [&] {
    std::string h;
    uint16_t p = 0;
    (void)SplitHostPort(config.listen, &h, &p);
    return h;
  }();
  const uint16_t port = term.port;
  Store* const store_ptr = term.store;
  Leadership* const leadership = term.leadership;
  using Steady = std::chrono::steady_clock;
  // Whether this process may act now: always for the only daemon; while the lease holds for a replica.
  const std::function<bool()> held = [leadership] {
    return leadership == nullptr || leadership->HeldAt(Steady::now());
  };
  bool deposed = false;
  std::function<void()> depose;  // set once the server exists; runs on the control thread
  asio::io_context ioc(1);
  SystemClock clock;
  ControllerOptions controller_options = config.controller;
  controller_options.late_after_s = std::max(config.lateness_threshold_s, 2 * config.tick_interval_s);
  controller_options.master_port_salt = std::random_device{}();
  controller_options.slurm = config.slurm.enabled;
  // Created after the controller (it drives it); requeues reach it only from the control thread, which
  // runs once ioc.run() starts, after it exists.
  std::unique_ptr<SlurmSyncWorker> slurm_sync;
  if (config.slurm.enabled)
    controller_options.slurm_requeue = [&slurm_sync](const Job& job, const Finding& f) {
      slurm_sync->Requeue(job.spec.external_id, job.spec.owner, f);
    };
  if (!config.remediation_hook.empty())
    controller_options.remediation_hook = MakeProcessHook(config.remediation_hook);
  // Credentials (docs/security.md). Static tokens from the file; rank tokens from the controller.
  Authenticator authenticator;
  if (!config.tokens_file.empty()) {
    auto tokens = LoadTokensFile(config.tokens_file);
    if (!tokens.ok()) {
      spdlog::error("{}", tokens.status().message());
      return {.exit_code = 2};
    }
    if (tokens->empty()) {
      spdlog::error("tokens file {} lists no token", config.tokens_file);
      return {.exit_code = 2};
    }
    spdlog::info("auth: {} tokens from {}", tokens->size(), config.tokens_file);
    authenticator.SetStatic(std::move(tokens).value());
  } else {
    spdlog::warn("auth is OFF: no --tokens-file, every client is admin. Do not expose {} beyond this host",
                 config.listen);
  }
  // Everything posted to the control thread runs holding the lock exclusively: reads on the reader thread
  // see the controller between two operations, never inside one.
  // Each hold is timed (shepherd_control_hold_seconds): no request may hold the control thread for long.
  ControlLock control_lock;
  Metrics metrics;
  // A replica runs nothing once its lease may have expired (a SIGSTOPped leader resumed after its TTL
  // checks here before anything else).
  const Post post = [&ioc, &control_lock, &metrics, &held, &depose](std::function<void()> fn) {
    asio::post(ioc, [&control_lock, &metrics, &held, &depose, fn = std::move(fn)] {
      if (!held()) {
        if (depose) depose();
        return;
      }
      std::unique_lock hold(control_lock);
      const auto start = Steady::now();
      fn();
      metrics.ObserveControlHold(std::chrono::duration<double>(Steady::now() - start).count());
    });
  };
  Controller controller(store_ptr, &clock, post, controller_options);
  // Webhooks (daemon/webhooks.h): fed each durable batch's events on the control thread, never blocking it.
  std::unique_ptr<WebhookSender> webhooks;
  if (!config.webhooks.empty()) {
    auto started = WebhookSender::Start(config.webhooks);
    if (!started.ok()) {
      spdlog::error("{}", started.status().message());
      return {.exit_code = 2};
    }
    webhooks = std::move(started).value();
    controller.set_on_events([&webhooks](const std::vector<Event>& events) { webhooks->Offer(events); });
    metrics.AddSource([&webhooks](std::string* out) {
      *out += "# HELP shepherd_webhook_deliveries_total Webhook deliveries by result.\n"
              "# TYPE shepherd_webhook_deliveries_total counter\n";
      for (const auto& [result, n] : webhooks->Counts())
        *out += "shepherd_webhook_deliveries_total{result=\"" + result + "\"} " + std::to_string(n) + "\n";
    });
    spdlog::info("webhooks: {} configured", config.webhooks.size());
  }
  if (leadership) {
    metrics.AddSource(
        [leadership](std::string* out) { *out += LeadershipMetrics(leadership->View(), true); });
  }
  metrics.AddSource([](std::string* out) {
    *out += "# HELP shepherd_store_staged_batches_total Writes larger than one etcd transaction, committed "
            "through the store's stage area.\n# TYPE shepherd_store_staged_batches_total counter\n"
            "shepherd_store_staged_batches_total " +
            std::to_string(EtcdStagedBatchesTotal()) + "\n";
  });
  if (Status s = controller.Recover(config.salvage); !s.ok()) {
    spdlog::error("recovering state from {} failed: {}", term.store_name, s.message());
    if (!held()) return {.deposed = true};
    return {.exit_code = 1};
  }
  store_ptr->Flush();  // the new epoch is durable before any agent sees a version derived from it
  if (!config.inventory.empty()) {
    if (Status s = LoadInventory(config, &controller, store_ptr, &ioc, held); !s.ok()) {
      spdlog::error("{}", s.message());
      if (!held()) return {.deposed = true};
      return {.exit_code = 1};
    }
  }
  if (!held()) {
    spdlog::warn("leadership lost while recovering: following again");
    return {.deposed = true};
  }

  Router router(&metrics);
  ApiOptions api_options;
  api_options.job_policy = config.job_policy;
  api_options.quotas = config.quotas;
  // Planner searches on their own thread (api/plan_runner.h); stopped below, once the server has drained.
  auto planner = std::make_unique<PlanRunner>(kPlannerCapacity);
  api_options.planner = planner.get();
  // Simulations on a runner of their own (POST /v1/simulate; api/handlers_simulate.cpp).
  std::atomic<bool> stop_simulations{false};  // before the runner: it outlives the runner's thread
  auto simulator = std::make_unique<PlanRunner>(kSimulatorCapacity);
  api_options.simulator = simulator.get();
  api_options.simulation_cancel = &stop_simulations;
  api_options.post_control = post;
  // Binding a Slurm job id asks Slurm whose job it is, on the asker's thread (stopped below).
  std::unique_ptr<SlurmJobAsker> slurm_asker;
  if (config.slurm.enabled) {
    slurm_asker = std::make_unique<SlurmJobAsker>(config.slurm, post);
    api_options.show_slurm_job = [asker = slurm_asker.get()](
                                     const std::string& id,
                                     std::function<void(Result<slurm::SlurmJob>)> done) {
      asker->Ask(id, std::move(done));
    };
  }
  api_options.slurm_users = config.slurm.users;
  api_options.ui_dir = config.ui_dir;
  if (config.ui_dir.empty()) spdlog::warn("no dashboard files found: /ui/ answers 503 (--ui-dir names them)");
  RegisterRoutes(&router, &controller, &metrics, api_options, &clock);
  InstallAuth(&router, &controller, &authenticator);
  HttpServerOptions http;
  http.max_connections = FitConnectionsToOpenFiles(config.max_connections, http.probe_reserve);
  http.max_connections_per_address = std::min(config.max_connections_per_address, http.max_connections);
  Shedding shedding;
  metrics.AddSource([&shedding](std::string* out) { shedding.AppendMetrics(out); });
  http.on_shed = [&shedding](ShedReason r) { shedding.Count(r); };
  // Judged on the I/O thread only (its one owner).
  auto flood = std::make_shared<FloodLimits>(FloodLimitOptions{
      .heartbeats_per_node_s = config.heartbeats_per_node_s, .reports_per_rank_s = config.reports_per_rank_s});
  http.body_budget = config.body_budget;
  http.max_connections_per_identity = config.max_connections_per_identity;
  http.body_reserve_liveness = config.body_reserve_liveness;
  http.body_share_per_identity = config.body_share_per_identity;
  http.body_share_low_role = config.body_share_low_role;
  http.body_budget_low_roles = config.body_budget_low_roles;
  http.body_min_rate = config.body_min_rate;
  http.body_rate_grace = std::chrono::milliseconds(static_cast<long>(config.body_rate_grace_s * 1000));
  http.read_timeout = std::chrono::milliseconds(static_cast<long>(config.read_timeout_s * 1000));
  // Runs on the I/O thread: authentication and the route table only (ownership is rechecked by Handle).
  http.on_head = [&router, &authenticator, &shedding, flood, shared_rank_cap = config.max_connections_per_rank_token,
                  rank_cap = config.max_connections_per_rank](const HttpRequest& head) {
    HeadDecision d;
    std::optional<Principal> principal;
    d.refuse = router.Admit(head, &principal, /*defer_ownership=*/true);
    d.trusted = principal.has_value() && authenticator.enabled();
    const std::string path = PathOf(head.target);
    std::map<std::string, std::string> params;
    bool known = false;
    const RouteRule* rule = FindRouteRule(head.method, path, &params, &known);
    d.is_public = rule && rule->is_public;
    if (d.trusted) d.identity = IdentityOf(*principal, head.Header("Authorization"));
    // A token naming one rank serves one client; a token for any rank may be shared by all of a job's.
    if (d.trusted && principal->role == Role::kRank)
      d.max_connections = principal->rank ? rank_cap : shared_rank_cap;
    d.body_class = BodyClassOf(principal, authenticator.enabled(), QueueOf(rule, head.method));
    if (!d.refuse && rule) {
      d.refuse = flood->Judge(*rule, params, principal, std::chrono::steady_clock::now());
      if (d.refuse) shedding.Count(ShedReason::kRateLimited);
    }
    return d;
  };
  http.body_limit = config.body_limit;
  http.header_limit = config.header_limit;
  http.idle_timeout = std::chrono::milliseconds(static_cast<long>(config.idle_timeout_s * 1000));
  // What the server turns away for its own capacity (shedding, above) is not its senders' silence: the
  // next tick counts the daemon as not listening (health/lateness.h).
  http.on_rejected = [&metrics](int status) { metrics.ObserveRequest("rejected", "", status, 0); };
  asio::io_context io_ioc(1);
  std::atomic<bool> ready{controller.ready()};
  RequestQueue queue(config.queues, post);
  asio::io_context read_ioc(1);
  auto read_work = asio::make_work_guard(read_ioc);
  RequestQueue reads(config.queues,
                     [&read_ioc](std::function<void()> fn) { asio::post(read_ioc, std::move(fn)); });
  // Large request bodies are parsed on their own thread (api/front_door.h), off the I/O and control threads.
  asio::io_context parse_ioc(1);
  auto parse_work = asio::make_work_guard(parse_ioc);
  FrontDoorOptions front_options;
  front_options.test_hooks = config.test_hooks;
  front_options.json_limits = api_options.json_limits;
  front_options.parse_on = [&parse_ioc](std::function<void()> fn) { asio::post(parse_ioc, std::move(fn)); };
  if (leadership) {
    front_options.role = "leader";
    front_options.leads = held;
  }
  if (config.test_hooks) spdlog::warn("test_hooks is on: POST /test/block-control is served. Tests only");
  FrontDoor front(&queue, &reads, &control_lock, &router, &ready, front_options,
                  [&metrics, &shedding](std::string route, std::string method, int status) {
                    // A full request queue turns away whoever was speaking: the daemon's own capacity.
                    if (status == 429 && route.size() > 6 && route.compare(route.size() - 6, 6, " queue") == 0)
                      shedding.Count(ShedReason::kQueueFull);
                    metrics.ObserveRequest(route, method, status, 0);
                  });
  auto server = HttpServer::Start(
      io_ioc, host, port,
      [&front](HttpRequest req, Respond respond) { front.Handle(std::move(req), std::move(respond)); }, http);
  for (int i = 0; !server.ok() && leadership && i < 100 && held(); ++i) {
    // The follower's socket may linger a moment: the port is this replica's, bind it again.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server = HttpServer::Start(
        io_ioc, host, port,
        [&front](HttpRequest req, Respond respond) { front.Handle(std::move(req), std::move(respond)); },
        http);
  }
  if (!server.ok()) {
    spdlog::error("cannot listen on {}: {}", config.listen, server.status().message());
    return {.exit_code = 1};
  }
  uint16_t bound = (*server)->port();
  // Ranks get every replica's URL when the daemon knows them (client_urls), else its own.
  controller.set_advertise_url(!config.client_urls.empty() ? config.client_urls
                               : !config.advertise_url.empty()
                                   ? config.advertise_url
                                   : "http://" + (host == "0.0.0.0" ? std::string("127.0.0.1") : host) + ":" +
                                         std::to_string(bound));
  // Before anyone can know the daemon is up (the log line, the port file): a SIGTERM from then on is a
  // drain, never the default action (a test saw exit 143 when it came right after the port file).
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  asio::signal_set hup(ioc, SIGHUP);
  spdlog::info("shepherdd {} on {}:{} (store {})", leadership ? "leading" : "listening", host, bound,
               term.store_name);
  if (!config.port_file.empty() && term.write_port_file) {
    if (Status s = WritePortFile(config.port_file, bound); !s.ok()) {
      spdlog::error("{}", s.message());
      return {.exit_code = 1};
    }
  }

  // The control thread keeps running until the server has drained (its requests need the controller).
  auto control_work = asio::make_work_guard(ioc);
  std::thread io_thread([&io_ioc] { io_ioc.run(); });
  std::thread parse_thread([&parse_ioc] { parse_ioc.run(); });
  std::thread read_thread([&read_ioc] {
    // Reads yield the CPU to ingestion: where the threads share a core, the scheduler gives the reader
    // about a tenth of it while the control thread has work (Linux's per-thread nice; failure is harmless).
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kReaderNice);
    read_ioc.run();
  });
  int exit_code = 0;
  bool stopping = false;
  asio::steady_timer ticker(ioc);
  auto tick_interval = std::chrono::milliseconds(static_cast<long>(config.tick_interval_s * 1000));
  // Lateness (health/lateness.h): how late each tick fires, and how long a probe posted by the previous
  // tick waited in the control thread's queue.
  Duration queue_age{};
  std::function<void()> schedule_tick = [&] {
    ticker.expires_after(tick_interval);
    ticker.async_wait([&](const boost::system::error_code& ec) {
      if (ec || stopping) return;
      if (!held()) return depose();
      Duration lag = std::chrono::duration_cast<Duration>(Steady::now() - ticker.expiry());
      {
        std::unique_lock hold(control_lock);
        const auto start = Steady::now();
        controller.ObserveLateness(lag, queue_age, shedding.TakeOwnCapacity());
        controller.Tick();
        metrics.ObserveControlHold(std::chrono::duration<double>(Steady::now() - start).count());
      }
      asio::post(ioc, [&queue_age, posted = Steady::now()] {
        queue_age = std::chrono::duration_cast<Duration>(Steady::now() - posted);
      });
      schedule_tick();
    });
  };
  schedule_tick();
  // Leadership is watched on the control thread too, so a lost lease stops serving even when nothing else
  // runs; `grace` 0 for a deposed leader: no drain, long polls and all are cut off at once.
  asio::steady_timer watch(ioc);
  std::function<void()> stop_with;
  auto stop = [&](int code, const std::string& why) {
    if (stopping) return;
    stopping = true;
    exit_code = code;
    spdlog::info("shutting down: {}", why);
    ready.store(false, std::memory_order_release);
    watch.cancel();
    front.Stop();  // what still waits in a queue is answered 503, not run: no long queue delays the exit
    stop_simulations = true;  // a simulation in progress answers 503 at its next event: the drain needs no wait
    signals.cancel();
    hup.cancel();
    ticker.cancel();
    post([&controller] { controller.ReleaseWaiters(); });  // stop may run inside a locked operation
    auto grace = deposed ? std::chrono::milliseconds(0)
                         : std::chrono::milliseconds(static_cast<long>(config.shutdown_grace_s * 1000));
    (*server)->Shutdown(grace, [&ioc, &control_work] {
      spdlog::info("all connections drained");
      asio::post(ioc, [&control_work] { control_work.reset(); });
    });
  };
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (!ec) stop(0, sig == SIGTERM ? "SIGTERM" : "SIGINT");
  });
  depose = [&] {
    if (stopping) return;
    deposed = true;
    stop(0, "leadership lost: this replica follows again");
  };
  std::function<void()> watch_leadership = [&] {
    watch.expires_after(std::chrono::milliseconds(50));
    watch.async_wait([&](const boost::system::error_code& ec) {
      if (ec || stopping) return;
      if (!held()) return depose();
      watch_leadership();
    });
  };
  if (leadership) watch_leadership();
  // SIGHUP re-reads the tokens file; an invalid file keeps the current set (and says why).
  std::function<void()> wait_hup = [&] {
    hup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec || stopping) return;
      if (config.tokens_file.empty()) {
        spdlog::warn("SIGHUP: no --tokens-file to reload");
      } else if (auto tokens = LoadTokensFile(config.tokens_file); !tokens.ok()) {
        spdlog::error("SIGHUP: keeping the current {} tokens: {}", authenticator.static_count(),
                      tokens.status().message());
      } else if (tokens->empty()) {
        spdlog::error("SIGHUP: keeping the current tokens: {} lists none", config.tokens_file);
      } else {
        spdlog::info("SIGHUP: {} tokens loaded from {}", tokens->size(), config.tokens_file);
        authenticator.SetStatic(std::move(tokens).value());
        // Held long polls are answered now, as at their deadline: one whose token was withdrawn gets its
        // 401 at once (the router checks again as the answer leaves), the others simply poll again.
        post([&controller] { controller.ReleaseWaiters(); });
      }
      wait_hup();
    });
  };
  wait_hup();
  controller.set_on_storage_failure([&](const Status& s) {
    ready.store(false, std::memory_order_release);
    if (leadership) {
      // A fenced write that failed (another replica leads) or etcd failing: this term ends; the replica
      // follows and campaigns again once etcd answers.
      spdlog::error("storage failure: {}", s.message());
      leadership->Relinquish();
      return depose();
    }
    stop(1, "storage failure: " + s.message());
  });
  std::unique_ptr<SlurmLaunchWorker> slurm_launch;
  if (config.slurm.enabled && held()) {
    slurm_sync = std::make_unique<SlurmSyncWorker>(config.slurm, config.controller.levels, &controller, post);
    slurm_sync->Start();
    SlurmConfig launch = config.slurm;
    if (launch.step_log_dir.empty())
      launch.step_log_dir = std::filesystem::path(config.db).parent_path().append("slurm-steps").string();
    slurm_launch = std::make_unique<SlurmLaunchWorker>(launch, &controller, post);
    slurm_launch->Start();
  }

  ioc.run();
  io_thread.join();
  parse_work.reset();  // bodies still being parsed are answered 503 (their sessions are gone)
  parse_thread.join();
  read_work.reset();  // the reads the I/O thread queued run (their sessions are gone; nothing is sent)
  read_thread.join();
  simulator.reset();
  planner.reset();  // the search in progress ends; its answer, if any, is posted and run below
  if (slurm_launch) slurm_launch->Stop();
  if (slurm_sync) slurm_sync->Stop();
  if (slurm_asker) slurm_asker->Stop();  // questions still waiting are answered 503 below
  // Requests the I/O thread queued while draining: answer them (their sessions are gone; nothing is sent).
  ioc.restart();
  ioc.poll();
  // Every acknowledged write is already durable; let queued background writes finish too (a deposed
  // leader's fail: they are fenced).
  store_ptr->Flush();
  ioc.restart();
  ioc.poll();
  if (webhooks) webhooks->Stop();
  if (deposed) {
    spdlog::info("term ended: leadership lost");
    return {.deposed = true};
  }
  spdlog::info("shepherdd stopped (exit {})", exit_code);
  return {.exit_code = exit_code};
}

int RunDaemon(const DaemonConfig& config) {
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  std::string host;
  uint16_t port = 0;
  if (Status s = SplitHostPort(config.listen, &host, &port); !s.ok()) {
    spdlog::error("{}", s.message());
    return 2;
  }
  auto location = ConfiguredStore(config);
  if (!location.ok()) {
    spdlog::error("{}", location.status().message());
    return 2;
  }
  if (location->kind == StoreLocation::Kind::kEtcd) return RunReplica(config, *location);
  auto store = OpenConfiguredStore(config);
  if (!store.ok()) {
    spdlog::error("cannot open the store: {}", store.status().message());
    return 1;
  }
  return ServeTerm(config,
                   TermContext{.store = store->get(), .store_name = DescribeStore(config), .port = port})
      .exit_code;
}

}  // namespace shepherd
