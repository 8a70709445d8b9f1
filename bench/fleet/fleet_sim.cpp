// Fleet simulator: every node agent and every rank of a fleet, against a real shepherdd, on one thread.
//
//   fleet_sim --port P --inventory inventory.json --job job.json [--job small.json ...] --out result.json
//             [--healthy-s 600] [--fault-s 300] [--fault-gap-s 20] [--telemetry direct|relay]
//             [--rank-reports heartbeat|summary] [--step-s 5] [--seed 1] [--faults kind,kind,...]
//             [--heartbeat-s 1] [--close-each] [--shard I/N --ready-dir DIR]
//
// Each node of the inventory is one simulated agent speaking docs/agent-protocol.md over its own keep-alive
// connections from its own loopback address (127.1.x.y): POST /v1/nodes, heartbeats every second with its
// processes and gpu_faults, the assignments long poll (version, wait=30, keep=1), the lease (no answer for
// lease_s: its ranks are fenced). Ranks the agent "starts" from its assignments report telemetry each
// interval: in the node's heartbeat (`reports`, --telemetry relay) or in one POST /v1/jobs/{id}/reports per
// node and interval (--telemetry direct), as `summary` or `heartbeat` reports, plus step reports (loss,
// step_time_s with jitter), param_hash every sdc_check_every_steps and checkpoint reports (slow saves and
// eval pauses as phases). After a healthy period it injects faults drawn from the Llama 3 405B cause mix as
// the signals they produce, one at a time, and measures fault -> finding and finding -> new assignments
// from GET /v1/failures and from what its own agents are handed. Output: one JSON object (stdout and --out).
// A fleet larger than one process's open-files limit runs as N shards (--shard I/N), each playing every Nth
// node; their jobs advance in step because a step's length is a function of the job and the step.
#include <sys/stat.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "bench/fleet/fleet_model.h"
#include "bench/fleet/fleet_results.h"
#include "bench/fleet/http_conn.h"

using namespace std::chrono_literals;
using nlohmann::json;
using namespace fleet;

namespace {

class Sim {
 public:
  Sim(Options o)
      : o_(std::move(o)), server_(asio::ip::make_address_v4("127.0.0.1"), o_.port), tick_(io_), signals_(io_, SIGTERM),
        rng_(o_.seed + o_.shard) {}

  int Run() {
    LoadInventory();
    ops_ = std::make_shared<HttpConn>(io_, server_, asio::ip::make_address_v4("127.0.0.1"), &ops_traffic_);
    start_ = WallNow();
    // Agents start spread over up to 10 s (about 1,700 a second at 16,896 nodes), as a fleet's do.
    for (int i : mine_) nodes_[i].next_poll_at = start_ + 10.0 * i / nodes_.size();
    signals_.async_wait([this](boost::system::error_code ec, int) { if (!ec) io_.stop(); });  // shards > 0 end so
    Tick();
    io_.run();
    return Report();
  }

