// The run simulator's public face: causes, detection latencies, input bounds, the Llama 3 scenario, and
// the aggregation of seeds. One seed's event loop is goodput/sim_run.cpp.
#include "goodput/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "goodput/sim_run.h"
#include "scheduler/inventory_gen.h"

namespace shepherd {

namespace {

constexpr const char* kCauseNames[kFaultCauseCount] = {"gpu",      "host", "network",
                                                       "software", "sdc",  "planned"};

// Student's t, two-sided 95 %, by degrees of freedom 1..30.
constexpr double kT975[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                              2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                              2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
double T975(int df) {
  if (df < 1) return 0;
  return df <= 30 ? kT975[df - 1] : 1.96 + 2.4 / df;  // within 0.002 of the table beyond 30
}

bool Finite(double x) {
  return std::isfinite(x);
}

void CheckRange(std::vector<FieldError>* errs, const std::string& field, double v, double lo, double hi,
                const std::string& what) {
  if (!Finite(v) || v < lo || v > hi) errs->push_back({field, "must be " + what});
}

double MeanSdcDetection(const SimInput& in) {
  return in.policy.sdc_check_every_steps * in.timing.step_s / 2;
}

}  // namespace

const char* ToString(FaultCause c) {
  return kCauseNames[static_cast<int>(c)];
}

std::optional<FaultCause> FaultCauseFromString(std::string_view s) {
  for (int c = 0; c < kFaultCauseCount; ++c)
    if (s == kCauseNames[c]) return static_cast<FaultCause>(c);
  return std::nullopt;
}

BadputCause BadputCauseOf(FaultCause c) {
  switch (c) {
    case FaultCause::kGpu:
      return BadputCause::kGpuFault;
    case FaultCause::kHost:
      return BadputCause::kNodeLost;
    case FaultCause::kNetwork:
      return BadputCause::kHang;
    case FaultCause::kSoftware:
      return BadputCause::kUserError;
    case FaultCause::kSdc:
      return BadputCause::kSdc;
    case FaultCause::kPlanned:
      return BadputCause::kOperatorRestart;
  }
  return BadputCause::kOther;
}

double FaultModel::total() const {
  double t = 0;
  for (double r : per_node_hour) t += r;
  return t;
}

FaultModel Llama3FaultModel() {
  FaultModel m;
  const double node_hours = kLlama3Nodes * kLlama3Days * 24;
  for (int c = 0; c < kFaultCauseCount; ++c) m.per_node_hour[c] = kLlama3Interruptions[c] / node_hours;
  return m;
}

double DetectionLatency(FaultCause c, const DetectorSettings& d, const Policy& policy) {
  switch (c) {
    case FaultCause::kGpu:
      return d.agent_heartbeat_interval_s / 2;
    case FaultCause::kHost:
      return d.node_heartbeat_timeout_s + d.tick_interval_s / 2;
    case FaultCause::kNetwork:
      return policy.hang_timeout_s + d.tick_interval_s / 2;
    case FaultCause::kSoftware:
      return d.agent_supervise_interval_s / 2;
    case FaultCause::kSdc:
    case FaultCause::kPlanned:
      return 0;
  }
  return 0;
}

Status ValidateSimInput(const SimInput& in) {
  std::vector<FieldError> errs;
  int64_t gpus = 0;
  std::set<std::string> ids;
  for (const Node& n : in.fleet) {
    gpus += n.gpus;
    ids.insert(n.id);
  }
  if (in.fleet.empty()) errs.push_back({"nodes", "the fleet has no nodes"});
  if (static_cast<int64_t>(in.fleet.size()) > kSimMaxFleetNodes || gpus > kSimMaxFleetGpus)
    errs.push_back({"nodes", "the fleet may hold at most " + std::to_string(kSimMaxFleetNodes) +
                                 " nodes and " + std::to_string(kSimMaxFleetGpus) +
                                 " GPUs (spares included)"});
  if (ids.size() != in.fleet.size()) errs.push_back({"nodes", "node ids must be unique"});
  const Plan& p = in.plan;
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.cp < 1)
    errs.push_back({"plan", "tp, pp, dp and cp must be at least 1"});
  else if (static_cast<int64_t>(p.world_size()) > gpus)
    errs.push_back({"plan", "the job needs more GPUs than the fleet has"});

