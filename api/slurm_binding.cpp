#include "api/slurm_binding.h"

#include "api/problem.h"

namespace shepherd {
namespace {

bool IsAdmin(const std::optional<Principal>& who) {
  return !who || who->role == Role::kAdmin;
}

}  // namespace

std::string SlurmUserOf(const std::string& token_name,
                        const std::map<std::string, std::string>& slurm_users) {
  auto it = slurm_users.find(token_name);
  return it == slurm_users.end() ? token_name : it->second;
}

std::optional<HttpResponse> SlurmBindingRefusal(const std::string& id, const std::string& field,
                                                const std::optional<Principal>& who,
                                                const Result<slurm::SlurmJob>& shown,
                                                const std::map<std::string, std::string>& slurm_users) {
  if (!shown.ok()) {
    switch (shown.status().code()) {
      case Code::kNotFound:
        return Problem(404, "Slurm shows no job " + id + ": only a job that exists can be bound",
                       {{field, "Slurm shows no job " + id}});
      case Code::kInvalidArgument:
        return Problem(422, "not a Slurm job id: " + id,
                       {{field, "must be a SLURM_JOB_ID (digits, or N_M)"}});
      default: {
        HttpResponse r = Problem(503, "cannot ask Slurm about job " + id + ": " + shown.status().message(),
                                 {{field, "Slurm did not answer; retry after the Retry-After delay"}});
        r.headers.emplace_back("Retry-After", std::to_string(kSlurmRetryAfterS));
        return r;
      }
    }
  }
  if (!slurm::IsActive(shown->state))
    return Problem(
        403, "Slurm job " + id + " is " + shown->state_text + ": only a job that has not ended can be bound",
        {{field, "Slurm job " + id + " is " + shown->state_text}});
  if (IsAdmin(who)) return std::nullopt;
  const std::string user = SlurmUserOf(who->name, slurm_users);
  if (shown->user != user)
    return Problem(
        403, "Slurm job " + id + " is not " + user + "'s: a token binds only its own user's jobs",
        {{field, "Slurm job " + id + " is " +
                     (shown->user.empty() ? std::string("no user's Slurm shows") : shown->user + "'s") +
                     ", not " + user + "'s"}});
  return std::nullopt;
}

void CheckSlurmBinding(const ShowSlurmJob& show, const std::map<std::string, std::string>& slurm_users,
                       const std::optional<Principal>& who, const std::string& id, const std::string& field,
                       const Respond& respond, std::function<void()> then) {
  if (!show) {
    if (IsAdmin(who)) return then();
    return respond(
        Problem(403,
                "binding a Slurm job id needs the daemon to run with --slurm (to check that the "
                "job is the caller's), or an admin's token",
                {{field, "only an admin may bind an external id when the daemon runs without --slurm"}}));
  }
  if (!slurm::ValidJobId(id))
    return respond(
        Problem(422, "not a Slurm job id: " + id, {{field, "must be a SLURM_JOB_ID (digits, or N_M)"}}));
  show(id, [id, field, who, slurm_users, respond, then = std::move(then)](Result<slurm::SlurmJob> shown) {
    if (auto refused = SlurmBindingRefusal(id, field, who, shown, slurm_users)) return respond(*refused);
    then();
  });
}

}  // namespace shepherd