 private:
  // ---- agents ----
  void LoadInventory() {
    std::ifstream f(o_.inventory);
    json inv = json::parse(f);
    int i = 0;
    for (auto& j : inv["nodes"]) {
      Node n;
      n.idx = i;
      n.id = j["id"];
      n.leaf = j["topology"].value("leaf", "");
      n.spine = j["topology"].value("spine", "");
      n.spare = j.value("spare", false);
      n.addr = asio::ip::address_v4((127u << 24) | (1u << 16) | (uint32_t(i / 250) << 8) | uint32_t(i % 250 + 1));
      nodes_.push_back(std::move(n));
      ++i;
    }
    for (auto& n : nodes_) {
      by_id_[n.id] = n.idx;
      if (n.idx % o_.shards != o_.shard) continue;  // another shard's node
      mine_.push_back(n.idx);
      n.hb = std::make_shared<HttpConn>(io_, server_, n.addr, &traffic_);
      n.poll = std::make_shared<HttpConn>(io_, server_, n.addr, &traffic_);
      n.rep = std::make_shared<HttpConn>(io_, server_, n.addr, &traffic_);
      n.hb->set_close_each(o_.close_each);
      n.rep->set_close_each(o_.close_each);
    }
  }
  void Register(Node& n) {
    json b = {{"id", n.id}, {"hostname", "node" + n.id}, {"gpus", 8},
              {"topology", {{"spine", n.spine}, {"leaf", n.leaf}, {"nvlink_domain", n.id}}}};
    if (n.spare) b["spare"] = true;
    int idx = n.idx;
    n.hb->Send("POST", "/v1/nodes", b.dump(), 10s, [this, idx](int st, std::string) {
      Node& n = nodes_[idx];
      if (st == 200 || st == 201) n.registered = true;
    });
  }
  void Heartbeat(Node& n, double now) {
    if (!n.registered) { if (!n.hb->busy() && now >= n.next_poll_at) Register(n); return; }
    if (n.hb->busy()) { ++skipped_heartbeats_; return; }
    std::string b = "{\"agent\":{\"pid\":" + std::to_string(1000 + n.idx) + ",\"started_at\":\"" + Rfc3339(start_) +
                    "\"},\"gpu_faults\":" + n.gpu_faults.dump() + ",\"processes\":[";
    bool first = true;
    for (auto& r : n.ranks) {
      if (!first) b += ',';
      first = false;
      b += "{\"job\":\"" + r.job + "\",\"attempt\":" + std::to_string(r.attempt) + ",\"rank\":" + std::to_string(r.rank) +
           ",\"pid\":" + std::to_string(r.pid) + ",\"state\":\"" + (r.running ? "running" : "exited") + "\"";
      if (!r.running) {
        b += ",\"exit_code\":" + (r.exit_code >= 0 ? std::to_string(r.exit_code) : std::string("null"));
        b += ",\"signal\":" + (r.signal ? std::to_string(r.signal) : std::string("null"));
        if (r.fenced) b += ",\"fenced\":true";
        if (!r.log_tail.empty()) b += ",\"log_tail\":" + json(r.log_tail).dump();
      }
      b += '}';
    }
    b += ']';
    if (o_.telemetry == Telemetry::kRelay) {
      std::string rel = RelayEntries(n, now);
      if (!rel.empty()) b += ",\"reports\":[" + rel + "]";
    }
    b += '}';
    int idx = n.idx;
    n.hb->Send("POST", "/v1/nodes/" + n.id + "/heartbeat", b, 5s, [this, idx, sent = now](int st, std::string body) {
      Node& n = nodes_[idx];
      if (!n.alive) return;
      if (st == 404) { n.registered = false; return; }
      if (st != 200) { ++hb_failures_; return; }
      ++hb_ok_;
      if (!n.attached) { n.attached = true; ++attached_; }
      json a = json::parse(body, nullptr, false);
      if (a.is_discarded()) return;
      n.lease_s = a.value("lease_s", 75.0);
      n.lease_until = sent + n.lease_s;
      if (a.contains("ack_exits"))
        for (auto& e : a["ack_exits"]) {
          std::erase_if(n.ranks, [&](const Rank& r) {
            return !r.running && r.job == e.value("job", "") && r.attempt == e.value("attempt", -1) && r.rank == e.value("rank", -1);
          });
        }
      if (!n.poll_inflight && !n.have_version) Poll(n);
    });
  }
  void Poll(Node& n) {
    if (n.poll->busy()) return;
    n.poll_inflight = true;
    int idx = n.idx;
    std::string target = "/v1/nodes/" + n.id + "/assignments?version=" + std::to_string(n.version) +
                         "&wait=" + (n.have_version ? "30" : "0") + "&keep=1";
    n.poll->Send("GET", target, "", 40s, [this, idx](int st, std::string body) {
      Node& n = nodes_[idx];
      n.poll_inflight = false;
      if (!n.alive) return;
      if (st != 200) { ++poll_failures_; n.next_poll_at = WallNow() + 1; return; }
      json a = json::parse(body, nullptr, false);
      if (a.is_discarded()) return;
      n.version = a.value("version", int64_t(0));
      n.have_version = true;
      Reconcile(n, a);
      Poll(n);
    });
  }
  void Reconcile(Node& n, const json& a) {
    double now = WallNow();
    std::set<std::tuple<std::string, int, int>> want, keep;
    for (auto& k : a.value("keep", json::array())) keep.insert({k.value("job", ""), k.value("attempt", 0), k.value("rank", 0)});
    for (auto& r : a.value("ranks", json::array())) {
      std::string job = r.value("job", "");
      int attempt = r.value("attempt", 0), rank = r.value("rank", 0);
      want.insert({job, attempt, rank});
      if (n.done.count({job, attempt, rank})) continue;
      n.done.insert({job, attempt, rank});
      Rank p;
      p.job = job; p.attempt = attempt; p.rank = rank; p.gpu = r.value("gpu", 0); p.pid = ++pids_; p.started = now;
      if (r.contains("env")) {
        std::string ck = r["env"].value("SHEPHERD_RESUME_CHECKPOINT", "");
        size_t at = ck.rfind("step-");
        if (at != std::string::npos) p.resume_step = std::atoi(ck.c_str() + at + 5);
      }
      n.ranks.push_back(std::move(p));
    }
    for (auto& p : n.ranks)
      if (p.running && !want.count({p.job, p.attempt, p.rank}) && !keep.count({p.job, p.attempt, p.rank}))
        Exit(p, -1, 15, "");
  }
  void Exit(Rank& p, int code, int sig, std::string tail) {
    p.running = false; p.exit_code = code; p.signal = sig; p.log_tail = std::move(tail);
  }
  void NewAttempt(Job& j, int attempt, int resume_step, double now) {
    j.attempt = attempt; j.attempt_seen_at = now;
    j.hung = false; j.sdc_bad_node = -1;
    j.resume_step = resume_step;
    j.step = j.resume_step; j.progress = 0; j.load_left = 10; j.pause_left = 0; j.phase = "checkpoint_load";
    for (auto& in : injections_)
      if (in.job == j.id && in.attempt_before < attempt && in.reassigned_at == 0 && in.at > 0) in.reassigned_at = now;
  }
  void NoteReplacement(Job& j, Node& n, int rank, int attempt, double now) {
    for (auto& in : injections_) {
      if (in.job != j.id || in.attempt_before >= attempt || !in.replacement.empty() || n.idx == in.node_idx) continue;
      if (!std::count(in.ranks.begin(), in.ranks.end(), rank)) continue;
      in.replacement = n.id;
      const Node& bad = nodes_[in.node_idx];
      in.replacement_scope = n.leaf == bad.leaf ? "leaf" : n.spine == bad.spine ? "spine" : "other";
      (void)now;
    }
  }

