// The fleet simulator's model (bench/fleet/fleet_sim.cpp): simulated ranks, nodes, jobs and injected faults,
// the Llama 3 405B fault mix, the command line, and time helpers. Plain data; the simulator's single thread
// owns every instance.
#pragma once

#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/fleet/http_conn.h"

namespace fleet {

using nlohmann::json;

inline double WallNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
inline std::string Fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
inline double ParseRfc3339(const std::string& s) {  // YYYY-MM-DDTHH:MM:SS[.frac]Z
  std::tm tm{};
  if (s.size() < 19 || !strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
  double frac = 0;
  if (s.size() > 19 && s[19] == '.') frac = std::atof(("0" + s.substr(19, s.find_first_of("Zz+-", 19) - 19)).c_str());
  return double(timegm(&tm)) + frac;
}
inline std::string Rfc3339(double t) {
  time_t sec = time_t(t);
  std::tm tm{};
  gmtime_r(&sec, &tm);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(b) + "." + Fixed(t - sec, 3).substr(2) + "Z";
}

enum class Telemetry { kDirect, kRelay };
enum class FaultKind { kGpuXid, kHbm, kSoftwareBug, kNetworkHang, kHostMaintenance, kSram, kGsp, kNic, kNcclWatchdog,
                       kSdc, kNodeLoss, kSilentRank };
struct FaultInfo { FaultKind kind; const char* name; double share; };
// Llama 3 405B's 54-day interruption mix (faulty GPU 30 %, HBM 17 %, software bug 13 %, network 8 %, host
// maintenance 8 %, SRAM 5 %, GSP 4 %, NIC 2 %, NCCL watchdog 2 %, SDC 1.4 %; the rest: hosts lost and
// ranks gone silent).
inline const FaultInfo kFaults[] = {
    {FaultKind::kGpuXid, "gpu_xid", 30}, {FaultKind::kHbm, "hbm_ecc", 17}, {FaultKind::kSoftwareBug, "software_bug", 13},
    {FaultKind::kNetworkHang, "network_hang", 8}, {FaultKind::kHostMaintenance, "host_maintenance", 8},
    {FaultKind::kSram, "gpu_sram", 5}, {FaultKind::kGsp, "gpu_gsp", 4}, {FaultKind::kNic, "nic", 2},
    {FaultKind::kNcclWatchdog, "nccl_watchdog", 2}, {FaultKind::kSdc, "sdc", 1.4},
    {FaultKind::kNodeLoss, "node_loss", 5.8}, {FaultKind::kSilentRank, "silent_rank", 3.8}};

struct Rank {
  std::string job;
  int attempt = 0, rank = 0, gpu = 0, pid = 0;
  bool running = true, silent = false, fenced = false;
  int exit_code = -1, signal = 0;  // -1: none
  std::string log_tail;
  int last_step_sent = -1, resume_step = 0;
  bool noted = false;  // counted in its job's placement
  double started = 0;
};

struct Job;
struct Node {
  int idx = 0;
  std::string id, leaf, spine;
  bool spare = false;
  asio::ip::address_v4 addr;
  std::shared_ptr<HttpConn> hb, poll, rep;
  bool alive = true, registered = false, attached = false, poll_inflight = false, have_version = false;
  int64_t version = 0;
  double lease_until = 0, lease_s = 75, next_poll_at = 0;
  std::vector<Rank> ranks;  // running and exited-unacknowledged
  json gpu_faults = json::array();
  std::set<std::tuple<std::string, int, int>> done;  // (job, attempt, rank) that ran here once
};

struct Job {
  std::string id, name;
  int tp = 1, pp = 1, dp = 1;
  int attempt = 0;                 // newest attempt any agent was handed
  double attempt_seen_at = 0;      // when that attempt was first handed out
  int step = 0, resume_step = 0;   // lockstep progress of the current attempt
  double progress = 0, pause_left = 0, load_left = 0;
  const char* phase = "train";
  int sdc_every = 100, ckpt_every = 50;
  double step_s = 5;
  int last_ckpt = 0;
  bool hung = false; int hang_culprit = -1; double hang_since = 0; int hang_seq = 0;
  int sdc_bad_node = -1;
  int bug_step = -1;               // software bug: rank 0 exits 1 at this step on every attempt
  std::vector<int> rank_node;      // rank -> node idx of the newest attempt seen
};

struct Injection {
  FaultKind kind; std::string name, job, node; int node_idx = -1; double at = 0; int attempt_before = 0;
  std::vector<int> ranks;  // ranks on the node when injected (for the replacement's topology)
  double found_at = 0; std::string finding_kind; json finding_nodes; std::string actions; bool attributed = false;
  double reassigned_at = 0; std::string replacement; std::string replacement_scope;
  bool placement_asked = false;  // sharded: the new placement was asked for (fleet_sim AskReplacement)
};

struct Options {
  int port = 0; std::string inventory, out; std::vector<std::string> jobs;
  double healthy_s = 600, fault_s = 300, fault_gap_s = 20, step_s = 5, fault_timeout_s = 180;
  Telemetry telemetry = Telemetry::kDirect; bool summary = true; uint64_t seed = 1;
  std::vector<FaultKind> forced;
  bool close_each = false;  // --close-each: heartbeats and report posts each on a fresh connection
  double heartbeat_s = 1;   // --heartbeat-s: each agent's heartbeat interval (the agent's --heartbeat-interval)
  // --shard I/N: this process plays the nodes with index % N == I. Shard 0 submits the jobs once every shard
  // has written `ready-dir/shard-I` (its agents attached), injects the faults on its own nodes and reads the
  // findings; the others find the jobs by name and run until SIGTERM.
  int shard = 0, shards = 1; std::string ready_dir;
};

// Parses the command line (the usage is in fleet_sim.cpp's header). 0, or 2 after saying what is wrong.
inline int ParseOptions(int argc, char** argv, Options* out) {
  Options& o = *out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { if (i + 1 >= argc) { std::cerr << a << " needs a value\n"; std::exit(2); } return argv[++i]; };
    if (a == "--port") o.port = std::stoi(next());
    else if (a == "--inventory") o.inventory = next();
    else if (a == "--job") o.jobs.push_back(next());
    else if (a == "--out") o.out = next();
    else if (a == "--healthy-s") o.healthy_s = std::stod(next());
    else if (a == "--fault-s") o.fault_s = std::stod(next());
    else if (a == "--fault-gap-s") o.fault_gap_s = std::stod(next());
    else if (a == "--fault-timeout-s") o.fault_timeout_s = std::stod(next());
    else if (a == "--step-s") o.step_s = std::stod(next());
    else if (a == "--seed") o.seed = std::stoull(next());
    else if (a == "--telemetry") { std::string v = next(); o.telemetry = v == "relay" ? Telemetry::kRelay : Telemetry::kDirect; }
    else if (a == "--rank-reports") o.summary = next() == "summary";
    else if (a == "--close-each") o.close_each = true;
    else if (a == "--heartbeat-s") o.heartbeat_s = std::stod(next());
    else if (a == "--ready-dir") o.ready_dir = next();
    else if (a == "--shard") {
      std::string v = next();
      if (std::sscanf(v.c_str(), "%d/%d", &o.shard, &o.shards) != 2 || o.shards < 1 || o.shard < 0 ||
          o.shard >= o.shards) {
        std::cerr << "--shard wants I/N with 0 <= I < N\n"; return 2;
      }
    }
    else if (a == "--faults") {
      std::string v = next();
      size_t p = 0;
      while (p <= v.size()) {
        size_t q = v.find(',', p);
        std::string k = v.substr(p, q == std::string::npos ? std::string::npos : q - p);
        bool ok = false;
        for (auto& f : kFaults) if (k == f.name) { o.forced.push_back(f.kind); ok = true; }
        if (!ok && !k.empty()) { std::cerr << "unknown fault " << k << "\n"; return 2; }
        if (q == std::string::npos) break;
        p = q + 1;
      }
    } else { std::cerr << "unknown option " << a << "\n"; return 2; }
  }
  if (!o.port || o.inventory.empty() || o.jobs.empty()) { std::cerr << "--port, --inventory and --job are required\n"; return 2; }
  if (o.shards > 1 && o.ready_dir.empty()) { std::cerr << "--shard needs --ready-dir\n"; return 2; }
  if (!(o.heartbeat_s >= 0.1 && o.heartbeat_s <= 60)) { std::cerr << "--heartbeat-s wants 0.1 to 60\n"; return 2; }
  return 0;
}

}  // namespace fleet
