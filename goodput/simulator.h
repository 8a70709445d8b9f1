// The run simulator: a whole training run in simulated time, driven by the daemon's own decision code.
// Pure: input in, result out; no clock reads, no I/O, no threads. The only randomness is a std::mt19937_64
// seeded from SimInput::seed, so the same input gives the same result on every machine.
//
// Each fault becomes the Finding the daemon would record for it, on a node of the current placement, and
// goes through DecideRecovery (scheduler/recovery.h) with a real Cluster holding the job's allocation;
// restarts a decision defers are started through PlaceRestart after RestartNotBefore's backoff, the loop
// breakers (scheduler/loop_breakers.h) judge every restart, and a planned interruption is a ManualRestart.
// Node actions are applied to the Cluster (a failed or cordoned node goes to repair and comes back as a
// spare after repair_s); the placement is replaced as decided; the job waits in the queue when no node can
// take its ranks. No policy is re-implemented here: what the simulator adds is the world around the
// policy (when faults happen, how long detection, stops, launches, loads and saves take).
//
// Not run: the detectors themselves (heartbeat, hang watchdog, SDC checker). Feeding them synthetic report
// streams would cost ranks × steps work (16,384 ranks × ~800,000 steps for the Llama 3 run); instead a
// fault's detection latency is derived from the same settings the detectors use (DetectionLatency).
// Checkpoint grading follows the ledger's rule (health/checkpoint_ledger.h) on synthetic evidence: a
// checkpoint is good once a parameter-hash check at or after its step agreed and good_after_steps steps
// followed it; checkpoints after an SDC onset never become good.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/node.h"
#include "core/status.h"
#include "goodput/accounting.h"
#include "goodput/checkpoint_advice.h"