  // ---- ranks ----
  // One report object per rank and interval (summary or heartbeat), plus step/param_hash/checkpoint reports.
  void RankReports(Node& n, Rank& p, Job& j, double now, std::string* out, int* count) {
    if (!p.noted && p.running) {  // the job may be known only after its ranks were handed out
      p.noted = true;
      if (p.attempt > j.attempt) NewAttempt(j, p.attempt, p.resume_step, now);
      if (p.rank < int(j.rank_node.size()) && p.attempt == j.attempt) j.rank_node[p.rank] = n.idx;
      NoteReplacement(j, n, p.rank, p.attempt, now);
    }
    if (!p.running || p.silent || p.attempt != j.attempt) return;
    auto add = [&](const std::string& s) { if (!out->empty()) *out += ','; *out += s; ++*count; };
    std::string head = "{\"rank\":" + std::to_string(p.rank) + ",\"attempt\":" + std::to_string(p.attempt) +
                       ",\"time\":" + Fixed(now, 3);
    int seq = j.step * 4;
    if (o_.summary) {
      std::string s = head + ",\"kind\":\"summary\",\"step\":" + std::to_string(j.step + 1) + ",\"phase\":\"" + j.phase + "\",\"groups\":[";
      const char* groups[] = {"tp", "pp", "dp"};
      for (int g = 0; g < 3; ++g) {
        if (g) s += ',';
        s += std::string("{\"group\":\"") + groups[g] + "\",\"completed\":" + std::to_string(seq - 1);
        if (j.hung && p.rank != j.hang_culprit && HangWaits(j, p.rank, g))
          s += ",\"open\":{\"seq\":" + std::to_string(seq) + ",\"op\":\"allreduce\",\"since\":" + Fixed(j.hang_since, 3) + "}";
        s += ",\"count\":" + std::to_string(j.hung ? 0 : 1) + ",\"wait_s\":" + Fixed(ArrivalWait(), 4) + "}";
      }
      add(s + "]}");
    } else {
      std::string s = head + ",\"kind\":\"heartbeat\",\"step\":" + std::to_string(j.step + 1) + ",\"phase\":\"" + j.phase + "\"";
      if (j.hung && p.rank != j.hang_culprit)
        s += ",\"collective\":{\"seq\":" + std::to_string(seq) + ",\"op\":\"allreduce\",\"group\":\"" +
             (HangWaits(j, p.rank, 2) ? "dp" : "pp") + "\",\"since\":" + Fixed(j.hang_since, 3) + "}";
      add(s + "}");
    }
    Rank& m = p;
    for (int s = std::max(m.last_step_sent + 1, j.resume_step + 1); s <= j.step; ++s) {
      double st = j.step_s * (1 + 0.05 * std::sin(p.rank * 0.37 + s));
      double loss = 1.8 + 6.0 / std::sqrt(s + 1.0) + 0.005 * std::sin(s * 1.7);
      add(head + ",\"kind\":\"step\",\"step\":" + std::to_string(s) + ",\"loss\":" + Fixed(loss, 5) +
          ",\"grad_norm\":" + Fixed(1.0 + 0.05 * std::sin(s), 4) + ",\"step_time_s\":" + Fixed(st, 3) + ",\"lr\":0.0001}");
      if (s % j.sdc_every == 0) {
        int tp = p.rank % j.tp, pp = p.rank / (j.tp * j.dp);
        uint64_t h = std::hash<std::string>{}(j.id + "/" + std::to_string(s) + "/" + std::to_string(tp) + "/" + std::to_string(pp));
        if (j.sdc_bad_node == n.idx) h ^= 0x5bd1e995;
        char hex[32];
        std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        add(head + ",\"kind\":\"param_hash\",\"step\":" + std::to_string(s) + ",\"hash\":\"" + hex + "\"}");
      }
    }
    if (j.step > m.last_step_sent) {
      if (j.last_ckpt > std::max(m.last_step_sent, j.resume_step) && j.last_ckpt <= j.step)
        add(head + ",\"kind\":\"checkpoint\",\"step\":" + std::to_string(j.last_ckpt) + ",\"path\":\"/ckpt/" + j.id +
            "/step-" + std::to_string(j.last_ckpt) + "\"}");
      m.last_step_sent = j.step;
    }
  }
  // The job's step `step` lasts step_s × (1 + 0.1 × this), in [-1, 1): the same in every shard.
  static double StepJitter(const std::string& job, int step) {
    uint64_t h = std::hash<std::string>{}(job + "#" + std::to_string(step)) * 0x9e3779b97f4a7c15ull;
    return double(h >> 11) / double(1ull << 52) - 1;
  }
  static bool HangWaits(const Job& j, int rank, int group) {  // the culprit's DP peers wait in dp, others in pp
    int c = j.hang_culprit;
    bool same_dp = rank % j.tp == c % j.tp && rank / (j.tp * j.dp) == c / (j.tp * j.dp);
    return group == 2 ? same_dp : (group == 1 && !same_dp);
  }
  std::string RelayEntries(Node& n, double now) {
    std::string out;
    int entries = 0;
    for (auto& p : n.ranks) {
      auto jt = jobs_.find(p.job);
      if (jt == jobs_.end()) continue;
      std::string reps; int c = 0;
      RankReports(n, p, jt->second, now, &reps, &c);
      if (!c) continue;
      if (entries++) out += ',';
      out += "{\"job\":\"" + p.job + "\",\"attempt\":" + std::to_string(p.attempt) + ",\"rank\":" + std::to_string(p.rank) +
             ",\"reports\":[" + reps + "]}";
      reports_sent_ += c;
    }
    return out;
  }
  void DirectReports(Node& n, double now) {
    if (n.rep->busy()) { ++skipped_report_posts_; return; }
    std::map<std::string, std::string> by_job;
    for (auto& p : n.ranks) {
      auto jt = jobs_.find(p.job);
      if (jt == jobs_.end()) continue;
      int c = 0;
      RankReports(n, p, jt->second, now, &by_job[p.job], &c);
      reports_sent_ += c;
    }
    // One POST per node and interval (a node runs one job's ranks in these workloads; more jobs wait a tick).
    for (auto& [job, reps] : by_job) {
      if (reps.empty()) continue;
      n.rep->Send("POST", "/v1/jobs/" + job + "/reports", "{\"reports\":[" + reps + "]}", 5s, [this](int st, std::string) {
        if (st != 202 && st != 200) ++report_failures_;
      });
      break;
    }
  }

