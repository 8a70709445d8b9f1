// Names of the report enums, shared by the parser and the health JSON.
#include "health/report.h"

namespace shepherd {

const char* ToString(IgnoredReason r) {
  switch (r) {
    case IgnoredReason::kSeqBackwards:
      return "seq_backwards";
    case IgnoredReason::kGroupMembership:
      return "group_membership";
    case IgnoredReason::kRateLimited:
      return "rate_limited";
    case IgnoredReason::kRelayForeign:
      return "relay_foreign";
  }
  return "?";
}

const char* ToString(ReportKind k) {
  switch (k) {
    case ReportKind::kHeartbeat:
      return "heartbeat";
    case ReportKind::kStep:
      return "step";
    case ReportKind::kCollective:
      return "collective";
    case ReportKind::kParamHash:
      return "param_hash";
    case ReportKind::kCheckpoint:
      return "checkpoint";
    case ReportKind::kFinished:
      return "finished";
    case ReportKind::kSummary:
      return "summary";
  }
  return "?";
}

const char* ToString(Phase p) {
  switch (p) {
    case Phase::kUnspecified:
      return "unspecified";
    case Phase::kTrain:
      return "train";
    case Phase::kCheckpointSave:
      return "checkpoint_save";
    case Phase::kCheckpointLoad:
      return "checkpoint_load";
    case Phase::kEval:
      return "eval";
  }
  return "?";
}

const char* ToString(GroupKind g) {
  switch (g) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kWorld:
      return "world";
    case GroupKind::kOther:
      return "other";
  }
  return "?";
}

GroupKind GroupKindFromName(std::string_view name) {
  if (name == "tp") return GroupKind::kTp;
  if (name == "pp") return GroupKind::kPp;
  if (name == "dp") return GroupKind::kDp;
  if (name == "cp") return GroupKind::kCp;
  if (name == "world") return GroupKind::kWorld;
  return GroupKind::kOther;
}

}  // namespace shepherd
