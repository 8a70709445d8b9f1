#include "slurm/job_runner.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/child_process.h"
#include "slurm/hostlist.h"
#include "slurm/step_order.h"

namespace shepherd::slurm {
namespace {

using Clock = std::chrono::steady_clock;

Allocation FromJob(const SlurmJob& j) {
  return {j.id, j.state, j.nodes, j.reason};
}

std::string Tail(const std::string& path, std::size_t bytes = 2000) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

}  // namespace

JobRunner::JobRunner(Options options) : options_(std::move(options)), cli_(options_.cli) {}

Result<std::string> JobRunner::SubmitAllocation(const AllocationRequest& r) const {
  if (r.nodes < 1 || r.spares < 0) return InvalidArgument("allocation: nodes must be >= 1 and spares >= 0");
  int total = r.nodes + r.spares;
  if (!r.nodelist.empty() && static_cast<int>(r.nodelist.size()) != total)
    return InvalidArgument("allocation: nodelist names " + std::to_string(r.nodelist.size()) +
                           " nodes, not " + std::to_string(total));
  // The site's options come first: sbatch keeps the last of a repeated option, so none of them can
  // override what follows (the name Shepherd finds the allocation by, its nodes, where it runs and writes).
  std::vector<std::string> args = r.extra_args;
  args.insert(args.end(),
              {"--job-name=" + r.name, "--nodes=" + std::to_string(total), "--exclusive", "--no-kill",
               "--no-requeue", "--chdir=" + (r.work_dir.empty() ? std::string("/tmp") : r.work_dir),
               "--output=" + (r.work_dir.empty() ? std::string("/dev/null") : r.work_dir + "/slurm-%j.out")});
  if (!r.nodelist.empty()) args.push_back("--nodelist=" + CompressHostlist(r.nodelist));
  if (!r.exclude.empty()) args.push_back("--exclude=" + CompressHostlist(r.exclude));
  if (!r.comment.empty()) args.push_back("--comment=" + r.comment);
  args.push_back("--wrap=exec sleep infinity");  // holds the allocation; steps do the work
  return cli_.Submit(args);
}

Result<Allocation> JobRunner::ShowAllocation(const std::string& job_id) const {
  auto job = cli_.ShowJob(job_id);
  if (!job.ok()) return job.status();
  return FromJob(*job);
}

Result<std::string> JobRunner::FindAllocation(const std::string& name, const std::string& comment) const {
  auto r = cli_.Run({"squeue", "--noheader", "--me", "--name=" + name, "--states=PENDING,RUNNING,SUSPENDED",
                     "--format=%i|%k"});
  if (!r.ok()) return r.status();
  if (!r->ok()) return Unavailable("squeue --name=" + name + ": " + r->err);
  std::size_t at = 0;
  while (at < r->out.size()) {
    std::size_t end = r->out.find('\n', at);
    if (end == std::string::npos) end = r->out.size();
    const std::string line = r->out.substr(at, end - at);
    at = end + 1;
    const std::size_t bar = line.find('|');
    if (bar != std::string::npos && line.substr(bar + 1) == comment) return line.substr(0, bar);
  }
  return std::string();
}

Status JobRunner::CancelAllocation(const std::string& job_id, std::chrono::seconds timeout) const {
  Status s = cli_.Cancel(job_id, "", /*full=*/true);
  if (!s.ok()) {
    auto job = cli_.ShowJob(job_id);
    if (job.ok() && !IsActive(job->state)) return Status::Ok();
    if (!job.ok() && job.status().code() == Code::kNotFound) return Status::Ok();
    return s;
  }
  Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    auto job = cli_.ShowJob(job_id);
    if (!job.ok() && job.status().code() == Code::kNotFound) return Status::Ok();
    if (job.ok() && !IsActive(job->state)) return Status::Ok();
    if (Clock::now() >= deadline)
      return Unavailable("allocation " + job_id + " still active " + std::to_string(timeout.count()) +
                         " s after scancel");
    std::this_thread::sleep_for(options_.poll_interval);  // polling interval
  }
}