  // ---- the jobs' lockstep progress ----
  void AdvanceJobs(double dt) {
    for (auto& [id, j] : jobs_) {
      if (j.attempt == 0 || j.hung) continue;
      if (j.load_left > 0) { j.load_left -= dt; if (j.load_left <= 0) j.phase = "train"; continue; }
      if (j.pause_left > 0) { j.pause_left -= dt; if (j.pause_left <= 0) j.phase = "train"; continue; }
      j.progress += dt / (j.step_s * (1 + 0.1 * StepJitter(j.id, j.step)));
      while (j.progress >= 1) {
        j.progress -= 1;
        ++j.step;
        if (j.step % j.ckpt_every == 0) {  // save: 8 s, one save in five slow (40 s)
          j.last_ckpt = j.step; j.phase = "checkpoint_save";
          j.pause_left = (j.step / j.ckpt_every) % 5 == 4 ? 40 : 8;
          break;
        }
        if (j.step % 70 == 0) { j.phase = "eval"; j.pause_left = 15; break; }  // eval pause
      }
      if (j.bug_step > 0 && j.step >= j.bug_step) {  // the same exception at the same step, every attempt
        j.step = j.bug_step;
        for (auto& n : nodes_)
          for (auto& p : n.ranks)
            if (p.job == j.id && p.attempt == j.attempt && p.rank == 0 && p.running)
              Exit(p, 1, 0, "Traceback (most recent call last):\n  File \"train.py\", line 212, in <module>\nRuntimeError: "
                            "shape mismatch in batch at step " + std::to_string(j.bug_step) + "\n");
      }
    }
  }

