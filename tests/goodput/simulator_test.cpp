// The run simulator against closed forms written out here (never the simulator's or the advice's own
// helpers), its reproducibility, its use of the recovery policy, and its input bounds.
#include "goodput/simulator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "scheduler/inventory_gen.h"

namespace shepherd {
namespace {

// One leaf: `job_nodes` nodes of 8 GPUs for a TP 8 × DP job_nodes job and `spares` spares.
SimInput SmallRun(int job_nodes, int spares) {
  SimInput in;
  InventoryShape shape{.nodes_per_leaf = job_nodes + spares, .spares_per_leaf = spares};
  in.fleet = GenerateInventory(shape);
  in.plan = Plan{.tp = 8, .pp = 1, .dp = job_nodes};
  in.policy.max_restarts = 1000000;
  return in;
}

// Daly's model with exponential interruptions of mean M, compute τ between saves, save δ and restart R,
// written out from the paper (FGCS 22, 2006): T_w = M e^{R/M} (e^{(τ+δ)/M} − 1) T_s / τ.
double DalyEttr(double tau, double delta, double restart, double mtbf) {
  return tau / (mtbf * std::exp(restart / mtbf) * (std::exp((tau + delta) / mtbf) - 1));
}

// Daly's higher-order optimum, written out: sqrt(2δM)·[1 + sqrt(δ/2M)/3 + (δ/2M)/9] − δ.
double DalyOptimum(double delta, double mtbf) {
  const double x = delta / (2 * mtbf);
  return std::sqrt(2 * delta * mtbf) * (1 + std::sqrt(x) / 3 + x / 9) - delta;
}

// A single exponential cause (gpu faults: the node fails, a spare takes its ranks) with fixed costs: no
// detection delay, no backoff, every checkpoint good at once (no hash checks, no healthy-steps wait).
SimInput FixedCostRun(double mtbf_s, double restart_s, double save_s, double interval_s, int seeds) {
  SimInput in = SmallRun(2, 6);
  in.faults.per_node_hour[static_cast<int>(FaultCause::kGpu)] = 3600 / mtbf_s / 2;  // 2 job nodes
  in.detectors.agent_heartbeat_interval_s = 0;                                      // detection 0
  in.policy.restart_backoff_s = 0;
  in.policy.sdc_check_every_steps = 0;
  in.policy.good_after_steps = 0;
  in.timing = SimTiming{.step_s = 1,
                        .save_s = save_s,
                        .load_s = restart_s / 4,
                        .launch_s = restart_s / 4,
                        .init_s = restart_s / 4,
                        .stop_s = restart_s / 4};
  in.interval_s = interval_s;
  in.duration_s = 366 * 86400.0;
  in.repair_s = 600;
  in.seeds = seeds;
  return in;
}

TEST(Simulator, MatchesDalysClosedFormWithinTwoPercent) {
  const double mtbf = 10 * 3600, restart = 600, save = 60, tau = 3600;
  Result<SimResult> r = Simulate(FixedCostRun(mtbf, restart, save, tau, 8));
  ASSERT_TRUE(r.ok()) << r.status().message();
  // By hand: 36000 · e^{600/36000} · (e^{3660/36000} − 1) = 3917.3 s of wall per 3600 s of work: 0.919.
  const double expected = DalyEttr(tau, save, restart, mtbf);
  EXPECT_NEAR(expected, 0.919, 0.001);
  EXPECT_NEAR(r->ettr_mean, expected, 0.02 * expected);
  // The faults the job met are the rate's: 366 days / 10 h per seed, within a few standard deviations.
  double faults = 0;
  for (const SeedOutcome& s : r->seeds) faults += s.interruptions[static_cast<int>(FaultCause::kGpu)];
  const double per_seed = faults / 8, expected_faults = r->seeds[0].wall_s / mtbf;
  EXPECT_NEAR(per_seed, expected_faults, 4 * std::sqrt(expected_faults / 8));
}

TEST(Simulator, IntervalSweepFindsDalysOptimum) {
  const double mtbf = 10 * 3600, restart = 300, save = 60;
  const double optimum = DalyOptimum(save, mtbf);  // ≈ 2,039 s
  double best_tau = 0, best = 0;
  std::vector<double> sweep;
  for (double tau = optimum / 4; tau <= optimum * 4; tau *= 1.25) sweep.push_back(tau);
  for (double tau : sweep) {
    Result<SimResult> r = Simulate(FixedCostRun(mtbf, restart, save, tau, 16));
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->ettr_mean > best) {
      best = r->ettr_mean;
      best_tau = tau;
    }
  }
  EXPECT_GE(best_tau, optimum / 1.25 / 1.0001) << "best swept interval " << best_tau << " s";
  EXPECT_LE(best_tau, optimum * 1.25 * 1.0001) << "best swept interval " << best_tau << " s";
}

TEST(Simulator, SameSeedSameResultOtherSeedOther) {
  SimInput in = Llama3Scenario(64, 20);
  in.seeds = 2;
  Result<SimResult> a = Simulate(in), b = Simulate(in);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->seeds.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a->seeds[i].ettr, b->seeds[i].ettr);
    EXPECT_EQ(a->seeds[i].events, b->seeds[i].events);
    EXPECT_EQ(a->seeds[i].interruptions, b->seeds[i].interruptions);
  }
  EXPECT_NE(a->seeds[0].events, a->seeds[1].events);
  in.seed = 99;
  Result<SimResult> c = Simulate(in);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->seeds[0].ettr, a->seeds[0].ettr);
}

