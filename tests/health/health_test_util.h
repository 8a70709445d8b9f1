// Builders shared by the health/ tests: a job context with canonical rank order and reports by kind.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "health/job_monitor.h"
#include "tests/fakes/fake_clock.h"

namespace shepherd::testing {

// rank = tp + TP·(dp + DP·pp); `gpus_per_node` consecutive ranks share node "n<index>".
inline MonitorContext MakeContext(int tp, int pp, int dp, Time started_at, int gpus_per_node = 8,
                                  int zero_stage = 1) {
  MonitorContext c;
  c.job = "job-1";
  c.attempt = 1;
  c.started_at = started_at;
  c.plan.tp = tp;
  c.plan.pp = pp;
  c.plan.dp = dp;
  c.plan.zero_stage = zero_stage;
  c.placement.attempt = 1;
  for (int p = 0; p < pp; ++p)
    for (int d = 0; d < dp; ++d)
      for (int t = 0; t < tp; ++t) {
        int rank = t + tp * (d + dp * p);
        c.placement.ranks.resize(tp * pp * dp);
        c.placement.ranks[rank] = {
            rank, "n" + std::to_string(rank / gpus_per_node), rank % gpus_per_node, t, p, d};
      }
  c.policy.heartbeat_timeout_s = 10;
  c.policy.startup_grace_s = 120;
  c.policy.hang_timeout_s = 60;
  c.policy.sdc_check_every_steps = 100;
  c.policy.straggler_factor = 1.5;
  c.policy.straggler_window_steps = 5;
  c.policy.loss_spike_factor = 3;
  c.policy.good_after_steps = 10;
  return c;
}

inline std::unique_ptr<JobMonitor> MakeMonitor(const MonitorContext& c) {
  auto m = JobMonitor::Create(c);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

// An attempt past its startup (its grace and a hang timeout spent since it began): the rules of steady
// training. The startup rules have their own tests (hang_test.cpp, StartupTest).
inline std::unique_ptr<JobMonitor> Training(MonitorContext c) {
  c.started_at -= Seconds(c.policy.startup_grace_s + c.policy.hang_timeout_s);
  return MakeMonitor(c);
}

inline std::vector<Finding> OfKind(const std::vector<Finding>& fs, FindingKind kind) {
  std::vector<Finding> out;
  for (const auto& f : fs)
    if (f.kind == kind) out.push_back(f);
  return out;
}

inline Report Heartbeat(int rank, Time t, int64_t step = -1) {
  Report r;
  r.rank = rank;
  r.attempt = 1;
  r.time = t;
  r.kind = ReportKind::kHeartbeat;
  if (step >= 0) r.step = step;
  return r;
}

inline Report InCollective(int rank, Time t, const char* group, int64_t seq, int64_t step = -1) {
  Report r = Heartbeat(rank, t, step);
  CollectiveInfo c;
  c.seq = seq;
  c.op = "all_reduce";
  c.group = group;
  c.group_kind = GroupKindFromName(group);
  c.since = t;
  r.collective = c;
  return r;
}

inline Report Step(int rank, Time t, int64_t step, std::optional<double> loss = {},
                   std::optional<double> grad_norm = {}, std::optional<double> step_time = {}) {
  Report r;
  r.rank = rank;
  r.attempt = 1;
  r.time = t;
  r.kind = ReportKind::kStep;
  r.step = step;
  r.loss = loss;
  r.grad_norm = grad_norm;
  r.step_time_s = step_time;
  return r;
}

inline Report Finished(int rank, Time t, int64_t step) {
  Report r = Heartbeat(rank, t, step);
  r.kind = ReportKind::kFinished;
  return r;
}

inline Report Hash(int rank, Time t, int64_t step, const std::string& hash) {
  Report r;
  r.rank = rank;
  r.attempt = 1;
  r.time = t;
  r.kind = ReportKind::kParamHash;
  r.step = step;
  r.hash = hash;
  return r;
}

// Runs `seconds` of simulated time in 5 s ticks: `each(now)` sends that tick's reports, then Evaluate.
inline std::vector<Finding> RunTicks(JobMonitor& m, FakeClock& clock, int seconds,
                                     const std::function<void(Time)>& each) {
  std::vector<Finding> all;
  for (int t = 0; t < seconds; t += 5) {
    clock.AdvanceSeconds(5);
    each(clock.Now());
    for (auto& f : m.Evaluate(clock.Now())) all.push_back(f);
  }
  return all;
}

}  // namespace shepherd::testing