  // ---- faults ----
  FaultKind Draw() {
    if (forced_next_ < o_.forced.size()) return o_.forced[forced_next_++];
    double total = 0;
    for (auto& f : kFaults) total += f.share;
    double x = std::uniform_real_distribution<double>(0, total)(rng_);
    for (auto& f : kFaults) { if (x < f.share) return f.kind; x -= f.share; }
    return FaultKind::kNodeLoss;
  }
  static const char* Name(FaultKind k) { for (auto& f : kFaults) if (f.kind == k) return f.name; return "?"; }
  Job* Target(FaultKind k) {
    // A software bug fails its job by design (the same crash every attempt): it goes to a small job.
    std::vector<Job*> small, big;
    for (auto& [id, j] : jobs_) {
      if (j.attempt == 0 || j.bug_step > 0 || failed_jobs_.count(id)) continue;
      (j.tp * j.pp * j.dp >= 1024 ? big : small).push_back(&j);
    }
    if (k == FaultKind::kSoftwareBug) return small.empty() ? nullptr : small[rng_() % small.size()];
    if (!big.empty()) return big[rng_() % big.size()];
    return small.empty() ? nullptr : small[rng_() % small.size()];
  }
  void Inject(double now) {
    FaultKind k = Draw();
    Job* j = Target(k);
    if (!j) return;
    int rank = -1, ni = -1;
    for (int tries = 0; tries < 1000 && ni < 0; ++tries) {  // a rank on one of this shard's nodes
      rank = int(rng_() % j->rank_node.size());
      ni = j->rank_node[rank];
    }
    if (ni < 0) return;
    Node& n = nodes_[ni];
    Injection in;
    in.kind = k; in.name = Name(k); in.job = j->id; in.node = n.id; in.node_idx = ni; in.at = now; in.attempt_before = j->attempt;
    for (auto& p : n.ranks) if (p.running && p.job == j->id && p.attempt == j->attempt) in.ranks.push_back(p.rank);
    auto rank_here = [&]() -> Rank* {
      for (auto& p : n.ranks) if (p.running && p.job == j->id && p.attempt == j->attempt) return &p;
      return nullptr;
    };
    switch (k) {
      case FaultKind::kGpuXid: case FaultKind::kHbm: case FaultKind::kSram: case FaultKind::kGsp: {
        Rank* p = rank_here();
        const char* kind = k == FaultKind::kHbm ? "ecc_uncorrectable" : k == FaultKind::kSram ? "sram_ecc" : "xid";
        const char* detail = k == FaultKind::kGpuXid ? "Xid 79: GPU has fallen off the bus" : k == FaultKind::kGsp ? "Xid 119: GSP timeout" : "uncorrectable ECC";
        n.gpu_faults.push_back({{"gpu", p ? p->gpu : 0}, {"kind", kind}, {"detail", detail}});
        if (p && k != FaultKind::kHbm) Exit(*p, -1, 6, "CUDA error: unspecified launch failure\n");  // the rank dies with it
        break;
      }
      case FaultKind::kNcclWatchdog: {
        if (Rank* p = rank_here()) Exit(*p, -1, 6, "[Rank " + std::to_string(p->rank) + "] Watchdog caught collective operation timeout\n");
        break;
      }
      case FaultKind::kSoftwareBug: j->bug_step = j->step + 3; break;
      case FaultKind::kNetworkHang: case FaultKind::kNic:
        j->hung = true; j->hang_culprit = in.ranks.empty() ? rank : in.ranks[0]; j->hang_since = now; break;
      case FaultKind::kSdc: j->sdc_bad_node = ni; break;
      case FaultKind::kSilentRank: if (Rank* p = rank_here()) p->silent = true; break;
      case FaultKind::kNodeLoss: KillAgent(n); break;
      case FaultKind::kHostMaintenance: {  // an operator drains the node, the host goes down for its window
        ops_queue_.push_back({"PATCH", "/v1/nodes/" + n.id, R"({"drain": true, "reason": "host maintenance"})"});
        int idx = ni;
        auto t = std::make_shared<asio::steady_timer>(io_, 30s);
        t->async_wait([this, t, idx, pos = injections_.size()](boost::system::error_code) {
          KillAgent(nodes_[idx]);
          injections_[pos].at = WallNow();  // latency from the host going down
        });
        break;
      }
    }
    std::fprintf(stderr, "[fleet_sim] +%.0fs inject %s on %s (job %s attempt %d)\n", now - start_, in.name.c_str(),
                 n.id.c_str(), j->id.c_str(), j->attempt);
    injections_.push_back(std::move(in));
  }
  void KillAgent(Node& n) {
    n.alive = false;
    n.hb->Close(); n.poll->Close(); n.rep->Close();
  }
  // ---- the operator's view: findings, job submission, drains ----
  struct OpReq { std::string method, target, body; };
  void Ops(double now) {
    if (ops_->busy()) return;
    if (!ops_queue_.empty()) {
      OpReq r = ops_queue_.front();
      ops_queue_.erase(ops_queue_.begin());
      ops_->Send(r.method.c_str(), r.target, r.body, 120s, [this, r](int st, std::string body) {
        if (r.target == "/v1/jobs") JobSubmitted(r.body, st, body);
      });
      return;
    }
    if (now - last_failures_poll_ < 1) return;
    last_failures_poll_ = now;
    if (o_.shard != 0) return FindJobs();
    if (AskReplacement()) return;
    ops_->Send("GET", "/v1/failures?limit=1000&since=" + Fixed(start_, 0), "", 30s, [this](int st, std::string body) {
      if (st != 200) return;
      json f = json::parse(body, nullptr, false);
      if (f.is_discarded()) return;
      for (auto& x : f["failures"]) Finding(x);
    });
  }
  // Sharded: the node that took a fault's ranks may be another shard's, so shard 0 reads the job's new
  // placement once (GET /v1/jobs/{id}/placement) for each injection reassigned without a replacement seen.
  bool AskReplacement() {
    if (o_.shards == 1) return false;
    for (size_t pos = 0; pos < injections_.size(); ++pos) {
      Injection& in = injections_[pos];
      if (in.reassigned_at == 0 || !in.replacement.empty() || in.placement_asked || in.ranks.empty()) continue;
      in.placement_asked = true;
      ops_->Send("GET", "/v1/jobs/" + in.job + "/placement", "", 60s, [this, pos](int st, std::string body) {
        Injection& in = injections_[pos];
        json p = json::parse(body, nullptr, false);
        if (st != 200 || p.is_discarded() || p.value("attempt", 0) <= in.attempt_before) {
          in.placement_asked = false;  // not yet the next attempt's: ask again
          return;
        }
        for (auto& r : p.value("ranks", json::array())) {
          auto node = by_id_.find(r.value("node", ""));
          if (node == by_id_.end() || node->second == in.node_idx ||
              !std::count(in.ranks.begin(), in.ranks.end(), r.value("rank", -1)))
            continue;
          const Node &n = nodes_[node->second], &bad = nodes_[in.node_idx];
          in.replacement = n.id;
          in.replacement_scope = n.leaf == bad.leaf ? "leaf" : n.spine == bad.spine ? "spine" : "other";
          return;
        }
      });
      return true;
    }
    return false;
  }
  // A shard other than 0: the jobs shard 0 submitted, found by name once its own agents are attached.
  void FindJobs() {
    if (!submitted_ || jobs_.size() == o_.jobs.size()) return;
    ops_->Send("GET", "/v1/jobs?limit=1000", "", 30s, [this](int st, std::string body) {
      json l = json::parse(body, nullptr, false);
      if (st != 200 || l.is_discarded()) return;
      for (auto& path : o_.jobs) {
        std::ifstream f(path);
        std::string spec((std::istreambuf_iterator<char>(f)), {});
        std::string name = json::parse(spec).value("name", "");
        bool known = std::any_of(jobs_.begin(), jobs_.end(), [&](auto& kv) { return kv.second.name == name; });
        for (auto& j : l.value("jobs", json::array()))
          if (!known && j.value("name", "") == name) { JobSubmitted(spec, 201, j.dump()); break; }
      }
    });
  }
  void JobSubmitted(const std::string& spec, int st, const std::string& body) {
    json a = json::parse(body, nullptr, false);
    if (st != 201 || a.is_discarded()) {
      std::fprintf(stderr, "[fleet_sim] job refused %d: %.300s\n", st, body.c_str());
      if (st != 422 && ++submit_retries_ <= 10) ops_queue_.push_back({"POST", "/v1/jobs", spec});  // retried as a user would
      return;
    }
    json s = json::parse(spec);
    Job j;
    j.id = a["id"]; j.name = s.value("name", "");
    auto par = s["parallelism"];
    j.tp = par.value("tp", 1); j.pp = par.value("pp", 1); j.dp = par.value("dp", 1);
    j.sdc_every = s.value("policy", json::object()).value("sdc_check_every_steps", 100);
    j.step_s = o_.step_s * (j.tp * j.pp * j.dp >= 1024 ? 1 : 0.6);
    j.rank_node.assign(j.tp * j.pp * j.dp, -1);
    std::fprintf(stderr, "[fleet_sim] job %s (%s) %d ranks submitted: %s\n", j.id.c_str(), j.name.c_str(),
                 j.tp * j.pp * j.dp, a.value("state", "").c_str());
    jobs_[j.id] = std::move(j);
  }
  void Finding(const json& x) {
    std::string id = x.value("id", "");
    if (!seen_findings_.insert(id).second) return;
    double at = ParseRfc3339(x.value("detected_at", ""));
    std::string job = x.value("job", ""), kind = x.value("kind", "");
    findings_.push_back(x);
    if (at < faults_start_ || faults_start_ == 0) { ++false_findings_; false_list_.push_back(x); return; }
    for (auto& in : injections_) {
      if (in.job != job || in.found_at != 0 || at + 0.5 < in.at) continue;
      auto exp = Expected(in.kind);
      if (std::find(exp.begin(), exp.end(), kind) == exp.end() && !x.contains("incident")) continue;
      in.found_at = at; in.finding_kind = kind; in.finding_nodes = x.value("nodes", json::array());
      for (auto& nn : in.finding_nodes) if (nn == in.node) in.attributed = true;
      for (auto& act : x.value("actions", json::array())) in.actions += (in.actions.empty() ? "" : "; ") + (act.is_string() ? act.get<std::string>() : act.dump());
      return;
    }
  }