TEST(Simulator, BucketsAddUpToTheWallTime) {
  SimInput in = Llama3Scenario(128, 30);
  in.seeds = 2;
  Result<SimResult> r = Simulate(in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const SeedOutcome& s : r->seeds) {
    double sum = 0;
    for (double b : s.bucket_s) sum += b;
    EXPECT_NEAR(sum, s.wall_s, 1e-6 * s.wall_s);
    EXPECT_DOUBLE_EQ(s.wall_s, 30 * 86400.0);
    EXPECT_NEAR(s.ettr, s.productive_s / s.wall_s, 1e-12);
    double badput = 0;
    for (const auto& [cause, secs] : s.badput_s) badput += secs;
    const auto at = [&](Bucket b) { return s.bucket_s[static_cast<int>(b)]; };
    EXPECT_NEAR(badput,
                at(Bucket::kLostProgress) + at(Bucket::kDetection) + at(Bucket::kRecovery) +
                    at(Bucket::kBackoff) + at(Bucket::kQueued),
                1e-6 * s.wall_s);
  }
}

// GPU faults fail their node (the policy's kFail), a spare takes the ranks, and the node comes back as a
// spare after the repair time; with no spare and a long repair the job waits in the queue.
TEST(Simulator, SparesAreSpentAndTheQueueWaitsWhenNoneIsLeft) {
  SimInput with = SmallRun(4, 2);
  with.faults.per_node_hour[static_cast<int>(FaultCause::kGpu)] = 0.01;
  with.duration_s = 30 * 86400.0;
  with.repair_s = 3600;
  with.seeds = 2;
  with.interval_s = 1800;
  Result<SimResult> a = Simulate(with);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->spares, 2);
  for (const SeedOutcome& s : a->seeds) {
    EXPECT_GT(s.interruptions[0], 0);
    EXPECT_EQ(s.restarts, s.interruptions[0]);  // every gpu fault: one restart
  }

  SimInput without = SmallRun(4, 0);
  without.faults = with.faults;
  without.duration_s = with.duration_s;
  without.repair_s = 24 * 3600;
  without.seeds = 2;
  without.interval_s = 1800;
  Result<SimResult> b = Simulate(without);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->min_ready_spares, 0);
  for (const SeedOutcome& s : b->seeds) {
    EXPECT_GT(s.queued, 0);
    EXPECT_GT(s.bucket_s[static_cast<int>(Bucket::kQueued)], 0);
  }
  EXPECT_LT(b->ettr_mean, a->ettr_mean);
}

