// Builders and the RecoveryTest fixture shared by the recovery policy tests (recovery_test.cpp,
// recovery_restart_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "scheduler/recovery.h"

namespace shepherd::testing {

inline const Time kT0 = FromUnixSeconds(1'800'000'000);

inline Node MakeNode(const std::string& id, const std::string& spine, const std::string& leaf,
                     bool spare = false) {
  Node n;
  n.id = id;
  n.gpus = 8;
  n.topology = {{"spine", spine}, {"leaf", leaf}};
  n.spare = spare;
  return n;
}

inline Plan MakePlan(int tp, int pp, int dp) {
  Plan p;
  p.tp = tp, p.pp = pp, p.dp = dp;
  return p;
}

// Rank r on nodes[r / 8], GPU r % 8, with Megatron coordinates rank = tp + TP·(dp + DP·pp).
inline Placement Sequential(const Plan& plan, const std::vector<std::string>& nodes, int attempt) {
  Placement p;
  p.attempt = attempt;
  for (int r = 0; r < plan.world_size(); ++r) {
    p.ranks.push_back({.rank = r,
                       .node = nodes[r / 8],
                       .gpu = r % 8,
                       .tp = r % plan.tp,
                       .pp = r / (plan.tp * plan.dp),
                       .dp = (r / plan.tp) % plan.dp});
  }
  return p;
}

// A placement that holds `gpus` GPUs of `node` for another job.
inline Placement Hold(const std::string& node, int gpus) {
  Placement p;
  for (int g = 0; g < gpus; ++g) p.ranks.push_back({.rank = g, .node = node, .gpu = g});
  return p;
}

inline Checkpoint Ckpt(int64_t step, CheckpointStatus status, int attempt = 1) {
  Checkpoint c;
  c.job = "job-1";
  c.attempt = attempt;
  c.step = step;
  c.id = "job-1/" + std::to_string(attempt) + "/" + std::to_string(step);
  c.status = status;
  return c;
}

inline Finding MakeFinding(FindingKind kind, std::vector<int> ranks, std::vector<std::string> nodes,
                           int attempt = 1) {
  Finding f;
  f.id = std::string(ToString(kind)) + "-" + std::to_string(attempt);
  f.job = "job-1";
  f.attempt = attempt;
  f.kind = kind;
  f.ranks = std::move(ranks);
  f.nodes = std::move(nodes);
  f.step = 47;
  f.detected_at = kT0;
  return f;
}

inline std::set<std::string> NodesOf(const Placement& p) {
  std::set<std::string> out;
  for (const RankSlot& s : p.ranks) out.insert(s.node);
  return out;
}

inline bool Has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

inline std::string Dump(const RecoveryDecision& d) {
  std::string s = "reason: " + d.reason;
  for (const std::string& a : d.actions) s += "\n  " + a;
  return s;
}

// Topology (8 GPUs per node):
//   spine s0: leaf l0 = node-01, node-02 (job-1), node-03 (spare); leaf l1 = node-04, node-05 (spare)
//   spine s1: leaf l2 = node-06, node-07 (spare)
// job-1: TP 8, DP 2 → ranks 0-7 on node-01 (dp 0), ranks 8-15 on node-02 (dp 1), attempt 1.
class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.id = "job-1";
    job_.state = JobState::kRunning;
    job_.attempt = 1;
    job_.plan = MakePlan(8, 1, 2);
    job_.spec.policy.max_restarts = 3;
    job_.spec.policy.restart_backoff_s = 5;
    job_.spec.command = {"python3", "train.py"};  // launched by Shepherd
    job_.spec.launch_mode = LaunchMode::kAgents;
    placement_ = Sequential(job_.plan, {"node-01", "node-02"}, 1);
  }

  // Adds the default nodes (minus `skip`) and allocates job-1.
  void Build(const std::set<std::string>& skip = {}) {
    const Node all[] = {MakeNode("node-01", "s0", "l0"),       MakeNode("node-02", "s0", "l0"),
                        MakeNode("node-03", "s0", "l0", true), MakeNode("node-04", "s0", "l1"),
                        MakeNode("node-05", "s0", "l1", true), MakeNode("node-06", "s1", "l2"),
                        MakeNode("node-07", "s1", "l2", true)};
    for (const Node& n : all) {
      if (skip.count(n.id) == 0) {
        ASSERT_TRUE(cluster_.UpsertNode(n).ok());
      }
    }
    ASSERT_TRUE(cluster_.Allocate("job-1", placement_).ok());
  }

  // `needs_replay` sets an sdc_suspected finding's verdict when it has none (kNeedsReplay, else kMajority).
  RecoveryDecision Decide(Finding f, bool needs_replay = false, std::span<const Finding> earlier = {}) {
    if (f.kind == FindingKind::kSdcSuspected && f.sdc_verdict == SdcVerdict::kNone)
      f.sdc_verdict = needs_replay ? SdcVerdict::kNeedsReplay : SdcVerdict::kMajority;
    return DecideRecovery({.job = job_,
                           .placement = placement_,
                           .cluster = cluster_,
                           .finding = f,
                           .last_known_good = lkg_,
                           .latest_complete = latest_,
                           .now = kT0,
                           .last_restart_at = last_restart_,
                           .consecutive_restarts = consecutive_,
                           .pending_replay_nodes = replay_nodes_,
                           .earlier_findings = earlier,
                           .vouched_nodes = vouched_,
                           .set_aside_replay = set_aside_replay_,
                           .hashes_ever_agreed = hashes_agreed_,
                           .daemon_was_late = daemon_late_});
  }

  Job job_;
  Placement placement_;
  Cluster cluster_;
  std::set<std::string> replay_nodes_;  // as JobHealth keeps them
  std::optional<Checkpoint> lkg_ = Ckpt(40, CheckpointStatus::kGood);
  std::optional<Checkpoint> latest_ = Ckpt(50, CheckpointStatus::kComplete);
  std::optional<Time> last_restart_;
  std::set<std::string> vouched_;  // nodes whose agent lists the attempt's processes running
  bool hashes_agreed_ = true;      // some hash check of the job agreed
  bool set_aside_replay_ = false;  // a replay without one suspect is under way
  int consecutive_ = 0;
  bool daemon_late_ = false;  // health/lateness.h: the daemon stalled within the last two leases
};

}  // namespace shepherd::testing