  // ---- the clock ----
  void Tick() {
    // Slices of 100 ms: each agent heartbeats once per --heartbeat-s in its own slice (agents are not in step).
    tick_.expires_after(100ms);
    tick_.async_wait([this](boost::system::error_code) {
      double now = WallNow();
      double t = now - start_;
      const size_t slices = std::max<size_t>(1, size_t(std::lround(o_.heartbeat_s * 10)));
      ++ticks_;
      for (size_t i = ticks_ % slices; i < mine_.size(); i += slices) {
        Node& n = nodes_[mine_[i]];
        if (!n.alive) continue;
        if (n.lease_until > 0 && now > n.lease_until)  // no answer within the lease: fence the ranks
          for (auto& p : n.ranks) if (p.running) { Exit(p, -1, 9, ""); p.fenced = true; }
        Heartbeat(n, now);
        if (n.registered && n.attached && !n.poll_inflight && now >= n.next_poll_at) Poll(n);
        if (o_.telemetry == Telemetry::kDirect) DirectReports(n, now);
      }
      if (ticks_ % 10 != 0) return Tick();  // the rest once a second
      AdvanceJobs(now - last_tick_ > 5 || last_tick_ == 0 ? 1 : now - last_tick_);
      last_tick_ = now;
      if (!submitted_ && attached_ == int(mine_.size()) && AllShardsReady()) {
        submitted_ = true;
        attached_at_ = now;
        std::fprintf(stderr, "[fleet_sim] +%.0fs all %zu agents attached; %s %zu jobs\n", t, mine_.size(),
                     o_.shard == 0 ? "submitting" : "looking up", o_.jobs.size());
        for (auto& path : o_.jobs) {
          if (o_.shard != 0) break;
          std::ifstream f(path);
          std::string s((std::istreambuf_iterator<char>(f)), {});
          ops_queue_.push_back({"POST", "/v1/jobs", s});
        }
      }
      bool all_running = submitted_ && !jobs_.empty() && std::all_of(jobs_.begin(), jobs_.end(), [](auto& kv) { return kv.second.step >= 3; });
      if (all_running && healthy_start_ == 0) {
        healthy_start_ = now;
        healthy_begin_counts_ = Snapshot();
        std::fprintf(stderr, "[fleet_sim] +%.0fs every job stepping: healthy period of %.0f s\n", t, o_.healthy_s);
      }
      if (healthy_start_ > 0 && faults_start_ == 0 && now >= healthy_start_ + o_.healthy_s) {
        faults_start_ = now;
        healthy_end_counts_ = Snapshot();
        std::fprintf(stderr, "[fleet_sim] +%.0fs healthy period over (%d findings); faults for %.0f s\n", t, false_findings_, o_.fault_s);
      }
      if (faults_start_ > 0 && now < faults_start_ + o_.fault_s && o_.shard == 0) {
        bool pending = !injections_.empty() && [&] {
          auto& in = injections_.back();
          return (in.found_at == 0 || in.reassigned_at == 0) && now - in.at < o_.fault_timeout_s;
        }();
        if (!pending && now - last_inject_ >= o_.fault_gap_s) { last_inject_ = now; Inject(now); }
      }
      Ops(now);
      if (now - last_log_ >= 30) {
        last_log_ = now;
        std::fprintf(stderr, "[fleet_sim] +%.0fs attached %d/%zu requests %llu hb_fail %llu poll_fail %llu rep_fail %llu "
                     "conn_err %llu transport_err %llu timeouts %llu 429 %llu 503 %llu 4xx %llu findings %zu\n",
                     t, attached_, mine_.size(), (unsigned long long)traffic_.requests,
                     (unsigned long long)hb_failures_,
                     (unsigned long long)poll_failures_, (unsigned long long)report_failures_,
                     (unsigned long long)traffic_.connect_errors, (unsigned long long)traffic_.errors,
                     (unsigned long long)traffic_.timeouts, (unsigned long long)traffic_.status_429,
                     (unsigned long long)traffic_.status_503, (unsigned long long)traffic_.status_4xx, findings_.size());
      }
      bool done = faults_start_ > 0 && now >= faults_start_ + o_.fault_s &&
                  (injections_.empty() || (injections_.back().reassigned_at > 0 && now - injections_.back().reassigned_at > 5) ||
                   now - injections_.back().at > o_.fault_timeout_s ||
                   now >= faults_start_ + o_.fault_s + 120);
      if ((done && o_.shard == 0) || t > o_.healthy_s + o_.fault_s + 1800) { io_.stop(); return; }
      Tick();
    });
  }
  // This shard's agents are attached (its ready file written); for shard 0, every shard's are.
  bool AllShardsReady() {
    if (o_.shards == 1) return true;
    if (!ready_written_) {
      std::ofstream(o_.ready_dir + "/shard-" + std::to_string(o_.shard)) << "ready\n";
      ready_written_ = true;
    }
    if (o_.shard != 0) return true;
    for (int i = 0; i < o_.shards; ++i) {
      struct stat st;
      if (stat((o_.ready_dir + "/shard-" + std::to_string(i)).c_str(), &st) != 0) return false;
    }
    return true;
  }
  json Snapshot() {
    json attempts = json::object();
    for (auto& [id, j] : jobs_) attempts[id] = j.attempt;
    return {{"at", WallNow()}, {"requests", traffic_.requests}, {"bytes_out", traffic_.bytes_out},
            {"reports", reports_sent_}, {"findings", findings_.size()}, {"attempts", attempts}};
  }

