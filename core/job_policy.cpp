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

const std::vector<std::string>& DefaultRefusedEnv() {
  static const std::vector<std::string> kNames = {
      // Where programs and libraries are found, and the agent's per-rank identity.
      "PATH", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
      "CUDA_VISIBLE_DEVICES", "HOME", "USER", "LOGNAME", "SHELL",
      // Python: extra import paths and start-up files (sitecustomize.py, .pth files), another stdlib, a
      // callable imported on breakpoint(), bytecode read from elsewhere, an interactive prompt.
      "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONBREAKPOINT",
      "PYTHONPYCACHEPREFIX", "PYTHONINSPECT",
      // Shells: a file sourced by every non-interactive bash (BASH_ENV) or sh (ENV), options and traces.
      "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS",
      // Other interpreters' library paths and start-up options.
      "PERL5LIB", "PERLLIB", "PERL5OPT", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
      "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH", "LUA_INIT",
      // Libraries that load shared objects named by the environment: NCCL's plugins and config file,
      // CUDA's injection hook, glibc's iconv modules, OpenSSL's config and engines, libfabric's and UCX's
      // providers, Open MPI's components.
      "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN", "NCCL_CONF_FILE",
      "CUDA_INJECTION64_PATH", "GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
      "FI_PROVIDER_PATH", "UCX_MODULE_DIR", "OMPI_MCA_mca_base_component_path"};
  return kNames;
}

Status CheckJobPolicy(const JobSpec& spec, const JobPolicy& policy) {
  std::vector<FieldError> errs;
  if (!policy.command_prefixes.empty() && spec.launch_mode != LaunchMode::kExternal) {
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
    if (policy.env_allow) {
      if (!Contains(*policy.env_allow, name))
        errs.push_back({"env." + name, "is not in the site's list of environment names a job may set"});
      continue;
    }
    if (Contains(policy.allowed_env, name)) continue;
    bool refused = Contains(policy.refused_env, name);
    // SHEPHERD_WORKDIR is the job's to set (the ranks' working directory, docs/api.md): a site refuses it
    // by name, not by the SHEPHERD_ prefix that keeps the agent's own variables out.
    for (const auto& prefix : policy.refused_env_prefixes)
      refused = refused || (name.rfind(prefix, 0) == 0 && name != "SHEPHERD_WORKDIR");
    if (refused) errs.push_back({"env." + name, "is refused by the site's job policy"});
  }
  if (!spec.slurm.sbatch_args.empty()) {
    std::vector<SbatchOptionSpec> allowed = policy.sbatch_options;
    allowed.insert(allowed.end(), policy.allowed_sbatch_options.begin(), policy.allowed_sbatch_options.end());
    for (FieldError& e : CheckSbatchArgs(spec.slurm.sbatch_args, allowed, "slurm.sbatch_args"))
      errs.push_back(std::move(e));
  }
  if (!errs.empty()) return InvalidContent("the job violates the site's job policy", std::move(errs));
  return Status::Ok();
}

}  // namespace shepherd