  const double hours = in.duration_s / 3600;
  CheckRange(&errs, "days", in.duration_s, 3600, kSimMaxDays * 86400,
             "from 1 hour to " + std::to_string(static_cast<int>(kSimMaxDays)) + " days");
  for (int c = 0; c < kFaultCauseCount; ++c)
    CheckRange(&errs, std::string("faults.") + kCauseNames[c], in.faults.per_node_hour[c], 0,
               kSimMaxRatePerNodeHour, "a rate per node-hour from 0 to 1");
  const SimTiming& t = in.timing;
  CheckRange(&errs, "timing.step_s", t.step_s, 0.01, 3600, "from 0.01 to 3600 seconds");
  CheckRange(&errs, "timing.save_s", t.save_s, 0.001, 86400, "from 0.001 to 86400 seconds");
  CheckRange(&errs, "timing.load_s", t.load_s, 0, 86400, "from 0 to 86400 seconds");
  CheckRange(&errs, "timing.launch_s", t.launch_s, 0, 86400, "from 0 to 86400 seconds");
  CheckRange(&errs, "timing.init_s", t.init_s, 0, 86400, "from 0 to 86400 seconds");
  CheckRange(&errs, "timing.stop_s", t.stop_s, 0, 86400, "from 0 to 86400 seconds");
  if (Finite(t.step_s) && t.step_s > 0 && Finite(in.duration_s) && in.duration_s / t.step_s > kSimMaxSteps)
    errs.push_back({"timing.step_s", "the run would take more than 1e9 steps (days / step_s)"});
  if (in.interval_s)
    CheckRange(&errs, "interval_s", *in.interval_s, std::max(0.01, t.step_s), std::max(in.duration_s, 1.0),
               "at least one step and at most the run's duration, in seconds of training");
  CheckRange(&errs, "repair_hours", in.repair_s, 0, 366 * 86400.0, "from 0 to 8784 hours");
  CheckRange(&errs, "manual_response_hours", in.manual_response_s, 0, 30 * 86400.0, "from 0 to 720 hours");
  if (in.seeds < 1 || in.seeds > kSimMaxSeeds)
    errs.push_back({"seeds", "must be from 1 to " + std::to_string(kSimMaxSeeds)});
  const Policy& pol = in.policy;
  CheckRange(&errs, "policy.hang_timeout_s", pol.hang_timeout_s, 0, 86400, "from 0 to 86400 seconds");
  CheckRange(&errs, "policy.restart_backoff_s", pol.restart_backoff_s, 0, 3600, "from 0 to 3600 seconds");
  if (pol.sdc_check_every_steps < 0 || pol.sdc_check_every_steps > 1000000)
    errs.push_back({"policy.sdc_check_every_steps", "must be from 0 to 1000000"});
  if (pol.sdc_check_every_steps == 0 && in.faults.per_node_hour[static_cast<int>(FaultCause::kSdc)] > 0)
    errs.push_back({"policy.sdc_check_every_steps",
                    "sdc faults need parameter-hash checks (> 0): without them corruption is never found"});
  if (pol.max_restarts < 0) errs.push_back({"policy.max_restarts", "must be at least 0"});
  if (pol.good_after_steps < 0 || pol.good_after_steps > 1000000)
    errs.push_back({"policy.good_after_steps", "must be from 0 to 1000000"});
  const DetectorSettings& d = in.detectors;
  CheckRange(&errs, "detectors.tick_interval_s", d.tick_interval_s, 0, 3600, "from 0 to 3600 seconds");
  CheckRange(&errs, "detectors.node_heartbeat_timeout_s", d.node_heartbeat_timeout_s, 0, 3600,
             "from 0 to 3600 seconds");
  CheckRange(&errs, "detectors.agent_lease_s", d.agent_lease_s, 0, 3600, "from 0 to 3600 seconds");
  CheckRange(&errs, "detectors.agent_heartbeat_interval_s", d.agent_heartbeat_interval_s, 0, 3600,
             "from 0 to 3600 seconds");
  CheckRange(&errs, "detectors.agent_supervise_interval_s", d.agent_supervise_interval_s, 0, 3600,
             "from 0 to 3600 seconds");
  if (!errs.empty()) return InvalidContent("invalid simulation input", std::move(errs));

