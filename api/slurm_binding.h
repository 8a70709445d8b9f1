// Who may bind a Slurm job id to a Shepherd job (POST /v1/jobs with `external_id`, or the first report of
// POST /v1/external/slurm/{id}/reports, which creates the job): docs/security.md, "Scopes". A binding is
// exclusive while its job lives (reports under that id go to it), so a caller may bind only a job Slurm
// shows existing (pending, running, suspended, completing or requeued) and run by the caller's Unix user:
// the token's `name`, or `slurm_users[name]` when the daemon's configuration maps it. An admin (or a daemon
// without tokens) may bind anyone's job, but under --slurm it must still exist. Without --slurm nothing can
// be checked: only an admin may bind.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "api/auth.h"
#include "api/http_types.h"
#include "core/status.h"
#include "slurm/jobs.h"

namespace shepherd {

// Asks Slurm, off the control thread, what it shows of job `id`; `done` runs on the control thread with
// the record, kNotFound (Slurm does not know the id), or kUnavailable (Slurm did not answer in time).
using ShowSlurmJob =
    std::function<void(const std::string& id, std::function<void(Result<slurm::SlurmJob>)> done)>;

// Seconds a caller waits before asking again when Slurm did not answer (503 Retry-After).
constexpr int kSlurmRetryAfterS = 5;

// The Unix user a token name stands for in Slurm.
std::string SlurmUserOf(const std::string& token_name, const std::map<std::string, std::string>& slurm_users);

// Pure. The refusal of `who` binding Slurm job `id` (named `field` in the problem) given what Slurm
// showed, or nullopt when it may: 404 for a job Slurm does not know, 403 for one that ended or is another
// user's, 503 with Retry-After when Slurm did not answer, 422 for an id that is not a Slurm job id.
std::optional<HttpResponse> SlurmBindingRefusal(const std::string& id, const std::string& field,
                                                const std::optional<Principal>& who,
                                                const Result<slurm::SlurmJob>& shown,
                                                const std::map<std::string, std::string>& slurm_users);

// Checks that `who` may bind Slurm job `id`, asking Slurm through `show` (empty: the daemon runs without
// --slurm), then calls `then` on the control thread, or answers the refusal to `respond`. `then` may run
// before this returns (nothing to ask) or later (an answer from Slurm): it must not refer to the request.
void CheckSlurmBinding(const ShowSlurmJob& show, const std::map<std::string, std::string>& slurm_users,
                       const std::optional<Principal>& who, const std::string& id, const std::string& field,
                       const Respond& respond, std::function<void()> then);

}  // namespace shepherd
