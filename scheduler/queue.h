// Admission from the queue: FIFO with conservative backfill. Pure.
//
// Jobs are tried in submission order. The first job that cannot be placed becomes the blocked head; a later
// job is then backfilled only if, after placing it, at least the head's GPU count stays free on usable
// nodes. Without runtime estimates this is the only backfill that provably never takes capacity the head
// is waiting for (it helps when the head is blocked by fragmentation, not by count). Jobs behind a
// second blocked job follow the same rule against the first head. A job larger than the usable GPUs
// (nodes cordoned, failed or made spares since it queued) waits for nodes, not for jobs to end: it never
// becomes the head, so it holds back no job behind it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/job.h"
#include "scheduler/cluster.h"
#include "scheduler/placement.h"

namespace shepherd {

struct QueuedJob {
  std::string id;
  Plan plan;
  PlaceOptions options;
};

struct Admission {
  std::string job;
  Placement placement;
};

// Placements to start now, in order. `cluster` is not modified.
std::vector<Admission> AdmitFromQueue(const Cluster& cluster, const std::vector<QueuedJob>& queue);

}  // namespace shepherd
