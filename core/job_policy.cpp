#include "core/job_policy.h"

#include <algorithm>

namespace shepherd {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool StartsWith(const std::vector<std::string>& command, const std::vector<std::string>& prefix) {
  if (prefix.empty() || prefix.size() > command.size()) return false;
  return std::equal(prefix.begin(), prefix.end(), command.begin());
}

}  // namespace

Status CheckJobPolicy(const JobSpec& spec, const JobPolicy& policy) {
  std::vector<FieldError> errs;
  if (!policy.command_prefixes.empty() && !spec.command.empty()) {
    bool ok = std::any_of(policy.command_prefixes.begin(), policy.command_prefixes.end(),
                          [&](const auto& p) { return StartsWith(spec.command, p); });
    if (!ok) {
      std::string allowed;
      for (const auto& p : policy.command_prefixes) {
        std::string one;
        for (const auto& a : p) one += (one.empty() ? "" : " ") + a;
        allowed += (allowed.empty() ? "" : ", ") + ("'" + one + "'");
      }
      errs.push_back({"command", "must start with one of the site's allowed launchers: " + allowed});
    }
  }
  for (const auto& [name, value] : spec.env) {
    if (Contains(policy.allowed_env, name)) continue;
    bool refused = Contains(policy.refused_env, name);
    // SHEPHERD_WORKDIR is the job's to set (the ranks' working directory, docs/api.md): a site refuses it
    // by name, not by the SHEPHERD_ prefix that keeps the agent's own variables out.
    for (const auto& prefix : policy.refused_env_prefixes)
      refused = refused || (name.rfind(prefix, 0) == 0 && name != "SHEPHERD_WORKDIR");
    if (refused) errs.push_back({"env." + name, "is refused by the site's job policy"});
  }
  if (!errs.empty()) return InvalidContent("the job violates the site's job policy", std::move(errs));
  return Status::Ok();
}

}  // namespace shepherd
