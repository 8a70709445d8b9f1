#include "scheduler/queue.h"

#include <optional>

namespace shepherd {

std::vector<Admission> AdmitFromQueue(const Cluster& cluster, const std::vector<QueuedJob>& queue) {
  std::vector<Admission> out;
  // Later jobs must see earlier admissions, so they are placed on a working copy; the copy (O(nodes)) is
  // made only once an admission is followed by another queued job. A submission into an empty queue, the
  // common write, copies nothing.
  std::optional<Cluster> work;
  const Cluster* view = &cluster;
  int64_t head_gpus = -1;  // GPUs of the blocked head, -1 while none is blocked
  for (size_t i = 0; i < queue.size(); ++i) {
    // Behind a blocked head only a job leaving it `head_gpus` free may start: none can once that many or
    // fewer are free.
    if (head_gpus >= 0 && view->FreeUsableGpus() <= head_gpus) break;
    const QueuedJob& q = queue[i];
    int64_t gpus = q.plan.world_size();
    if (gpus > view->UsableGpus()) continue;  // waits for nodes: ending jobs cannot make room for it
    if (head_gpus >= 0 && view->FreeUsableGpus() - gpus < head_gpus) continue;
    if (gpus > view->FreeUsableGpus()) {
      if (head_gpus < 0) head_gpus = gpus;
      continue;
    }
    Result<Placement> p = Place(*view, q.plan, q.options);
    if (!p.ok()) {
      if (head_gpus < 0) head_gpus = gpus;
      continue;
    }
    if (i + 1 < queue.size()) {
      if (!work) view = &work.emplace(cluster);
      if (!work->Allocate(q.id, *p).ok()) continue;
    }
    out.push_back({q.id, std::move(p).value()});
  }
  return out;
}

}  // namespace shepherd
