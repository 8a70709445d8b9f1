#include "scheduler/queue.h"

namespace shepherd {

std::vector<Admission> AdmitFromQueue(const Cluster& cluster, const std::vector<QueuedJob>& queue) {
  std::vector<Admission> out;
  if (queue.empty()) return out;
  Cluster work = cluster;
  int64_t head_gpus = -1;  // GPUs of the blocked head, -1 while none is blocked
  for (const QueuedJob& q : queue) {
    int64_t gpus = q.plan.world_size();
    if (head_gpus >= 0 && work.FreeUsableGpus() - gpus < head_gpus) continue;
    if (gpus > work.FreeUsableGpus()) {
      if (head_gpus < 0) head_gpus = gpus;
      continue;
    }
    Result<Placement> p = Place(work, q.plan, q.options);
    if (!p.ok()) {
      if (head_gpus < 0) head_gpus = gpus;
      continue;
    }
    if (!work.Allocate(q.id, *p).ok()) continue;
    out.push_back({q.id, std::move(p).value()});
  }
  return out;
}

}  // namespace shepherd
