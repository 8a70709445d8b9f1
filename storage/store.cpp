#include "storage/store.h"

namespace shepherd {

const char* ToString(Collection c) {
  switch (c) {
    case Collection::kNodes:
      return "nodes";
    case Collection::kJobs:
      return "jobs";
    case Collection::kAttempts:
      return "attempts";
    case Collection::kCheckpoints:
      return "checkpoints";
    case Collection::kFindings:
      return "findings";
    case Collection::kMeta:
      return "meta";
  }
  return "unknown";
}

}  // namespace shepherd
