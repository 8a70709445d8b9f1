#include "load_options.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace shepherd::bench {
namespace {

[[noreturn]] void Usage(const char* msg) {
  if (msg) std::fprintf(stderr, "report_load: %s\n", msg);
  std::fprintf(stderr,
               "usage: report_load --port P --job ID [--ranks N=131072] [--rate HZ=1] [--duration S=20]\n"
               "         [--connections C=32] [--batch RANKS_PER_REQUEST=8] [--path-template T]\n"
               "         [--max] [--attempt A=1] [--step-every TICKS=4] [--drain S=5] [--rank-order FILE]\n"
               "         [--max-requests N] [--first-tick T=0] [--latency-log FILE] [--host 127.0.0.1]\n"
               "  --path-template: '{job}' is replaced by --job (default /v1/jobs/{job}/reports)\n"
               "  --max: closed loop for --duration seconds (ceiling); default is open loop at ranks*rate\n");
  std::exit(2);
}

}  // namespace

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    // clang-format off
    if (a == "--host") o.host = next();
    else if (a == "--port") o.port = std::atoi(next().c_str());
    else if (a == "--job") o.job = next();
    else if (a == "--ranks") o.ranks = std::atol(next().c_str());
    else if (a == "--rate") o.rate = std::atof(next().c_str());
    else if (a == "--duration") o.duration = std::atof(next().c_str());
    else if (a == "--connections") o.connections = std::atoi(next().c_str());
    else if (a == "--batch") o.batch = std::atoi(next().c_str());
    else if (a == "--path-template") o.path_template = next();
    else if (a == "--max") o.max = true;
    else if (a == "--attempt") o.attempt = std::atoi(next().c_str());
    else if (a == "--step-every") o.step_every = std::atoi(next().c_str());
    else if (a == "--drain") o.drain = std::atof(next().c_str());
    else if (a == "--rank-order") o.rank_order = next();
    else if (a == "--max-requests") o.max_requests = std::atol(next().c_str());
    else if (a == "--first-tick") o.first_tick = std::atol(next().c_str());
    else if (a == "--latency-log") o.latency_log = next();
    else if (a == "-h" || a == "--help") Usage(nullptr);
    else Usage(("unknown argument " + a).c_str());
    // clang-format on
  }
  if (o.port <= 0 || o.port > 65535) Usage("--port is required (1..65535)");
  if (o.path_template.find("{job}") != std::string::npos && o.job.empty()) Usage("--job is required");
  if (o.ranks <= 0 || o.ranks > (1L << 24)) Usage("--ranks must be in [1, 2^24]");
  if (!(o.rate > 0) || o.rate > 1000) Usage("--rate must be in (0, 1000]");
  if (!(o.duration > 0) || o.duration > 3600) Usage("--duration must be in (0, 3600]");
  if (o.connections < 1 || o.connections > 1024) Usage("--connections must be in [1, 1024]");
  if (o.batch < 1 || o.batch > 4096) Usage("--batch must be in [1, 4096]");
  if (o.step_every < 0) Usage("--step-every must be >= 0");
  if (o.first_tick < 0) Usage("--first-tick must be >= 0");
  if (!(o.drain >= 0) || o.drain > 600) Usage("--drain must be in [0, 600]");
  in_addr addr{};
  if (inet_pton(AF_INET, o.host.c_str(), &addr) != 1 || (ntohl(addr.s_addr) >> 24) != 127)
    Usage("--host must be an IPv4 loopback address (127.0.0.0/8)");
  return o;
}

}  // namespace shepherd::bench
