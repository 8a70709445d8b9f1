// shepherdd: the daemon (default), `shepherdd agent ...` (a node agent), `shepherdd gen-inventory ...` and
// `shepherdd simulate ...` (predicts a run's ETTR), `shepherdd store export|import ...` (moves a store's
// records).
#include <boost/program_options.hpp>
#include <iostream>

#include "api/route_table.h"
#include "daemon/commands.h"
#include "daemon/config.h"
#include "daemon/log_format.h"
#include "daemon/options.h"
#include "net/endpoint_list.h"

namespace po = boost::program_options;
using namespace shepherd;

namespace {

int Serve(int argc, char** argv) {
  DaemonConfig config;
  std::string config_file;
  po::options_description opts(
      "Usage: shepherdd [options]\n"
      "       shepherdd gen-inventory --help\n\n"
      "The Shepherd control-plane daemon. Options");
  opts.add_options()("help,h", "show this help")(
      "listen", po::value<std::string>(),
      "HOST:PORT to serve HTTP on (port 0: any free port) [127.0.0.1:8080]")(
      "db", po::value<std::string>(),
      "SQLite database file [./var/shepherd.db]; same as --store sqlite://PATH")(
      "store", po::value<std::string>(),
      "where state is kept: sqlite://PATH (the embedded default) or etcd://HOST:PORT[,HOST:PORT...] "
      "(replicated; docs/operations.md)")("store-prefix", po::value<std::string>(),
                                          "key prefix in etcd [/shepherd]")(
      "inventory", po::value<std::string>(),
      "JSON file {\"nodes\": [...]} loaded (registered/updated) at start-up")(
      "config", po::value<std::string>(&config_file), "JSON configuration file (flags override it)")(
      "port-file", po::value<std::string>(), "file that receives the bound port once listening")(
      "advertise-url", po::value<std::string>(),
      "this daemon's URL as ranks and agents reach it (config advertise_url) [http://<listen>]")(
      "tokens-file", po::value<std::string>(),
      "JSON file of bearer tokens and their roles (mode 0600; re-read on SIGHUP); none: no auth")(
      "token", po::value<std::vector<std::string>>(), "refused: tokens are never taken from argv")(
      "ui-dir", po::value<std::string>(),
      "directory of the dashboard's files served at /ui/ [the installed share/shepherd/ui]")(
      "log-level", po::value<std::string>(), "trace, debug, info, warn, error [info]")(
      "client-urls", po::value<std::string>(),
      "URL[,URL...]: every replica's URL, handed to ranks as SHEPHERD_URL so they fail over between "
      "replicas (config \"client_urls\") [the advertise URL]")(
      "salvage", "start even if stored records cannot be decoded: move them aside (records_quarantine)")(
      "slurm",
      "take the inventory from the Slurm cluster SLURM_CONF names and keep it in sync (docs/slurm.md)")(
      "leader-ttl-s", po::value<long>(),
      "with an etcd store: the leader lease's TTL in seconds, at least 2 [5]")(
      "replica-id", po::value<std::string>(), "with an etcd store: this replica's name [<hostname>-<pid>]")(
      "follower-read-max-age-s", po::value<double>(),
      "with an etcd store: a follower serves reads of durable state no older than this; 0: it redirects "
      "them to the leader [1]");
  po::variables_map vm;
  if (!ParseOnlyOptions(argc, argv, opts, &vm, "shepherdd", " (the daemon takes only options)")) return 2;
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (!config_file.empty()) {
    if (Status s = LoadConfigFile(config_file, &config); !s.ok()) {
      std::cerr << "shepherdd: " << s.message() << "\n";
      return 2;
    }
  }
  if (vm.count("listen")) config.listen = vm["listen"].as<std::string>();
  if (vm.count("db")) config.db = vm["db"].as<std::string>();
  if (vm.count("store")) config.store = vm["store"].as<std::string>();
  if (vm.count("store-prefix")) config.store_prefix = vm["store-prefix"].as<std::string>();
  if (Result<StoreLocation> loc = ConfiguredStore(config); !loc.ok()) {
    std::cerr << "shepherdd: " << loc.status().message() << "\n";
    return 2;
  } else if (loc->kind == StoreLocation::Kind::kSqlite) {
    // Two different databases named: which one is meant cannot be guessed.
    if (vm.count("db") && vm.count("store") && loc->path != vm["db"].as<std::string>()) {
      std::cerr << "shepherdd: --db " << vm["db"].as<std::string>() << " and --store " << config.store
                << " name different databases; give one (--store sqlite://PATH is --db PATH)\n";
      return 2;
    }
    config.db = loc->path;  // the database's directory also holds slurm-steps/ by default
  }
  // With etcd, --db names no state: only where slurm-steps/ goes by default.
  if (vm.count("inventory")) config.inventory = vm["inventory"].as<std::string>();
  if (vm.count("port-file")) config.port_file = vm["port-file"].as<std::string>();
  if (vm.count("advertise-url")) {
    config.advertise_url = vm["advertise-url"].as<std::string>();
    const std::string& u = config.advertise_url;
    const std::size_t scheme = u.rfind("http://", 0) == 0 ? 7 : u.rfind("https://", 0) == 0 ? 8 : 0;
    if (scheme == 0 || u.size() == scheme || u.size() > 1024 ||
        u.find_first_of(" \t\r\n,") != std::string::npos) {
      std::cerr << "shepherdd: --advertise-url must be one http:// or https:// URL (this daemon as ranks and "
                   "agents reach it), got '"
                << u << "'\n";
      return 2;
    }
  }
  if (vm.count("token")) {
    std::cerr << "shepherdd: --token is refused: a token in argv is visible to every local user (ps). Put "
                 "tokens in a file (mode 0600) and pass --tokens-file FILE; see docs/security.md\n";
    return 2;
  }
  if (vm.count("tokens-file")) config.tokens_file = vm["tokens-file"].as<std::string>();
  if (vm.count("slurm")) config.slurm.enabled = true;
  if (vm.count("log-level")) config.log_level = vm["log-level"].as<std::string>();
  if (!ValidLogLevel(config.log_level)) {
    std::cerr << "shepherdd: --log-level " << config.log_level
              << ": must be one of trace, debug, info, warn, error, critical, off\n";
    return 2;
  }
  if (vm.count("client-urls")) {
    Result<std::vector<std::string>> urls = net::ParseEndpointList(vm["client-urls"].as<std::string>());
    if (!urls.ok()) {
      std::cerr << "shepherdd: --client-urls " << vm["client-urls"].as<std::string>() << ": "
                << urls.status().message() << "\n";
      return 2;
    }
    config.client_urls = net::JoinEndpoints(*urls);
  }
  if (vm.count("salvage")) config.salvage = true;
  if (vm.count("leader-ttl-s")) config.leader_ttl_s = vm["leader-ttl-s"].as<long>();
  if (config.leader_ttl_s < 2) {
    std::cerr << "shepherdd: --leader-ttl-s " << config.leader_ttl_s
              << ": must be at least 2 (the lease is renewed every third of it)\n";
    return 2;
  }
  if (vm.count("replica-id")) config.replica_id = vm["replica-id"].as<std::string>();
  if (vm.count("follower-read-max-age-s")) {
    const double age = vm["follower-read-max-age-s"].as<double>();
    if (!(age >= 0 && age <= 3600)) {
      std::cerr << "shepherdd: --follower-read-max-age-s " << age << ": must be from 0 to 3600\n";
      return 2;
    }
    config.follower_read_max_age_s = age;
  }
  if (vm.count("ui-dir")) config.ui_dir = vm["ui-dir"].as<std::string>();
  if (!config.ui_dir.empty()) {
    if (Status s = CheckUiDir(config.ui_dir); !s.ok()) {
      std::cerr << "shepherdd: " << s.message() << "\n";
      return 2;
    }
  } else {
    config.ui_dir = DefaultUiDir();
  }
  return RunDaemon(config);
}

}  // namespace

int main(int argc, char** argv) {
  InstallEscapingLogFormat();  // before any thread logs: the daemon's and the agent's lines alike
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "gen-inventory") return RunGenInventory(argc - 1, argv + 1);
  if (cmd == "agent") return RunAgent(argc - 1, argv + 1);
  if (cmd == "simulate") return RunSimulate(argc - 1, argv + 1);
  if (cmd == "store") return RunStore(argc - 1, argv + 1);
  // The route table as JSON (api/route_table.h): what docs/api.md's route list is generated from.
  if (cmd == "routes") {
    if (argc > 2) {
      std::cerr << "shepherdd routes: takes no arguments (prints every route the API serves as JSON)\n";
      return 2;
    }
    std::cout << RouteTableJson().dump(2) << "\n";
    return 0;
  }
  // A word that is no command (a typo, a command of a newer version) must not start a daemon.
  if (!cmd.empty() && cmd[0] != '-') {
    std::cerr << "shepherdd: unknown command '" << cmd
              << "' (commands: agent, gen-inventory, routes, simulate, store; the daemon takes only options: "
                 "shepherdd --help)\n";
    return 2;
  }
  return Serve(argc, argv);
}