// The Llama 3 counts from Table 5, grouped: 419 unexpected and 47 planned interruptions.
TEST(Simulator, Llama3FaultModelIsThePublishedCounts) {
  int unexpected = 0;
  for (int c = 0; c < kFaultCauseCount; ++c)
    if (static_cast<FaultCause>(c) != FaultCause::kPlanned) unexpected += kLlama3Interruptions[c];
  EXPECT_EQ(unexpected, 419);
  EXPECT_EQ(kLlama3Interruptions[static_cast<int>(FaultCause::kPlanned)], 47);
  const FaultModel m = Llama3FaultModel();
  EXPECT_NEAR(m.per_node_hour[static_cast<int>(FaultCause::kGpu)] * 2048 * 54 * 24, 262, 1e-9);
  EXPECT_NEAR(m.total() * 2048 * 54 * 24, 466, 1e-9);
}

bool Names(const Status& s, const std::string& field) {
  for (const FieldError& e : s.fields())
    if (e.field == field) return true;
  return false;
}

TEST(Simulator, BadInputIsRefusedNamingTheField) {
  SimInput in = Llama3Scenario(64, 10);
  in.faults.per_node_hour[0] = -1;
  EXPECT_TRUE(Names(ValidateSimInput(in), "faults.gpu"));
  in = Llama3Scenario(64, 10);
  in.faults.per_node_hour[1] = std::nan("");
  EXPECT_TRUE(Names(ValidateSimInput(in), "faults.host"));
  in = Llama3Scenario(64, 10);
  in.faults.per_node_hour[2] = 0.9;  // 0.9 × 68 nodes × 240 h ≈ 14,700 faults: allowed ...
  EXPECT_TRUE(ValidateSimInput(in).ok());
  in = Llama3Scenario(2048, 54);
  in.faults.per_node_hour[2] = 0.9;  // ... 0.9 × 2,176 × 1,296 h ≈ 2.5 million: refused
  EXPECT_TRUE(Names(ValidateSimInput(in), "faults"));
  in = Llama3Scenario(64, 10);
  in.timing.step_s = 0.001;  // 864 million steps in 10 days is fine ... but 0.001 s is below the floor
  EXPECT_TRUE(Names(ValidateSimInput(in), "timing.step_s"));
  in = Llama3Scenario(64, 366);
  in.timing.step_s = 0.01;  // 3.2e9 steps
  EXPECT_TRUE(Names(ValidateSimInput(in), "timing.step_s"));
  in = Llama3Scenario(64, 400);
  EXPECT_TRUE(Names(ValidateSimInput(in), "days"));
  in = Llama3Scenario(40000, 1);  // 42,500 nodes, 340,000 GPUs
  EXPECT_TRUE(Names(ValidateSimInput(in), "nodes"));
  in = Llama3Scenario();  // the 54-day 16,384-GPU run: 8 seeds take seconds each ...
  EXPECT_TRUE(ValidateSimInput(in).ok());
  in.seeds = 30;  // ... 30 would be minutes of work
  EXPECT_TRUE(Names(ValidateSimInput(in), "seeds"));
  in = Llama3Scenario(64, 10);
  in.seeds = 65;
  EXPECT_TRUE(Names(ValidateSimInput(in), "seeds"));
  in.seeds = 0;
  EXPECT_TRUE(Names(ValidateSimInput(in), "seeds"));
  in = Llama3Scenario(64, 10);
  in.interval_s = -5;
  EXPECT_TRUE(Names(ValidateSimInput(in), "interval_s"));
  in = Llama3Scenario(64, 10);
  in.policy.sdc_check_every_steps = 0;  // sdc faults with no hash checks would never be found
  EXPECT_TRUE(Names(ValidateSimInput(in), "policy.sdc_check_every_steps"));
  EXPECT_EQ(Simulate(in).status().code(), Code::kInvalidContent);
  in = Llama3Scenario(64, 10);
  in.plan.dp *= 4;  // more GPUs than the fleet
  EXPECT_TRUE(Names(ValidateSimInput(in), "plan"));
}

TEST(Simulator, CauseNamesRoundTrip) {
  for (int c = 0; c < kFaultCauseCount; ++c) {
    const auto cause = static_cast<FaultCause>(c);
    EXPECT_EQ(FaultCauseFromString(ToString(cause)), cause);
  }
  EXPECT_FALSE(FaultCauseFromString("cosmic_rays").has_value());
}

}  // namespace
}  // namespace shepherd
