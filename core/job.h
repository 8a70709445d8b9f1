// Jobs, their plans, attempts, placements, checkpoints and findings: the domain records that the
// controller holds in memory and storage/ keeps durable (as JSON, see core/json.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"

namespace shepherd {

enum class Precision { kBf16, kFp16, kFp32 };
enum class Optimizer { kAdam, kSgd };  // adam covers AdamW; sgd is SGD with momentum
enum class Recompute { kNone, kSelective, kFull };

struct ModelSpec {
  double parameters = 0;  // total parameter count
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seq_len = 0;
  int vocab = 0;
};

struct TrainingSpec {
  int micro_batch_size = 1;
  int global_batch_size = 0;
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdam;
  Recompute activation_recompute = Recompute::kSelective;
};

struct ParallelismSpec {
  bool automatic = false;  // "parallelism": "auto"
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int zero_stage = 0;
};

struct Resources {
  int gpus = 0;
  int gpus_per_node = 8;
  std::optional<double> gpu_memory_gib;  // GPU size when no inventory is meant (dry-run plans)
};

struct CheckpointSpec {
  std::string dir;
  int every_steps = 0;  // 0: the job does not promise periodic checkpoints
};

struct Policy {
  double heartbeat_interval_s = 1;
  double heartbeat_timeout_s = 10;
  double startup_grace_s = 120;  // heartbeats may be absent this long after an attempt starts
  double hang_timeout_s = 60;
  int sdc_check_every_steps = 100;
  int max_restarts = 10;
  double restart_backoff_s = 5;  // doubled per consecutive restart, capped at 300 s
  bool use_spares = true;
  double straggler_factor = 1.5;    // slower than median × factor ...
  int straggler_window_steps = 20;  // ... over this many steps is a straggler
  double loss_spike_factor = 3;     // loss above rolling median × factor is a spike
  int good_after_steps = 10;        // K healthy steps that make a complete checkpoint good
};

struct JobSpec {
  std::string name;
  ModelSpec model;
  TrainingSpec training;
  ParallelismSpec parallelism;
  Resources resources;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  CheckpointSpec checkpoint;
  Policy policy;
  // Who submitted the job (the principal's name). Set by the API from the caller's credential, never from
  // the request body; stored with the job (top-level "owner" of its JSON); "" for jobs from before auth.
  std::string owner;
};

// A concrete parallel layout. micro_batches = global_batch / (micro_batch_size · dp).
struct Plan {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int zero_stage = 0;
  int micro_batches = 1;
  int micro_batch_size = 1;
  int world_size() const { return tp * pp * dp; }
  bool operator==(const Plan&) const = default;
};

enum class JobState { kQueued, kRunning, kRecovering, kSucceeded, kFailed, kCancelled };
const char* ToString(JobState s);
std::optional<JobState> JobStateFromString(const std::string& s);
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

// Rank order (Megatron default): rank = tp + TP·(dp + DP·pp). TP fastest, then DP, then PP.
struct RankSlot {
  int rank = 0;
  std::string node;
  int gpu = 0;
  int tp = 0;
  int pp = 0;
  int dp = 0;
  bool operator==(const RankSlot&) const = default;
};

struct Placement {
  int attempt = 0;
  std::vector<RankSlot> ranks;  // indexed by rank
};

struct Job {
  std::string id;
  int64_t seq = 0;  // submission order, for FIFO
  JobSpec spec;
  Plan plan;
  JobState state = JobState::kQueued;
  int attempt = 0;   // current attempt number; 0 while never started
  int restarts = 0;  // automatic restarts used against policy.max_restarts
  std::string reason;
  Time created_at{};
  Time updated_at{};
};

struct Attempt {
  std::string job;
  int number = 0;
  Time started_at{};
  std::optional<Time> ended_at;
  std::string reason;             // why this attempt was started
  std::string resume_checkpoint;  // checkpoint id, empty when starting from scratch
  int64_t resume_step = 0;
  Placement placement;
};

enum class CheckpointStatus { kPending, kComplete, kGood, kBad };
const char* ToString(CheckpointStatus s);

struct Checkpoint {
  std::string id;  // "<job>/<attempt>/<step>"
  std::string job;
  int attempt = 0;
  int64_t step = 0;
  std::string path;
  CheckpointStatus status = CheckpointStatus::kPending;
  std::string reason;
  int ranks_reported = 0;
  Time created_at{};
  Time updated_at{};
};

struct Finding {
  std::string id;
  std::string job;
  int attempt = 0;
  std::string kind;  // heartbeat_lost, node_lost, hang, straggler, sdc_suspected, ...
  std::vector<int> ranks;
  std::vector<std::string> nodes;
  std::optional<int64_t> step;
  std::optional<int64_t> onset_step;
  Time detected_at{};
  std::string detail;
  std::vector<std::string> actions;
};

}  // namespace shepherd
