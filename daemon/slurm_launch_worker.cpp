#include "daemon/slurm_launch_worker.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "agent/rank_files.h"
#include "core/child_process.h"
#include "daemon/control_channel.h"
#include "slurm/job_runner.h"
#include "slurm/step_log.h"
#include "slurm/step_order.h"

namespace shepherd {
namespace {

// Whether `exec` names an executable file: a path (with a '/') as given, a bare name through PATH.
bool ExecutableHere(const std::string& exec) {
  if (exec.find('/') != std::string::npos) return ::access(exec.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    if (!dir.empty() && ::access((std::string(dir) + "/" + exec).c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return false;
}

using Kind = SlurmLaunchEvent::Kind;
using Secs = std::chrono::seconds;

// srun's whole output (bounded): what it says about the step's end is at the end.
std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr std::size_t kMax = 1 << 20;
  return all.size() > kMax ? all.substr(all.size() - kMax) : all;
}

// Whether srun's output says every one of the step's `ranks` tasks exited with the fence's stale code (none
// ran the rank's command).
bool AllStale(const std::string& srun_output, std::size_t ranks) {
  const slurm::StepLog log = slurm::ParseStepLog(srun_output);
  std::set<int> stale;
  for (const slurm::TaskEnd& t : log.failed)
    if (t.exit_code == slurm::kStaleOrderExit) stale.insert(t.rank);
    else return false;
  return ranks > 0 && stale.size() == ranks;
}

std::string Tail(const std::string& path) {
  return agent::ReadLogTail(path);  // the agents' bound and UTF-8 repair (agent/rank_files.h)
}

}  // namespace

struct SlurmLaunchWorker::State : std::enable_shared_from_this<SlurmLaunchWorker::State> {
  // What the worker knows of one job.
  struct Run {
    std::string submitted;  // allocation id sbatch gave (before the controller recorded it)
    std::optional<slurm::Step> step;
    std::size_t ranks = 0;  // the step's task count
    std::string adopted_step;  // a step found running under our name (an earlier daemon's): watched only
    int step_attempt = 0;
    std::string step_log;
    int done_attempt = 0;    // the last attempt whose step ran and ended (never started twice)
    int64_t used_order = 0;  // the last launch order this worker ran srun under (never run twice)
    bool suspended = false;  // the allocation was last seen suspended (told the controller)
    // Since when an earlier daemon's srun of the wanted attempt was seen creating its step (not yet listed).
    std::optional<std::chrono::steady_clock::time_point> earlier_srun_since;
    std::string pending;  // Slurm's reason the allocation last waited for (told the controller)
  };

  SlurmConfig config;
  Controller* controller = nullptr;
  std::shared_ptr<ControlChannel> channel;
  std::unique_ptr<slurm::JobRunner> launcher;
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;            // guarded by mu
  std::map<std::string, Run> runs;  // worker thread only

  void Run();
  // The controller's orders (ControlChannel::Ask); nullopt when stopped or not answered in time.
  std::optional<SlurmOrders> AwaitOrders();
  void Send(SlurmLaunchEvent ev) {
    channel->Tell([controller = controller, ev = std::move(ev)] { controller->OnSlurmReport(ev); });
  }
  void Allocation(const SlurmJobOrder& o, struct Run& run);
  void Steps(const SlurmJobOrder& o, struct Run& run);
  // Whether an earlier daemon on this host started the wanted attempt's srun (its log exists) whose step
  // Slurm does not list: still creating it (wait; past the start timeout it is killed and the step started
  // afresh), or ended after its tasks ran (the step's end is reported, exit unknown). True: start nothing.
  bool EarlierSrun(const SlurmJobOrder& o, struct Run& run);
  // Stops the run's step (grace, then kill) and reports its end.
  void StopStep(const std::string& job, struct Run& run, double grace_s);
  // Stops an adopted step through Slurm (TERM, up to `grace_s`, then KILL); its end is seen at the next poll.
  void StopAdopted(const std::string& job, const struct Run& run, double grace_s);
  // Reports the end of the run's step; `exit_known` false: its srun was an earlier daemon's child.
  void Ended(const std::string& job, struct Run& run, slurm::ExitStatus exit, bool exit_known = true);
  // Where the step of `attempt` of `job` writes its output (srun's log, kept across daemon restarts).
  std::string LogPath(const std::string& job, int attempt) const {
    return config.step_log_dir + "/" + job + "-a" + std::to_string(attempt) + ".log";
  }
  // LogPath when an earlier daemon started that attempt's step in allocation `allocation` (on this host, or
  // another with step_log_dir shared): the log exists and the file beside it (`<log>.allocation`, written
  // before srun starts) names that allocation. "" otherwise (none, another database's leftover, or a log
  // written before these markers).
  std::string ExistingLog(const std::string& job, int attempt, const std::string& allocation) const {
    const std::string path = LogPath(job, attempt);
    std::ifstream in(path + ".allocation");
    std::string named;
    std::getline(in, named);
    return !allocation.empty() && named == allocation && ::access(path.c_str(), R_OK) == 0 ? path
                                                                                           : std::string();
  }
};

SlurmLaunchWorker::SlurmLaunchWorker(const SlurmConfig& config, Controller* controller, Post post)
    : state_(std::make_shared<State>()) {
  state_->config = config;
  state_->controller = controller;
  state_->channel = ControlChannel::Create(std::move(post));
  slurm::JobRunner::Options o;
  o.cli.slurm_conf = config.slurm_conf;
  o.cli.timeout = std::chrono::milliseconds(static_cast<long>(config.command_timeout_s * 1000));
  o.rank_exec = config.rank_exec;
  o.rank_table_dir = config.rank_table_dir;
  state_->launcher = std::make_unique<slurm::JobRunner>(o);
}

SlurmLaunchWorker::~SlurmLaunchWorker() {
  Stop();
}

void SlurmLaunchWorker::Start() {
  ::mkdir(state_->config.step_log_dir.c_str(), 0750);
  spdlog::info(
      "slurm: launching jobs with \"launcher\": \"slurm\" (steps through {}, logs in {}, rank tables {}, {})",
      state_->config.rank_exec, state_->config.step_log_dir,
      state_->config.rank_table_dir.empty() ? "copied to each node's /tmp with sbcast"
                                            : "read from " + state_->config.rank_table_dir,
      state_->config.request_gpus ? "each step asks for its nodes' GPUs (--gres=gpu:N)"
                                  : "steps ask for no GPUs (slurm.request_gpus false)");
  // The compute nodes' file systems are out of sight; this host's is a hint (a shared file system, or the
  // same package everywhere): a wrapper missing here is probably missing there, and every task would fail.
  if (!ExecutableHere(state_->config.rank_exec))
    spdlog::warn(
        "slurm: {} is not an executable here (absolute, or in PATH): srun will fail every task of "
        "a \"launcher\": \"slurm\" job unless it exists on the compute nodes; set slurm.rank_exec to "
        "its absolute path (it is built as build/slurm/shepherd-slurm-rank)",
        state_->config.rank_exec);
  state_->worker = std::thread([s = state_] { s->Run(); });
}

void SlurmLaunchWorker::Stop() {
  state_->channel->Stop();
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  if (state_->worker.joinable()) state_->worker.join();
}

std::optional<SlurmOrders> SlurmLaunchWorker::State::AwaitOrders() {
  // The attempts whose steps this worker started (or watches, or saw end): their specs are not needed.
  std::map<std::string, int> started;
  for (const auto& [job, run] : runs) {
    int a = std::max(run.done_attempt, run.step || !run.adopted_step.empty() ? run.step_attempt : 0);
    if (a > 0) started[job] = a;
  }
  return channel->Ask<SlurmOrders>(
      [controller = controller, started = std::move(started)](std::function<void(SlurmOrders)> reply) {
        reply(controller->GetSlurmOrders(started));
      },
      kControlAnswerTimeout);
}

void SlurmLaunchWorker::State::Run() {
  const auto interval = std::chrono::milliseconds(static_cast<long>(config.launch_poll_s * 1000));
  std::set<std::string> cancelled;  // cancel orders already carried out, until the controller forgets them
  while (true) {
    std::optional<SlurmOrders> orders = AwaitOrders();
    if (!orders) {
      if (channel->stopped()) return;
      spdlog::warn("slurm: no orders from the control thread within {} s; asking again",
                   kControlAnswerTimeout.count());
      continue;
    }
    // Released jobs' steps are stopped (with their grace) before their allocations are cancelled: the
    // other way round the step lost its grace to the allocation's end.
    std::set<std::string> ordered;
    for (const SlurmJobOrder& o : orders->jobs) ordered.insert(o.job);
    for (auto it = runs.begin(); it != runs.end();) {  // released: stop what still runs
      if (ordered.count(it->first)) {
        ++it;
        continue;
      }
      if (it->second.step) StopStep(it->first, it->second, 10);
      if (!it->second.adopted_step.empty()) StopAdopted(it->first, it->second, 10);
      it = runs.erase(it);
    }
    for (const std::string& id : orders->cancel) {
      if (cancelled.count(id)) continue;
      Status s = launcher->CancelAllocation(id, Secs(60));
      if (!s.ok()) {
        spdlog::warn("slurm: cancelling allocation {}: {} (tried again)", id, s.message());
        continue;
      }
      spdlog::info("slurm: allocation {} cancelled", id);
      cancelled.insert(id);
      Send({.kind = Kind::kCancelled, .allocation = id});
    }
    std::erase_if(cancelled, [&](const std::string& id) {
      return std::find(orders->cancel.begin(), orders->cancel.end(), id) == orders->cancel.end();
    });
    for (const SlurmJobOrder& o : orders->jobs) {
      struct Run& run = runs[o.job];
      Allocation(o, run);
      Steps(o, run);
    }
    std::unique_lock lock(mu);
    if (cv.wait_for(lock, interval, [this] { return stopping; })) return;
  }
}

void SlurmLaunchWorker::State::Allocation(const SlurmJobOrder& o, struct Run& run) {
  const SlurmAllocationRecord& a = o.allocation;
  using S = SlurmAllocationRecord::State;
  // Recorded by the controller: a later want (the job placed again, its allocation given back) is a new
  // request. Kept, the old id made every later want look unrecorded, and none was ever submitted.
  if (a.state != S::kWanted || a.adopted) run.submitted.clear();
  if (a.state == S::kWanted && !a.adopted) {
    if (!run.submitted.empty()) return;  // the controller has not recorded it yet
    if (!o.allocation_durable) return;   // nor the request itself: a successor would not know it
    slurm::AllocationRequest r;
    r.name = "shepherd-" + o.job;
    r.nodes = static_cast<int>(a.nodes.size());
    r.spares = 0;  // the nodelist names them all: the placement's nodes and the spares
    r.nodelist = a.nodes;
    r.extra_args = o.sbatch_args;
    r.comment = a.request.empty() ? "" : "shepherd-request=" + a.request;
    // An earlier daemon may have submitted this very request and stopped before its id was recorded: that
    // allocation is taken, not asked for twice (the second would wait for the nodes the first holds).
    if (!r.comment.empty()) {
      auto found = launcher->FindAllocation(r.name, r.comment);
      if (!found.ok()) {
        spdlog::warn("slurm: job {}: looking for its earlier request: {}", o.job, found.status().message());
        return;  // the next pass asks again; never submit without knowing
      }
      if (!found->empty()) {
        spdlog::warn(
            "slurm: job {}: allocation {} of this request was submitted before (its id was not "
            "recorded): taking it",
            o.job, *found);
        run.submitted = *found;
        Send({.kind = Kind::kSubmitted, .job = o.job, .allocation = *found});
        return;
      }
    }
    auto id = launcher->SubmitAllocation(r);
    if (!id.ok()) {
      Send({.kind = Kind::kAllocationEnded,
            .job = o.job,
            .message = "sbatch refused: " + id.status().message()});
      return;
    }
    spdlog::info("slurm: job {}: allocation {} requested ({} nodes)", o.job, *id, a.nodes.size());
    run.submitted = *id;
    Send({.kind = Kind::kSubmitted, .job = o.job, .allocation = *id});
    return;
  }
  if (a.id.empty()) return;
  auto shown = launcher->ShowAllocation(a.id);
  if (!shown.ok()) {
    if (shown.status().code() == Code::kNotFound)
      Send({.kind = Kind::kAllocationEnded,
            .job = o.job,
            .allocation = a.id,
            .message = "Slurm no longer knows it"});
    else
      spdlog::warn("slurm: job {}: allocation {}: {}", o.job, a.id, shown.status().message());
    return;
  }
  if ((shown->state == slurm::SlurmJobState::kSuspended) != run.suspended) {
    run.suspended = !run.suspended;
    Send({.kind = run.suspended ? Kind::kSuspended : Kind::kResumed, .job = o.job, .allocation = a.id});
  }
  // Why it waits, in Slurm's words (Priority, Resources, ReqNodeNotAvail, PartitionTimeLimit, ...): each
  // change is told, so a wait that cannot end by itself shows in the job's reason.
  if (shown->state != slurm::SlurmJobState::kPending) {
    run.pending.clear();
  } else if (shown->reason != run.pending && !shown->reason.empty() && shown->reason != "None") {
    run.pending = shown->reason;
    Send({.kind = Kind::kPending, .job = o.job, .allocation = a.id, .message = shown->reason});
  }
  if (shown->state == slurm::SlurmJobState::kRunning) {
    if (a.state != S::kRunning || shown->nodes != a.nodes)
      Send({.kind = Kind::kAllocated, .job = o.job, .allocation = a.id, .nodes = shown->nodes});
  } else if (!slurm::IsActive(shown->state)) {
    Send({.kind = Kind::kAllocationEnded,
          .job = o.job,
          .allocation = a.id,
          .message = std::string("ended ") + slurm::ToString(shown->state) + " (" + shown->reason + ")"});
  } else if (a.adopted && a.state == S::kWanted) {
    Send({.kind = Kind::kAllocationEnded,
          .job = o.job,
          .allocation = a.id,
          .message = std::string("is ") + slurm::ToString(shown->state) + ", not running: cannot adopt it"});
  }
}

void SlurmLaunchWorker::State::Steps(const SlurmJobOrder& o, struct Run& run) {
  if (!run.adopted_step.empty()) {  // not our child: watched through Slurm until it is gone
    auto steps = launcher->cli().ShowSteps(o.allocation.id);
    bool running = !steps.ok();  // unknown: assume it still runs
    if (steps.ok())
      for (const slurm::SlurmStep& st : *steps) running |= st.id == run.adopted_step;
    if (running && (!o.step_wanted || o.attempt != run.step_attempt)) {
      StopAdopted(o.job, run, o.stop_grace_s);
      return;  // its end is seen at the next poll
    }
    if (running) return;
    run.adopted_step.clear();
    Ended(o.job, run, slurm::ExitStatus{}, /*exit_known=*/false);
    return;
  }
  if (run.step && (!o.step_wanted || o.attempt != run.step_attempt)) StopStep(o.job, run, o.stop_grace_s);
  if (run.step) {
    if (auto exit = launcher->PollStep(*run.step)) Ended(o.job, run, *exit);
    return;
  }
  if (!o.step_wanted || !o.step || o.attempt == run.done_attempt) return;
  // An earlier daemon's step of this attempt may still run (its srun runs in a session of its own and
  // outlives the daemon; docs/operations.md, "Slurm steps and the daemon's life"): never start the
  // attempt twice; watch that step instead, and read its log (srun still writes it) when it ends.
  if (auto steps = launcher->cli().ShowSteps(o.allocation.id); steps.ok()) {
    for (const slurm::SlurmStep& st : *steps)
      // (Not the worker's own fenced step, which is ending: every task of it exited without running.)
      if (slurm::IsStepOfAttempt(st.name, o.attempt) && st.name != slurm::StepName(o.attempt, run.used_order)) {
        spdlog::warn("slurm: job {} attempt {}: step {} ({}) already runs (an earlier daemon's): watching it",
                     o.job, o.attempt, st.id, st.name);
        run.adopted_step = st.id;
        run.step_attempt = o.attempt;
        run.step_log = ExistingLog(o.job, o.attempt, o.allocation.id);
        Send({.kind = Kind::kStepStarted, .job = o.job, .attempt = o.attempt, .step_id = st.id});
        return;
      }
    if (!o.step_ran) {
      if (EarlierSrun(o, run)) return;
    } else {  // it ran under an earlier daemon and ended while none watched: never run it twice
      spdlog::warn("slurm: job {} attempt {}: its step ended while no shepherdd watched it: exit unknown",
                   o.job, o.attempt);
      run.step_attempt = o.attempt;
      run.step_log = ExistingLog(o.job, o.attempt, o.allocation.id);
      Ended(o.job, run, slurm::ExitStatus{}, /*exit_known=*/false);
      return;
    }
  } else {
    spdlog::warn("slurm: job {}: cannot list the steps of {}: {}", o.job, o.allocation.id,
                 steps.status().message());
    return;  // try again next poll rather than risk a second step
  }
  // The fence (docs/slurm.md, "One step per attempt"): srun only under a launch order this daemon wrote,
  // durable before the listing above, and never used before. An earlier leader's srun of an older order
  // whose step Slurm did not list yet either had a task pass its check before that order was durable (then
  // its step existed before this listing, which would have found it) or never runs its command.
  if (!o.order_mine || o.order == run.used_order) {
    Send({.kind = Kind::kOrderWanted, .job = o.job, .attempt = o.attempt, .order = run.used_order});
    return;
  }
  slurm::StepSpec spec = *o.step;
  spec.log_path = LogPath(o.job, o.attempt);
  if (!config.request_gpus) spec.gpus_per_node = 0;
  // A fresh log (a leftover of another database's job of the same name would read as this step's), and the
  // allocation it belongs to, before srun starts: how a successor on this host recognises both.
  std::ofstream(spec.log_path, std::ios::trunc).flush();
  if (!(std::ofstream(spec.log_path + ".allocation", std::ios::trunc) << o.allocation.id << '\n').flush())
    spdlog::warn(
        "slurm: job {}: cannot write {}.allocation: a daemon restarted here will not read this "
        "step's log",
        o.job, spec.log_path);
  run.used_order = o.order;
  auto step = launcher->StartStep(spec);
  run.step_attempt = o.attempt;
  run.step_log = spec.log_path;
  if (!step.ok()) {
    spdlog::warn("slurm: job {} attempt {}: {}", o.job, o.attempt, step.status().message());
    run.done_attempt = o.attempt;
    Send({.kind = Kind::kStepFailed,
          .job = o.job,
          .attempt = o.attempt,
          .log_tail = Tail(spec.log_path),
          .message = step.status().message()});
    return;
  }
  spdlog::info("slurm: job {} attempt {}: step {} runs (log {})", o.job, o.attempt, step->step_id,
               spec.log_path);
  run.step = *step;
  run.ranks = spec.placement.ranks.size();
  Send({.kind = Kind::kStepStarted, .job = o.job, .attempt = o.attempt, .step_id = step->step_id});
  if (step->early_exit) Ended(o.job, run, *step->early_exit);
}

bool SlurmLaunchWorker::State::EarlierSrun(const SlurmJobOrder& o, struct Run& run) {
  const std::string log = ExistingLog(o.job, o.attempt, o.allocation.id);
  if (log.empty()) {
    run.earlier_srun_since.reset();
    return false;
  }
  if (const pid_t srun = slurm::FindSrun(o.allocation.id, o.attempt); srun > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (!run.earlier_srun_since) {
      spdlog::warn(
          "slurm: job {} attempt {}: an earlier daemon's srun (pid {}) is still creating step {}: waiting "
          "for it",
          o.job, o.attempt, srun, slurm::StepName(o.attempt, 0));
      run.earlier_srun_since = now;
    }
    if (now - *run.earlier_srun_since < o.step->start_timeout) return true;
    spdlog::warn("slurm: job {} attempt {}: the earlier srun (pid {}) created no step in {} s: killed", o.job,
                 o.attempt, srun, o.step->start_timeout.count());
    SignalGroup(srun, SIGKILL);
    run.earlier_srun_since.reset();
    return true;  // the next poll starts the step, once Slurm lists none
  }
  run.earlier_srun_since.reset();
  const std::string said = ReadAll(log);
  if (!slurm::TasksRan(said)) return false;  // refused, or killed before any task ran: start it
  if (AllStale(said, o.step->placement.ranks.size())) return false;  // fenced: no rank ran its command
  // Tasks ran: the step ended, unless Slurm listed it only after the caller looked.
  auto steps = launcher->cli().ShowSteps(o.allocation.id);
  if (!steps.ok() ||
      std::any_of(steps->begin(), steps->end(),
                  [&](const slurm::SlurmStep& st) { return slurm::IsStepOfAttempt(st.name, o.attempt); }))
    return true;  // the next poll adopts it (or asks again)
  spdlog::warn("slurm: job {} attempt {}: its step ran under an earlier daemon and ended: exit unknown",
               o.job, o.attempt);
  run.step_attempt = o.attempt;
  run.step_log = log;
  Ended(o.job, run, slurm::ExitStatus{}, /*exit_known=*/false);
  return true;
}

void SlurmLaunchWorker::State::StopStep(const std::string& job, struct Run& run, double grace_s) {
  spdlog::info("slurm: job {}: stopping the step of attempt {} (grace {} s)", job, run.step_attempt, grace_s);
  auto exit = launcher->StopStep(*run.step, Secs(static_cast<long>(grace_s)));
  if (!exit.ok()) spdlog::error("slurm: job {}: {}", job, exit.status().message());
  Ended(job, run, exit.ok() ? *exit : slurm::ExitStatus{});
}

void SlurmLaunchWorker::State::StopAdopted(const std::string& job, const struct Run& run, double grace_s) {
  spdlog::info("slurm: job {}: stopping step {} of attempt {} (an earlier daemon's; grace {} s)", job,
               run.adopted_step, run.step_attempt, grace_s);
  (void)launcher->cli().Cancel(run.adopted_step, "TERM");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long>(grace_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    auto steps = launcher->cli().ShowSteps(run.adopted_step.substr(0, run.adopted_step.find('.')));
    if (steps.ok() && std::none_of(steps->begin(), steps->end(),
                                   [&](const slurm::SlurmStep& st) { return st.id == run.adopted_step; }))
      return;
    std::unique_lock lock(mu);
    if (cv.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping; })) return;
  }
  (void)launcher->cli().Cancel(run.adopted_step, "KILL");
  (void)launcher->cli().Cancel(run.adopted_step);
}

void SlurmLaunchWorker::State::Ended(const std::string& job, struct Run& run, slurm::ExitStatus exit,
                                     bool exit_known) {
  SlurmLaunchEvent ev{.kind = Kind::kStepEnded, .job = job, .attempt = run.step_attempt, .exit = exit};
  // An adopted step's srun (an earlier daemon's child) wrote the same log: what it says of failed tasks
  // and lost nodes still names them.
  const std::string said = ReadAll(run.step_log);
  if (run.step && AllStale(said, run.ranks)) {
    // Every task was fenced off (its launch order was no longer current when it asked): no rank ran its
    // command, so this is not the attempt's end. The next poll asks for a new order.
    spdlog::warn("slurm: job {} attempt {}: every task of the step exited {} (launch order {} not current): "
                 "no rank ran; not the attempt's end",
                 job, run.step_attempt, slurm::kStaleOrderExit, run.used_order);
    run.step.reset();
    return;
  }
  ev.log = slurm::ParseStepLog(said);
  ev.log_tail = Tail(run.step_log);
  if (!exit_known)
    ev.message = "the step ended while an earlier shepherdd was its srun's parent: its exit is unknown";
  run.done_attempt = run.step_attempt;
  run.step.reset();
  Send(std::move(ev));
}

}  // namespace shepherd