  int Report() {
    double end = WallNow();
    json out = {{"nodes", mine_.size()}, {"shard", o_.shard}, {"shards", o_.shards},
                {"telemetry", o_.telemetry == Telemetry::kRelay ? "relay" : "direct"},
                {"rank_reports", o_.summary ? "summary" : "heartbeat"},
                {"timeline", {{"start", start_}, {"attached", attached_at_}, {"healthy_start", healthy_start_},
                              {"faults_start", faults_start_}, {"end", end}}},
                {"traffic", {{"requests", traffic_.requests}, {"bytes_out", traffic_.bytes_out}, {"bytes_in", traffic_.bytes_in},
                             {"reports", reports_sent_}, {"connects", traffic_.connects}, {"connect_errors", traffic_.connect_errors},
                             {"errors", traffic_.errors}, {"timeouts", traffic_.timeouts}, {"status_429", traffic_.status_429},
                             {"status_503", traffic_.status_503}, {"status_5xx", traffic_.status_5xx}, {"status_4xx", traffic_.status_4xx},
                             {"heartbeats_ok", hb_ok_}, {"heartbeat_failures", hb_failures_}, {"heartbeats_skipped_busy", skipped_heartbeats_},
                             {"poll_failures", poll_failures_}, {"report_post_failures", report_failures_},
                             {"report_posts_skipped_busy", skipped_report_posts_}}},
                {"healthy_begin", healthy_begin_counts_}, {"healthy_end", healthy_end_counts_},
                {"false_findings", false_findings_}, {"false_findings_list", false_list_},
                {"jobs", json::array()}};
    out.update(InjectionResults(injections_));
    for (auto& [id, j] : jobs_) out["jobs"].push_back({{"id", id}, {"name", j.name}, {"ranks", j.rank_node.size()}, {"attempt", j.attempt}, {"step", j.step}});
    std::string s = out.dump(1);
    std::cout << s << std::endl;
    if (!o_.out.empty()) std::ofstream(o_.out) << s << "\n";
    return 0;
  }

