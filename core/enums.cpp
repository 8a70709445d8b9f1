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
  }
  return "unknown";
}

NodeState StateOf(const Node& n, int allocated_gpus) {
  if (n.failed) return NodeState::kFailed;
  if (!n.schedulable) return NodeState::kCordoned;
  if (allocated_gpus > 0) return NodeState::kAllocated;
  if (n.spare) return NodeState::kSpare;
  return NodeState::kAvailable;
}

const char* ToString(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
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
  for (JobState st : {JobState::kQueued, JobState::kRunning, JobState::kRecovering, JobState::kSucceeded,
                      JobState::kFailed, JobState::kCancelled})
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

}  // namespace shepherd
