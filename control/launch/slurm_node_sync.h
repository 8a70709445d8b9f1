// SlurmNodeSync: keeps Shepherd's inventory in step with a Slurm cluster (docs/slurm.md, "What Shepherd drains,
// and when"). The daemon reads Slurm's view off the control thread (slurm::ReadSlurmView on a worker) and
// hands it here; SlurmNodeSync decides the changes (slurm::Reconcile), applies Shepherd's side to the Inventory,
// and returns the Slurm commands (drain, resume) for the worker to run. Their outcomes come back through
// OnCommandsDone.
// Owns: the set of nodes Shepherd has drained in Slurm and not resumed (`drained_by_shepherd`), durable as
// one kMeta record ("slurm_drained").
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
// Invariants: a node enters the set only after its drain succeeded in Slurm, and leaves it when Shepherd
// resumed it or Slurm shows it usable again. Shepherd never resumes a node outside the set (Reconcile).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "control/control_lock.h"
#include "control/finding_log.h"
#include "control/inventory.h"
#include "core/status.h"
#include "core/time.h"
#include "slurm/node_reconcile.h"
#include "slurm/slurm_view.h"
#include "storage/store.h"

namespace shepherd {

// A Slurm command decided on the control thread, run by the worker.
struct SlurmNodeCommand {
  enum class Kind { kDrain, kResume };
  Kind kind = Kind::kDrain;
  std::string node;
  std::string reason;  // kDrain: "shepherd f-000123 sdc_suspected"
};
struct SlurmCommandResult {
  SlurmNodeCommand command;
  Status status;
};

class SlurmNodeSync {
 public:
  inline static const std::string kDrainedKey = "slurm_drained";

  SlurmNodeSync(Inventory* inventory, const FindingLog* findings, double gpu_memory_gib)
      : inventory_(inventory), findings_(findings), gpu_memory_gib_(gpu_memory_gib) {}

  // Recovery at start-up: the stored kMeta "slurm_drained" record (a JSON array of node names).
  Status Restore(const std::string& body) REQUIRES(kControl);
  // Applies what Slurm says to the inventory (new nodes, capacity and topology, drains, failures, returns)
  // and returns the commands that bring Slurm in line with Shepherd's own cordons and returns.
  std::vector<SlurmNodeCommand> Apply(const slurm::SlurmView& view, Time now, WriteBatch* batch)
      REQUIRES(kControl);
  // The commands' outcomes: successful drains join drained_by_shepherd, successful resumes leave it.
  void OnCommandsDone(const std::vector<SlurmCommandResult>& results, WriteBatch* batch) REQUIRES(kControl);

  const std::set<std::string>& drained_by_shepherd() const REQUIRES_SHARED(kControl) { return drained_; }

 private:
  // "shepherd f-000123 sdc_suspected" for a node a finding cordoned; "shepherd <reason>" otherwise.
  std::string DrainReason(const Node& n) const REQUIRES_SHARED(kControl);
  void Persist(WriteBatch* batch) const REQUIRES_SHARED(kControl);

  Inventory* inventory_;
  const FindingLog* findings_;
  double gpu_memory_gib_;
  std::set<std::string> drained_;
};

}  // namespace shepherd