std::vector<std::string> JobRunner::SrunArgv(const StepSpec& spec) const {
  std::vector<std::string> argv{"srun", "--jobid=" + spec.job_id, "--job-name=" + spec.name,
                                "--ntasks=" + std::to_string(spec.placement.ranks.size()),
                                "--distribution=arbitrary",  // task r on line r of SLURM_HOSTFILE
                                "--label", "--kill-on-bad-exit=0",
                                // Measured: after a node loss the killed step kept its cores on the surviving
                                // nodes for ~60 s more ("ending ... due to job resizing"), and a new step
                                // without --overlap waited for them. One attempt runs at a time in an
                                // allocation Shepherd owns, so sharing with a dying step is safe.
                                "--overlap"};
  // More tasks than a node has CPUs (several ranks per GPU, or a node whose Slurm CPU count is small) must
  // not make Slurm refuse the step: the placement, not Slurm's CPU count, decides what runs where.
  argv.push_back("--overcommit");
  if (spec.gpus_per_node > 0) argv.push_back("--gres=gpu:" + std::to_string(spec.gpus_per_node));
  argv.push_back(options_.rank_exec);
  argv.insert(argv.end(), spec.command.begin(), spec.command.end());
  return argv;
}

Result<JobRunner::PreparedStep> JobRunner::PrepareStep(const StepSpec& spec) const {
  if (spec.job_id.empty() || spec.name.empty() || spec.command.empty() || spec.placement.ranks.empty() ||
      spec.log_path.empty())
    return InvalidArgument("step: job_id, name, command, placement and log_path are required");
  for (std::size_t r = 0; r < spec.placement.ranks.size(); ++r)
    if (spec.placement.ranks[r].rank != static_cast<int>(r) || spec.placement.ranks[r].node.empty())
      return InvalidArgument("step: placement.ranks must be indexed by rank and name a node");
  if (!spec.rank_env.empty() && spec.rank_env.size() != spec.placement.ranks.size())
    return InvalidArgument("step: rank_env must have one map per rank");
  PreparedStep out;
  out.argv = SrunArgv(spec);
  // The hostfile: one line per task, task r on line r.
  out.hostfile_path = spec.log_path + ".hosts";
  out.hostfile.reserve(spec.placement.ranks.size() * (spec.placement.ranks[0].node.size() + 1));
  for (const RankSlot& r : spec.placement.ranks) (out.hostfile += r.node) += '\n';
  // The ranks' own variables: composed by the caller, or derived from the placement.
  auto table = EncodeRankTable(spec.placement,
                               spec.rank_env.empty() ? DeriveRankEnv(spec.placement) : spec.rank_env);
  if (!table.ok()) return table.status();
  out.table = std::move(table).value();
  const std::string file = "shepherd-" + spec.job_id + "-" + spec.name + ".ranks";
  if (options_.rank_table_dir.empty()) {
    out.table_path = spec.log_path + ".ranks";
    out.node_table_path = options_.node_table_dir + "/" + file;
  } else {
    out.table_path = out.node_table_path = options_.rank_table_dir + "/" + file;
  }
  // srun reads its own options from SLURM_*, SRUN_* (and SLURM_CONF names the configuration it loads):
  // variables meant for the ranks never set them; the ranks' own come from the table.
  for (const auto& [k, v] : spec.env)
    if (!IsSlurmInputVariable(k) && k != kRankTableVar) out.env.emplace_back(k, v);
  out.env.emplace_back(kRankTableVar, out.node_table_path);
  out.env.emplace_back("SLURM_HOSTFILE", out.hostfile_path);
  return out;
}

