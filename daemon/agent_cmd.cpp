// shepherdd agent: a node agent (agent/, docs/agent-protocol.md). Exit codes: 0 after SIGTERM/SIGINT,
// 2 for bad flags, 1 when the agent cannot start (unusable state dir). On SIGTERM/SIGINT the agent stops
// itself and leaves the rank processes running: ranks outlive agent restarts, and the next agent on the
// same --state-dir adopts them. Ranks are stopped only when the daemon withdraws their assignment.
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "net/http_client.h"
#include "agent/protocol.h"
#include "core/open_files.h"
#include "daemon/commands.h"
#include "daemon/config.h"

namespace po = boost::program_options;

namespace shepherd {
namespace {

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace

int RunAgent(int argc, char** argv) {
  agent::AgentOptions o;
  std::string topology, log_level = "info";
  double heartbeat_s = 1, grace_s = 10, memory_gib = 0, check_interval_s = 60, check_timeout_s = 60;
  int wait_s = 30;
  po::options_description opts(
      "Usage: shepherdd agent --server URL[,URL...] --node-id ID --gpus N [options]\n"
      "A node agent: registers the node, heartbeats, and runs the rank processes the daemon assigns. "
      "Options");
  opts.add_options()("help,h", "show this help")(
      "server", po::value<std::string>(&o.server)->required(),
      "daemon URL, or the replicas' URLs comma-separated, e.g. http://10.0.0.1:8080,http://10.0.0.2:8080; "
      "a call fails over to the next and follows redirects to the leader")(
      "node-id", po::value<std::string>(&o.node_id)->required(), "this node's id")(
      "gpus", po::value<int>(&o.gpus)->required(), "GPU count")(
      "topology", po::value<std::string>(&topology),
      "level=value,... e.g. spine=s0,leaf=l03,nvlink_domain=r7")("spare", po::bool_switch(&o.spare),
                                                                 "register the node as a hot spare")(
      "hostname", po::value<std::string>(&o.hostname), "hostname to register [gethostname()]")(
      "state-dir", po::value<std::string>(&o.state_dir),
      "processes.json, logs/, gpu_faults.json [./var/agent-<id>]")(
      "heartbeat-interval", po::value<double>(&heartbeat_s), "seconds between heartbeats [1]")(
      "stop-grace", po::value<double>(&grace_s), "seconds from SIGTERM to SIGKILL when stopping a rank [10]")(
      "long-poll-wait", po::value<int>(&wait_s), "seconds the daemon may hold an assignments poll [30]")(
      "token-file", po::value<std::string>(),
      "file holding this agent's bearer token (role agent, bound to --node-id); default: $SHEPHERD_TOKEN")(
      "token", po::value<std::string>(), "refused: tokens are never taken from argv")(
      "run-as", po::value<std::vector<std::string>>()->composing(),
      "user (name or uid) the ranks run as; the agent drops to it. Repeat it (or give a comma-separated "
      "list) to let the daemon's run_as mapping pick among these users per job; the first is the default")(
      "allow-root-ranks", po::bool_switch(), "let ranks run as root (refused by default)")(
      "gpu-memory-gib", po::value<double>(&memory_gib), "GiB per GPU to register")(
      "gpu-model", po::value<std::string>(), "GPU model to register, e.g. H100")(
      "health-check", po::value<std::string>(&o.health_check),
      "the site's node health check, run with /bin/sh -c; exit 0 passes")(
      "health-check-interval", po::value<double>(&check_interval_s), "seconds between health checks [60]")(
      "health-check-timeout", po::value<double>(&check_timeout_s), "seconds before a check is killed [60]")(
      "log-level", po::value<std::string>(&log_level), "trace, debug, info, warn, error [info]");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "shepherdd agent: " << e.what() << "\n" << opts << "\n";
    return 2;
  }
  Result<std::map<std::string, std::string>> topo = agent::ParseTopologyFlag(topology);
  if (!topo.ok()) {
    std::cerr << "shepherdd agent: " << topo.status().message() << "\n";
    return 2;
  }
  if (heartbeat_s <= 0 || grace_s < 0 || wait_s < 0 || (vm.count("gpu-memory-gib") && memory_gib <= 0) ||
      check_interval_s <= 0 || check_timeout_s <= 0) {
    std::cerr << "shepherdd agent: intervals must be positive, grace and wait not negative\n";
    return 2;
  }
  if (vm.count("token")) {
    std::cerr << "shepherdd agent: --token is refused: argv is visible to every local user (ps). Use "
                 "--token-file FILE (mode 0600) or SHEPHERD_TOKEN in the environment\n";
    return 2;
  }
  if (vm.count("token-file")) {
    o.token_file = vm["token-file"].as<std::string>();
    auto t = net::ReadTokenFile(o.token_file);
    if (!t.ok()) {
      std::cerr << "shepherdd agent: " << t.status().message() << "\n";
      return 2;
    }
    o.token = *t;
  } else if (const char* env = std::getenv("SHEPHERD_TOKEN")) {
    o.token = env;
    ::unsetenv("SHEPHERD_TOKEN");  // ranks get their own credential, never the agent's
  }
  if (vm.count("run-as")) {
    for (const std::string& arg : vm["run-as"].as<std::vector<std::string>>()) {
      std::size_t from = 0;
      while (from <= arg.size()) {
        std::size_t comma = std::min(arg.find(',', from), arg.size());
        std::string name = arg.substr(from, comma - from);
        from = comma + 1;
        if (name.empty()) continue;
        auto u = agent::LookUpUser(name);
        if (!u.ok()) {
          std::cerr << "shepherdd agent: --run-as: " << u.status().message() << "\n";
          return 2;
        }
        if (::geteuid() != 0 && u->uid != ::geteuid()) {
          std::cerr << "shepherdd agent: --run-as " << u->user
                    << " needs the agent to run as root (or with CAP_SETUID and CAP_SETGID)\n";
        }
        if (u->uid == 0 && !vm["allow-root-ranks"].as<bool>()) {
          std::cerr << "shepherdd agent: --run-as " << u->user
                    << ": ranks would run as root; pass --allow-root-ranks if the site really wants that\n";
          return 2;
        }
        o.allowed_run_as.push_back(std::move(u).value());
      }
    }
    if (!o.allowed_run_as.empty()) o.run_as = o.allowed_run_as.front();
  }
  const bool ranks_as_root = o.run_as ? o.run_as->uid == 0 : ::geteuid() == 0;
  if (ranks_as_root && !vm["allow-root-ranks"].as<bool>()) {
    std::cerr << "shepherdd agent: ranks would run as root; pass --run-as USER (see deploy/), or "
                 "--allow-root-ranks if the site really wants that\n";
    return 2;
  }
  o.topology = std::move(*topo);
  o.heartbeat_interval = Millis(heartbeat_s);
  o.stop_grace = Millis(grace_s);
  o.long_poll_wait = std::chrono::seconds(wait_s);
  o.health_check_interval = Millis(check_interval_s);
  o.health_check_timeout = Millis(check_timeout_s);
  if (vm.count("gpu-memory-gib")) o.gpu_memory_gib = memory_gib;
  if (vm.count("gpu-model")) o.gpu_model = vm["gpu-model"].as<std::string>();
  if (!ValidLogLevel(log_level)) {
    std::cerr << "shepherdd agent: --log-level " << log_level
              << ": must be one of trace, debug, info, warn, error, critical, off\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));

  // Block the stop signals before any thread exists, so every thread inherits the mask and only sigwait
  // below receives them. Rank processes get an empty mask (agent/process.h).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // Rank pipes, logs and the daemon connections are descriptors: the soft limit goes up to the hard one
  // (ranks inherit it), and the log says what the agent has.
  spdlog::info("agent: {}", Describe(RaiseOpenFilesLimit()));
  o.fence_keeper = true;  // no other thread exists yet, and this one lives until the agent exits
  Result<std::unique_ptr<agent::Agent>> a = agent::Agent::Create(std::move(o));
  if (!a.ok()) {
    std::cerr << "shepherdd agent: " << a.status().message() << "\n";
    return a.status().code() == Code::kInvalidArgument ? 2 : 1;
  }
  agent::Agent& the_agent = **a;
  std::thread runner([&] { the_agent.Run(); });
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("agent: signal {}: stopping (rank processes keep running)", sig);
  the_agent.Stop();
  runner.join();
  return 0;
}

}  // namespace shepherd