  Options o_;
  asio::io_context io_;
  tcp::endpoint server_;
  asio::steady_timer tick_;
  asio::signal_set signals_;
  std::mt19937_64 rng_;
  // A healthy member's wait in one window: every member is equally likely to arrive last (uniform jitter
  // around 10 ms), as in a synchronous group with no straggler; never the same rank every window.
  double ArrivalWait() { return 0.010 + std::uniform_real_distribution<double>(0, 0.004)(rng_); }
  std::vector<Node> nodes_;  // the whole inventory; this shard plays mine_
  std::vector<int> mine_;
  std::unordered_map<std::string, int> by_id_;
  std::map<std::string, Job> jobs_;
  std::set<std::string> failed_jobs_;
  std::shared_ptr<HttpConn> ops_;
  std::vector<OpReq> ops_queue_;
  std::vector<Injection> injections_;
  std::set<std::string> seen_findings_;
  std::vector<json> findings_, false_list_;
  Traffic traffic_, ops_traffic_;
  json healthy_begin_counts_, healthy_end_counts_;
  size_t forced_next_ = 0;
  uint64_t ticks_ = 0;
  bool ready_written_ = false;
  int submit_retries_ = 0, attached_ = 0, false_findings_ = 0, pids_ = 100000;
  bool submitted_ = false;
  double start_ = 0, last_log_ = 0, last_tick_ = 0, attached_at_ = 0, healthy_start_ = 0, faults_start_ = 0, last_inject_ = 0, last_failures_poll_ = 0;
  uint64_t reports_sent_ = 0, hb_ok_ = 0, hb_failures_ = 0, poll_failures_ = 0, report_failures_ = 0, skipped_heartbeats_ = 0,
           skipped_report_posts_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int bad = ParseOptions(argc, argv, &o)) return bad;
  rlimit lim{};  // three connections per simulated node
  getrlimit(RLIMIT_NOFILE, &lim);
  rlimit want{1 << 20, 1 << 20};
  if (setrlimit(RLIMIT_NOFILE, &want) != 0) { lim.rlim_cur = lim.rlim_max; setrlimit(RLIMIT_NOFILE, &lim); }
  return Sim(std::move(o)).Run();
}