namespace shepherd {

// What interrupts a run, as the simulator injects it, and the finding each becomes:
enum class FaultCause {
  kGpu,       // gpu_fault on one node (the agent's report): the node fails, its ranks move
  kHost,      // node_lost (the agent falls silent): the node is cordoned, its ranks move
  kNetwork,   // hang with no culprit ranks on one node (a communication fault): restart, blame on recurrence
  kSoftware,  // process_exit of one rank with exit code 1 (a clean exit): restart on the same nodes
  kSdc,       // sdc_suspected with a majority verdict on one rank: cordon, restart from before the onset
  kPlanned,   // an operator's planned restart: save a checkpoint, then ManualRestart from it
};
inline constexpr int kFaultCauseCount = 6;
const char* ToString(FaultCause c);  // "gpu", "host", "network", "software", "sdc", "planned"
std::optional<FaultCause> FaultCauseFromString(std::string_view s);
BadputCause BadputCauseOf(FaultCause c);  // gpu_fault, node_lost, hang, user_error, sdc, operator_restart

// Faults per node-hour, per cause; each node of the job draws them independently (exponential gaps). Nodes
// outside the job (spares, free nodes) draw gpu and host faults at the same rates: those take them out of
// the pool without interrupting the job.
struct FaultModel {
  std::array<double, kFaultCauseCount> per_node_hour{};
  double total() const;
};

// Llama 3 405B (Dubey et al., "The Llama 3 Herd of Models", 2024, §3.3.4 and Table 5): 419 unexpected
// interruptions and 47 planned ones in 54 days on 16,384 GPUs (2,048 nodes). Table 5's categories grouped by
// the finding each becomes: gpu 262 (faulty GPU 148, HBM3 72, SRAM 19, GPU system processor 17, thermal
// interface and sensor 6), host 46 (host maintenance 32, SSD 3, power supply 3, server chassis 2, IO
// expansion board 2, CPU 2, system memory 2), network 49 (switch and cable 35, NIC 7, NCCL watchdog
// timeouts 7), software 56 (software bug 54, dependency 2), sdc 6, planned 47.
inline constexpr std::array<int, kFaultCauseCount> kLlama3Interruptions = {262, 46, 49, 56, 6, 47};
inline constexpr double kLlama3Days = 54;
inline constexpr int kLlama3Nodes = 2048;
FaultModel Llama3FaultModel();

// The settings the daemon's detectors run with (daemon configuration and the job's policy; defaults are
// the daemon's). DetectionLatency turns them into the expected seconds from a fault to its finding.
struct DetectorSettings {
  double tick_interval_s = 1;               // the daemon's periodic evaluation (daemon/config.h)
  double node_heartbeat_timeout_s = 10;     // an agent silent this long: node_lost (control/controller.h)
  double agent_lease_s = 75;                // replacements start once the lost node's lease expired
  double agent_heartbeat_interval_s = 1;    // agents report GPU faults in their heartbeat (agent/agent.h)
  double agent_supervise_interval_s = 0.1;  // agents notice an exit this often and heartbeat at once
};
// Mean seconds from the fault to the finding: gpu half an agent heartbeat interval; host the node timeout
// plus half a tick; network the job's hang_timeout_s plus half a tick; software half the supervise
// interval. sdc is timed in the run (the next hash check after the onset) and planned has none: both 0.
double DetectionLatency(FaultCause c, const DetectorSettings& d, const Policy& policy);

// Seconds each phase of an attempt takes. Defaults: docs/goodput.md "Simulation" gives their sources.
struct SimTiming {
  double step_s = 6;     // one training step
  double save_s = 30;    // δ: training waits this long per checkpoint
  double load_s = 30;    // loading a checkpoint on restart (none from scratch)
  double launch_s = 30;  // attempt start → the ranks run
  double init_s = 120;   // the ranks run → ready to load (process groups, model build, data loader)
  double stop_s = 10;    // finding → the old ranks stopped (the agent's stop grace)
};

struct SimInput {
  std::vector<Node> fleet;  // REQUIRES: unique ids, valid per Cluster::UpsertNode
  TopologyLevels levels = DefaultTopologyLevels();
  Plan plan;      // the job's layout; world_size() GPUs
  Policy policy;  // the job's policy (max_restarts etc.)
  DetectorSettings detectors;
  FaultModel faults;
  SimTiming timing;
  std::optional<double> interval_s;  // compute seconds between checkpoints; nullopt: the advised interval
  double duration_s = kLlama3Days * 86400;
  double repair_s = 48 * 3600;      // a node taken out comes back (as a spare) this long after
  double manual_response_s = 3600;  // a failed job is restarted by hand (budget reset) this long after
  uint64_t seed = 1;
  int seeds = 8;
};

// Bounds of SimInput that ValidateSimInput enforces (docs/api.md "POST /v1/simulate").
inline constexpr int64_t kSimMaxFleetGpus = 262144;
inline constexpr int kSimMaxFleetNodes = 32768;
inline constexpr double kSimMaxDays = 366;
inline constexpr int kSimMaxSeeds = 64;
inline constexpr double kSimMaxRatePerNodeHour = 1;
// Expected faults of one seed (rates × fleet nodes × hours), and of all seeds × fleet nodes: an event costs
// work linear in the fleet (placement, allocation, the fault draw), about 2.5 µs per node here, so the
// work bound holds a request to about a minute (docs/benchmarks.md, "Run simulator").
inline constexpr double kSimMaxEventsPerSeed = 50000;
inline constexpr double kSimMaxWork = 2.5e7;
inline constexpr double kSimMaxSteps = 1e9;  // duration / step_s

// kInvalidContent naming each field out of bounds (paths as in the API: "faults.gpu", "timing.step_s",
// "duration_days", "seeds", "fleet", "plan", ...).
Status ValidateSimInput(const SimInput& in);

struct SparePoint {
  double day = 0;
  int min_ready_spares = 0;  // the fewest ready spares at any moment of that day (over seeds)
};

struct SeedOutcome {
  uint64_t seed = 0;
  double ettr = 0;
  double wall_s = 0;
  double productive_s = 0;
  std::array<double, kBucketCount> bucket_s{};  // indexed by Bucket; sums to wall_s
  std::map<BadputCause, double> badput_s;       // lost_progress + detection + recovery + backoff + queue
  std::array<int, kFaultCauseCount> interruptions{};  // faults that hit the job, per cause
  int restarts = 0;
  int queued = 0;                // restarts that waited in the queue for a node
  int manual_interventions = 0;  // the job failed (budget, loop breaker) and was restarted by hand
  int idle_node_faults = 0;      // gpu and host faults on nodes outside the job
  int min_ready_spares = 0;
  int max_out_of_service = 0;  // most nodes in repair at once
  int64_t final_step = 0;
  int64_t events = 0;
};

struct SimResult {
  double ettr_mean = 0;
  double ettr_low = 0;  // 95 % confidence interval of the mean over seeds (Student's t)
  double ettr_high = 0;
  double interval_s = 0;                               // the checkpoint interval simulated
  CheckpointAdvice advice;                             // AdviseCheckpoints for this job and fault model
  std::array<double, kFaultCauseCount> detection_s{};  // DetectionLatency per cause (sdc: mean, timed)
  double job_nodes = 0;
  double job_gpus = 0;
  int spares = 0;                                  // ready spares at the start
  std::map<BadputCause, double> badput_gpu_hours;  // mean over seeds
  std::array<double, kBucketCount> bucket_s{};     // mean over seeds
  double restarts_mean = 0;
  int min_ready_spares = 0;  // over seeds
  int spares_needed = 0;     // most nodes out of service at once, over seeds: a pool this large never waits
  std::vector<SparePoint> spares_by_day;
  std::vector<SeedOutcome> seeds;
};

// kInvalidContent when ValidateSimInput refuses `in` or the job cannot be placed on the fleet.
// `cancel` (optional): once it reads true the run stops within one event and answers kUnavailable (the
// daemon's shutdown must not wait for a simulation).
Result<SimResult> Simulate(const SimInput& in, const std::atomic<bool>* cancel = nullptr);

// The Llama 3 scenario: `nodes` job nodes of 8 GPUs (TP 8, PP 16 when it divides, DP the rest) in leaves of
// 16 job nodes plus `spares_per_leaf` spares, 16 leaves per spine; the Llama 3 fault model; `days`.
SimInput Llama3Scenario(int nodes = kLlama3Nodes, double days = kLlama3Days, int spares_per_leaf = 1);

}  // namespace shepherd