Result<Step> JobRunner::StartStep(const StepSpec& spec) const {
  auto prepared = PrepareStep(spec);
  if (!prepared.ok()) return prepared.status();
  const PreparedStep& p = *prepared;
  {
    std::ofstream out(p.hostfile_path, std::ios::trunc);
    out << p.hostfile;
    if (!out.flush()) return Internal("step: cannot write " + p.hostfile_path);
  }
  if (Status s = WriteRankTable(p.table_path, p.table); !s.ok()) return s;
  if (p.node_table_path != p.table_path) {
    // Every node of the allocation gets its copy before any task starts (sbcast returns once all have it).
    // Its time grows with the allocation (a 131,072-rank table is about 9 MB, fanned out over every
    // node), so it has the step's start_timeout when that is longer than one command's.
    auto r = cli_.Run({"sbcast", "--jobid=" + spec.job_id, "--force", p.table_path, p.node_table_path},
                      std::max<std::chrono::milliseconds>(options_.cli.timeout, spec.start_timeout));
    if (!r.ok()) return r.status();
    if (!r->ok())
      return Unavailable("sbcast of the rank table " + p.table_path + " to " + p.node_table_path +
                         " failed: " + r->err);
  }
  auto pid = SpawnLogged(p.argv, cli_.Environment(p.env), spec.log_path, spec.cwd);
  if (!pid.ok()) return pid.status();

  Step step{spec.job_id, "", spec.name, *pid};
  Clock::time_point deadline = Clock::now() + spec.start_timeout;
  while (true) {
    auto steps = cli_.ShowSteps(spec.job_id);
    if (steps.ok())
      for (const SlurmStep& s : *steps)
        if (s.name == spec.name && s.state == "RUNNING") {
          step.step_id = s.id;
          return step;
        }
    if (auto exit = PollExit(*pid)) {
      // srun ended before we saw the step: either Slurm refused it, or every task already ran and ended.
      std::string log = Tail(spec.log_path);
      if (exit->exit_code != 0 && (log.find("Unable to create step") != std::string::npos ||
                                   log.find("srun: error: Invalid") != std::string::npos ||
                                   log.find("srun: fatal") != std::string::npos))
        return Unavailable("srun refused step " + spec.name + " (exit " + std::to_string(exit->exit_code) +
                           "): " + log);
      step.early_exit = *exit;
      return step;
    }
    if (Clock::now() >= deadline) {
      SignalGroup(*pid, SIGKILL);
      while (!PollExit(*pid)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return Unavailable("step " + spec.name + " not running after " +
                         std::to_string(spec.start_timeout.count()) + " s: " + Tail(spec.log_path));
    }
    std::this_thread::sleep_for(options_.poll_interval);  // polling interval
  }
}

std::optional<ExitStatus> JobRunner::PollStep(const Step& step) const {
  if (step.early_exit) return step.early_exit;
  return PollExit(step.srun_pid);
}

Result<ExitStatus> JobRunner::StopStep(const Step& step, std::chrono::seconds grace,
                                           std::chrono::seconds kill_wait) const {
  auto wait_exit = [&](std::chrono::seconds limit) -> std::optional<ExitStatus> {
    Clock::time_point deadline = Clock::now() + limit;
    while (true) {
      if (auto e = PollExit(step.srun_pid)) return e;
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling interval
    }
  };
  if (step.early_exit) return *step.early_exit;
  if (auto e = PollExit(step.srun_pid)) return *e;
  std::string target = step.step_id.empty() ? step.job_id : step.step_id;
  (void)cli_.Cancel(target, "TERM");  // an error here (step already gone) shows as srun's exit below
  if (auto e = wait_exit(grace)) return *e;
  (void)cli_.Cancel(target, "KILL");
  (void)cli_.Cancel(target);
  if (auto e = wait_exit(kill_wait)) return *e;
  SignalGroup(step.srun_pid, SIGKILL);
  if (auto e = wait_exit(std::chrono::seconds(5))) return *e;
  return Unavailable("srun " + std::to_string(step.srun_pid) + " of step " + target + " survived SIGKILL");
}

pid_t FindSrun(const std::string& job_id, int attempt) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return -1;
  pid_t found = -1;
  const std::string want_job = "--jobid=" + job_id, name_flag = "--job-name=";
  for (dirent* e; found < 0 && (e = ::readdir(proc));) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::vector<std::string> args;
    for (std::string arg; args.size() < 64 && std::getline(in, arg, '\0');) args.push_back(arg);
    if (args.empty()) continue;  // gone, a zombie or a kernel thread
    const std::string& prog = args[0];
    if (prog != "srun" && (prog.size() < 5 || prog.compare(prog.size() - 5, 5, "/srun") != 0)) continue;
    bool job = false, named = false;
    for (const std::string& a : args) {
      job |= a == want_job;
      named |= a.rfind(name_flag, 0) == 0 && IsStepOfAttempt(std::string_view(a).substr(name_flag.size()), attempt);
    }
    if (job && named) found = pid;
  }
  ::closedir(proc);
  return found;
}

}  // namespace shepherd::slurm
