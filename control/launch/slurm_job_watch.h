// SlurmJobWatch: follows, in Slurm, the jobs Shepherd only watches (no command, `external_id` = the
// SLURM_JOB_ID their ranks report under; docs/slurm.md "Jobs users launch with srun or sbatch"). The
// daemon's Slurm worker reads each one's record (`scontrol show job`) every reconcile interval; SlurmJobWatch
// decides from those reads when the Slurm job has ended, so that its Shepherd job ends too and gives its
// inventory slots back. The ranks cannot say so themselves: a finished rank just goes silent.
// Evidence: a job ends on a terminal Slurm state read twice in a row (a requeue passes through states that
// are not terminal; twice rules out a reading taken mid-transition), or when Slurm no longer knows a job
// it showed before (purged after MinJobAge), also twice in a row. A job Slurm never showed is never ended:
// its external_id may name a job of another cluster or launcher. While Slurm shows a job suspended, or an
// end read once (awaiting the second read), or has lost it once, its ranks' silence is Slurm's doing: the
// job is held (nothing of it judged) until a read shows it running again.
// Owns: per watched job, the state last read.
// Not durable: after a restart the reads begin again.
// Threads: changed on the control thread only (its mutators REQUIRES(kControl)); its const methods also
// run on the reader thread under the shared ControlLock (REQUIRES_SHARED(kControl), control/control_lock.h).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/control_lock.h"
#include "control/job_book.h"
#include "core/status.h"
#include "slurm/jobs.h"

namespace shepherd {

struct WatchedSlurmJob {
  std::string job;          // Shepherd's id
  std::string external_id;  // SLURM_JOB_ID
};
// What the worker read for one watched job: the record, kNotFound when Slurm does not know the id, or the
// error of the command.
struct SlurmJobSighting {
  WatchedSlurmJob watched;
  Result<slurm::SlurmJob> record;
};

class SlurmJobWatch {
 public:
  struct Ended {
    std::string job;
    JobState state = JobState::kFailed;  // COMPLETED: succeeded; CANCELLED: cancelled; otherwise failed
    std::string reason;                  // "slurm job 123 is COMPLETED (exit code 0:0)"
  };

  // Every job without a command that has an external id and has not ended, in id order.
  static std::vector<WatchedSlurmJob> ToRead(const JobBook& jobs) REQUIRES_SHARED(kControl);
  struct Observation {
    std::vector<Ended> ended;
    // Per job read this cycle: true to hold it (suspended, ending, or lost once), false to judge it (it
    // runs). Jobs Slurm did not answer for are not listed: no evidence either way.
    std::map<std::string, bool> hold;
  };
  // Takes in one cycle's reads, one per job ToRead listed. Jobs without a read this cycle (no longer
  // watched) are forgotten. A job that ended in Shepherd meanwhile is the caller's to skip.
  Observation Observe(const std::vector<SlurmJobSighting>& sightings) REQUIRES(kControl);
  // The nodes Slurm showed the job's allocation on at the last read that showed it holding some; nullopt
  // before any did (pending, or never read since the daemon started). What remediation may act on.
  std::optional<std::set<std::string>> NodesOf(const std::string& job) const REQUIRES_SHARED(kControl);

 private:
  std::map<std::string, slurm::SlurmJobState> last_;    // job → state last read
  std::map<std::string, std::set<std::string>> nodes_;  // job → nodes of its allocation last read
  std::set<std::string> unknown_;                       // jobs Slurm has never shown (warned once)
  std::set<std::string> forgotten_;                     // shown before, not found at the last read
};

}  // namespace shepherd
