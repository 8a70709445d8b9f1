#include "core/job.h"
#include "core/node.h"

namespace shepherd {

const char* ToString(NodeState s) {
  switch (s) {
    case NodeState::kAvailable:
      return "available";
    case NodeState::kAllocated:
      return "allocated";
    case NodeState::kSpare:
      return "spare";
    case NodeState::kCordoned:
      return "cordoned";
    case NodeState::kFailed:
      return "failed";
    case NodeState::kDraining:
      return "draining";
    case NodeState::kDrained:
      return "drained";
  }
  return "unknown";
}

std::optional<NodeState> NodeStateFromString(std::string_view s) {
  for (NodeState st : {NodeState::kAvailable, NodeState::kAllocated, NodeState::kSpare, NodeState::kCordoned,
                       NodeState::kFailed, NodeState::kDraining, NodeState::kDrained})
    if (s == ToString(st)) return st;
  return std::nullopt;
}

NodeState StateOf(const Node& n, int allocated_gpus) {
  if (n.failed) return NodeState::kFailed;
  if (!n.schedulable && n.drain) return allocated_gpus > 0 ? NodeState::kDraining : NodeState::kDrained;
  if (!n.schedulable) return NodeState::kCordoned;
  if (allocated_gpus > 0) return NodeState::kAllocated;
  if (n.spare) return NodeState::kSpare;
  return NodeState::kAvailable;
}

const char* ToString(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kLaunching:
      return "launching";
    case JobState::kRunning:
      return "running";
    case JobState::kRecovering:
      return "recovering";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::optional<JobState> JobStateFromString(const std::string& s) {
  for (JobState st : {JobState::kQueued, JobState::kLaunching, JobState::kRunning, JobState::kRecovering,
                      JobState::kSucceeded, JobState::kFailed, JobState::kCancelled})
    if (s == ToString(st)) return st;
  return std::nullopt;
}

const char* ToString(CheckpointStatus s) {
  switch (s) {
    case CheckpointStatus::kPending:
      return "pending";
    case CheckpointStatus::kComplete:
      return "complete";
    case CheckpointStatus::kGood:
      return "good";
    case CheckpointStatus::kBad:
      return "bad";
  }
  return "unknown";
}

namespace {
constexpr FindingKind kAllFindingKinds[] = {
    FindingKind::kHeartbeatLost,    FindingKind::kNodeLost,      FindingKind::kHang,
    FindingKind::kStraggler,        FindingKind::kSdcSuspected,  FindingKind::kSdcConfirmed,
    FindingKind::kSdcTransient,     FindingKind::kLossSpike,     FindingKind::kNonfiniteLoss,
    FindingKind::kGradNormSpike,    FindingKind::kProcessExit,   FindingKind::kGpuFault,
    FindingKind::kRestartRequested, FindingKind::kLossDivergence};
}  // namespace

const char* ToString(FindingKind k) {
  switch (k) {
    case FindingKind::kHeartbeatLost:
      return "heartbeat_lost";
    case FindingKind::kNodeLost:
      return "node_lost";
    case FindingKind::kHang:
      return "hang";
    case FindingKind::kStraggler:
      return "straggler";
    case FindingKind::kSdcSuspected:
      return "sdc_suspected";
    case FindingKind::kSdcConfirmed:
      return "sdc_confirmed";
    case FindingKind::kSdcTransient:
      return "sdc_transient";
    case FindingKind::kLossSpike:
      return "loss_spike";
    case FindingKind::kNonfiniteLoss:
      return "nonfinite_loss";
    case FindingKind::kGradNormSpike:
      return "grad_norm_spike";
    case FindingKind::kProcessExit:
      return "process_exit";
    case FindingKind::kGpuFault:
      return "gpu_fault";
    case FindingKind::kRestartRequested:
      return "restart_requested";
    case FindingKind::kLossDivergence:
      return "loss_divergence";
  }
  return "unknown";
}

std::optional<FindingKind> FindingKindFromString(std::string_view s) {
  for (FindingKind k : kAllFindingKinds)
    if (s == ToString(k)) return k;
  return std::nullopt;
}

const char* ToString(SdcVerdict v) {
  switch (v) {
    case SdcVerdict::kNone:
      return "none";
    case SdcVerdict::kMajority:
      return "majority";
    case SdcVerdict::kNeedsReplay:
      return "needs_replay";
    case SdcVerdict::kNoAgreement:
      return "no_agreement";
  }
  return "none";
}

const char* ToString(OnReproducible o) {
  return o == OnReproducible::kRecord ? "record" : "fail";
}

const char* ToString(StragglerAction a) {
  switch (a) {
    case StragglerAction::kCordonAfterRestart:
      return "cordon_after_restart";
    case StragglerAction::kReplace:
      return "replace";
    case StragglerAction::kRecord:
      break;
  }
  return "record";
}

const char* ToString(LaunchMode m) {
  switch (m) {
    case LaunchMode::kSlurm:
      return "slurm";
    case LaunchMode::kExternal:
      return "external";
    case LaunchMode::kAgents:
      break;
  }
  return "agents";
}

std::optional<LaunchMode> LaunchModeFromString(std::string_view s) {
  for (LaunchMode m : {LaunchMode::kAgents, LaunchMode::kSlurm, LaunchMode::kExternal})
    if (s == ToString(m)) return m;
  return std::nullopt;
}

const char* ToString(ExternalRemediation r) {
  switch (r) {
    case ExternalRemediation::kNone:
      return "none";
    case ExternalRemediation::kCordon:
      return "cordon";
    case ExternalRemediation::kHook:
      return "hook";
    case ExternalRemediation::kSlurmDrain:
      return "slurm-drain";
    case ExternalRemediation::kRequeue:
      return "requeue";
  }
  return "none";
}

}  // namespace shepherd