  // Work bounds: expected faults of one seed over the whole fleet, and all seeds' faults × the fleet's
  // nodes (each event's work is linear in the fleet).
  const double per_seed = in.faults.total() * static_cast<double>(in.fleet.size()) * hours;
  if (per_seed > kSimMaxEventsPerSeed)
    errs.push_back({"faults", "about " + std::to_string(static_cast<int64_t>(per_seed)) +
                                  " faults per run expected (rates × nodes × hours); at most " +
                                  std::to_string(static_cast<int64_t>(kSimMaxEventsPerSeed)) +
                                  " are simulated: lower the rates, the fleet or the days"});
  if (per_seed * in.seeds * static_cast<double>(in.fleet.size()) > kSimMaxWork)
    errs.push_back({"seeds", "seeds × expected faults × fleet nodes is over " +
                                 std::to_string(static_cast<int64_t>(kSimMaxWork)) +
                                 " (about a minute of work): fewer seeds, days or nodes"});
  if (!errs.empty()) return InvalidContent("the simulation would be too large", std::move(errs));
  return Status::Ok();
}

Result<SimResult> Simulate(const SimInput& in, const std::atomic<bool>* cancel) {
  if (Status s = ValidateSimInput(in); !s.ok()) return s;
  SimResult r;
  r.job_gpus = in.plan.world_size();
  r.job_nodes = r.job_gpus / std::max(1, in.fleet.front().gpus);
  for (const Node& n : in.fleet) r.spares += n.spare ? 1 : 0;
  double rate = in.faults.total();
  double weighted_detection = 0;
  for (int c = 0; c < kFaultCauseCount; ++c) {
    const auto cause = static_cast<FaultCause>(c);
    r.detection_s[c] =
        cause == FaultCause::kSdc ? MeanSdcDetection(in) : DetectionLatency(cause, in.detectors, in.policy);
    weighted_detection += in.faults.per_node_hour[c] * r.detection_s[c];
  }
  if (rate > 0) {
    const SimTiming& t = in.timing;
    AdviceInput a{.save_s = t.save_s,
                  .restart_s = weighted_detection / rate + t.stop_s + t.launch_s + t.init_s,
                  .load_s = t.load_s,
                  .nodes = r.job_nodes,
                  .interruptions_per_node_hour = rate,
                  .current_interval_s = in.interval_s};
    r.advice = AdviseCheckpoints(a);
  }
  r.interval_s = in.interval_s ? *in.interval_s : (rate > 0 ? r.advice.interval_s : in.duration_s);

  const int days = static_cast<int>(std::ceil(in.duration_s / 86400));
  std::vector<int> day_min(days, std::numeric_limits<int>::max());
  r.min_ready_spares = std::numeric_limits<int>::max();
  std::vector<double> ettr;
  for (int i = 0; i < in.seeds; ++i) {
    Result<SeedOutcome> o =
        sim_internal::RunSeed(in, r.interval_s, in.seed + static_cast<uint64_t>(i), &day_min, cancel);
    if (!o.ok()) return o.status();
    ettr.push_back(o->ettr);
    for (int b = 0; b < kBucketCount; ++b) r.bucket_s[b] += o->bucket_s[b] / in.seeds;
    for (const auto& [cause, s] : o->badput_s) r.badput_gpu_hours[cause] += s * r.job_gpus / 3600 / in.seeds;
    r.restarts_mean += static_cast<double>(o->restarts) / in.seeds;
    r.min_ready_spares = std::min(r.min_ready_spares, o->min_ready_spares);
    r.spares_needed = std::max(r.spares_needed, o->max_out_of_service);
    r.seeds.push_back(std::move(o).value());
  }
  double sum = 0;
  for (double e : ettr) sum += e;
  r.ettr_mean = sum / static_cast<double>(ettr.size());
  double ss = 0;
  for (double e : ettr) ss += (e - r.ettr_mean) * (e - r.ettr_mean);
  const int n = static_cast<int>(ettr.size());
  const double half = n > 1 ? T975(n - 1) * std::sqrt(ss / (n - 1)) / std::sqrt(static_cast<double>(n)) : 0;
  r.ettr_low = std::max(0.0, r.ettr_mean - half);
  r.ettr_high = std::min(1.0, r.ettr_mean + half);
  for (int d = 0; d < days; ++d)
    r.spares_by_day.push_back(
        {.day = static_cast<double>(d),
         .min_ready_spares = day_min[d] == std::numeric_limits<int>::max() ? 0 : day_min[d]});
  return r;
}

SimInput Llama3Scenario(int nodes, double days, int spares_per_leaf) {
  constexpr int kJobNodesPerLeaf = 16, kLeavesPerSpine = 16, kGpusPerNode = 8;
  SimInput in;
  nodes = std::max(1, nodes);
  const int per_leaf = std::min(kJobNodesPerLeaf, nodes);
  const int leaves = (nodes + per_leaf - 1) / per_leaf;
  InventoryShape shape;
  shape.leaves_per_spine = std::min(kLeavesPerSpine, leaves);
  shape.spines = (leaves + shape.leaves_per_spine - 1) / shape.leaves_per_spine;
  shape.nodes_per_leaf = per_leaf + std::max(0, spares_per_leaf);
  shape.spares_per_leaf = std::max(0, spares_per_leaf);
  shape.gpus_per_node = kGpusPerNode;
  // Generated up to twice the bound (callers bound `nodes`); ValidateSimInput then refuses what is over it.
  if (static_cast<int64_t>(shape.spines) * shape.leaves_per_spine * shape.nodes_per_leaf <=
      2 * kSimMaxFleetNodes)
    in.fleet = GenerateInventory(shape);
  in.plan.tp = kGpusPerNode;
  in.plan.pp = nodes % 16 == 0 ? 16 : 1;
  in.plan.dp = nodes * kGpusPerNode / (in.plan.tp * in.plan.pp);
  in.policy.max_restarts = 100000;  // a run of weeks is given a budget that fits it
  in.faults = Llama3FaultModel();
  in.duration_s = days * 86400;
  return in;
}

}  // namespace shepherd
