#include "slurm/cli.h"

namespace shepherd::slurm {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

SlurmCli::SlurmCli() : SlurmCli(Options{}) {}
SlurmCli::SlurmCli(Options options) : options_(std::move(options)) {}

Envp SlurmCli::Environment(const std::vector<std::pair<std::string, std::string>>& overlay) const {
  std::vector<std::pair<std::string, std::string>> all;
  if (!options_.slurm_conf.empty()) all.emplace_back("SLURM_CONF", options_.slurm_conf);
  all.insert(all.end(), overlay.begin(), overlay.end());
  return CleanEnvironment(all);
}

Result<RunOutput> SlurmCli::Run(const std::vector<std::string>& argv) const { return Run(argv, options_.timeout); }

Result<RunOutput> SlurmCli::Run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) const {
  return RunCommand(argv, Environment(), timeout);
}

Result<std::string> SlurmCli::RunOk(const std::vector<std::string>& argv) const {
  auto r = Run(argv);
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    std::string what = argv[0];
    for (std::size_t i = 1; i < argv.size() && i < 4; ++i) what += " " + argv[i];
    return Unavailable(what + ": exit " + std::to_string(r->exit_code) + ": " + Trim(r->err));
  }
  return std::move(r->out);
}

Result<std::vector<SlurmNode>> SlurmCli::ShowNodes() const {
  auto out = RunOk({"scontrol", "show", "nodes", "--oneliner"});
  if (!out.ok()) return out.status();
  return ParseNodes(*out);
}

Result<std::vector<SlurmSwitch>> SlurmCli::ShowTopology() const {
  auto r = Run({"scontrol", "show", "topology"});
  if (!r.ok()) return r.status();
  // topology/none (measured on 22.05): exit 0, nothing on stdout, "No topology information available" on
  // stderr: parsed as an empty tree below.
  if (!r->ok()) return Unavailable("scontrol show topology: " + Trim(r->err));
  return ParseTopology(r->out);
}

Status SlurmCli::DrainNode(const std::string& node, const std::string& reason) const {
  if (reason.empty()) return InvalidArgument("drain " + node + ": a reason is required");
  auto r = RunOk({"scontrol", "update", "NodeName=" + node, "State=DRAIN", "Reason=" + reason});
  return r.ok() ? Status::Ok() : r.status();
}

Status SlurmCli::ResumeNode(const std::string& node) const {
  auto r = RunOk({"scontrol", "update", "NodeName=" + node, "State=RESUME"});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::string> SlurmCli::Submit(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunOk(argv);
  if (!r.ok()) return r.status();
  std::string id = Trim(*r);
  if (std::size_t semi = id.find(';'); semi != std::string::npos) id.resize(semi);  // "ID;cluster"
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    return Internal("sbatch printed no job id: '" + id + "'");
  return id;
}

Result<SlurmJob> SlurmCli::ShowJob(const std::string& job_id) const {
  if (!ValidJobId(job_id)) return InvalidArgument("not a Slurm job id: " + job_id);
  auto r = Run({"scontrol", "show", "job", job_id, "--oneliner"});
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    if (r->err.find("Invalid job id") != std::string::npos)
      return NotFound("slurm job " + job_id + " not found");
    return Unavailable("scontrol show job " + job_id + ": " + Trim(r->err));
  }
  return ParseJob(r->out);
}

Result<std::vector<SlurmStep>> SlurmCli::ShowSteps(const std::string& job_id) const {
  if (!ValidJobId(job_id)) return InvalidArgument("not a Slurm job id: " + job_id);
  auto r = Run({"scontrol", "show", "step", job_id, "--oneliner"});
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    if (r->err.find("Invalid job id") != std::string::npos || r->err.find("not found") != std::string::npos ||
        r->out.find("not found") != std::string::npos)
      return std::vector<SlurmStep>{};
    return Unavailable("scontrol show step " + job_id + ": " + Trim(r->err));
  }
  return ParseSteps(r->out);
}

Status SlurmCli::Cancel(const std::string& target, const std::string& signal, bool full) const {
  std::vector<std::string> argv{"scancel"};
  if (!signal.empty()) argv.push_back("--signal=" + signal);
  if (full) argv.push_back("--full");
  argv.push_back(target);
  auto r = RunOk(argv);
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace shepherd::slurm
