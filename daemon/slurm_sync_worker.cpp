#include "daemon/slurm_sync_worker.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "daemon/control_channel.h"
#include "slurm/cli.h"
#include "slurm/slurm_view.h"

namespace shepherd {

struct SlurmSyncWorker::State : std::enable_shared_from_this<SlurmSyncWorker::State> {
  SlurmConfig config;
  TopologyLevels levels;
  std::string topology_note;  // worker thread only: the last mapping note said (MapTopology)
  Controller* controller = nullptr;
  std::shared_ptr<ControlChannel> channel;
  slurm::SlurmCli cli;
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                 // guarded by mu
  std::vector<RequeueOutcome> requeues;  // guarded by mu: asked for, not yet run

  void Run();
  // One cycle: read, reconcile on the control thread, run the commands, read the watched jobs. False when
  // stopping.
  bool Cycle(std::string* last_error);
  // Runs one requeue if Slurm still shows the job running; fills in the outcome.
  void RunRequeue(RequeueOutcome* r) const;
};

namespace {
slurm::SlurmCli::Options CliOptions(const SlurmConfig& c) {
  slurm::SlurmCli::Options o;
  o.slurm_conf = c.slurm_conf;
  o.timeout = std::chrono::milliseconds(static_cast<long>(c.command_timeout_s * 1000));
  return o;
}
}  // namespace

SlurmSyncWorker::SlurmSyncWorker(const SlurmConfig& config, TopologyLevels levels, Controller* controller,
                                 Post post)
    : state_(std::make_shared<State>()) {
  state_->config = config;
  state_->levels = std::move(levels);
  state_->controller = controller;
  state_->channel = ControlChannel::Create(std::move(post));
  state_->cli = slurm::SlurmCli(CliOptions(config));
}

SlurmSyncWorker::~SlurmSyncWorker() {
  Stop();
}

void SlurmSyncWorker::Start() {
  spdlog::info("slurm: inventory from {} every {} s",
               state_->config.slurm_conf.empty() ? std::string("SLURM_CONF of the environment")
                                                 : state_->config.slurm_conf,
               state_->config.reconcile_interval_s);
  state_->worker = std::thread([s = state_] { s->Run(); });
}

void SlurmSyncWorker::Stop() {
  state_->channel->Stop();
  std::vector<RequeueOutcome> dropped;
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
    dropped = std::exchange(state_->requeues, {});
  }
  state_->cv.notify_all();
  if (state_->worker.joinable()) state_->worker.join();
  for (const RequeueOutcome& r : dropped)
    spdlog::warn("slurm: not requeueing job {} for {}: the daemon is stopping", r.external_id, r.finding);
}

void SlurmSyncWorker::Requeue(const std::string& external_id, const std::string& owner, const Finding& f) {
  {
    std::lock_guard lock(state_->mu);
    state_->requeues.push_back({f.id, f.job, external_id, false, "", owner});
  }
  state_->cv.notify_all();
}

void SlurmSyncWorker::State::Run() {
  const auto interval = std::chrono::milliseconds(static_cast<long>(config.reconcile_interval_s * 1000));
  std::string last_error;
  while (Cycle(&last_error)) {
    // Until the next cycle: the requeues asked for meanwhile, each as soon as it is asked.
    const auto next = std::chrono::steady_clock::now() + interval;
    for (;;) {
      std::unique_lock lock(mu);
      if (!cv.wait_until(lock, next, [this] { return stopping || !requeues.empty(); })) break;
      if (stopping) return;
      std::vector<RequeueOutcome> asked = std::exchange(requeues, {});
      lock.unlock();
      for (RequeueOutcome& r : asked) {
        RunRequeue(&r);
        channel->Tell([controller = controller, r] { controller->OnSlurmReport(r); });
      }
    }
  }
}

void SlurmSyncWorker::State::RunRequeue(RequeueOutcome* r) const {
  // Only a job that still runs: ranks that finished go silent too, and Slurm would requeue a finished
  // batch job as readily as a hung one.
  auto shown = cli.ShowJob(r->external_id);
  if (!shown.ok()) {
    r->detail = shown.status().message();
    return spdlog::error("slurm: not requeueing job {} for {}: {}", r->external_id, r->finding, r->detail);
  }
  // Anyone may name any Slurm job id as a watched job's external_id: the requeue is for the owner's own.
  const auto mapped = config.users.find(r->owner);
  const std::string& user = mapped == config.users.end() ? r->owner : mapped->second;
  if (std::optional<std::string> whose = slurm::NotOwnedBy(*shown, user)) {
    r->detail = *whose;
    return spdlog::warn("slurm: not requeueing job {} for {}: {}", r->external_id, r->finding, r->detail);
  }
  if (shown->state != slurm::SlurmJobState::kRunning) {
    r->detail = "Slurm shows job " + r->external_id + " " + shown->state_text;
    return spdlog::warn("slurm: not requeueing job {} for {}: it is {}", r->external_id, r->finding,
                        shown->state_text);
  }
  // Ranks that finished go silent while the batch script runs on (post-processing, a pause before the next
  // srun): only a job whose tasks still run can be hung.
  auto steps = cli.ShowSteps(r->external_id);
  if (!steps.ok()) {
    r->detail = steps.status().message();
    return spdlog::error("slurm: not requeueing job {} for {}: {}", r->external_id, r->finding, r->detail);
  }
  if (!slurm::TasksRunning(*steps)) {
    r->detail =
        "no step of Slurm job " + r->external_id + " runs tasks (its ranks ended; the batch script runs on)";
    return spdlog::warn("slurm: not requeueing job {} for {}: {}", r->external_id, r->finding, r->detail);
  }
  auto out = cli.Run({"scontrol", "requeue", r->external_id});
  if (!out.ok() || !out->ok()) {
    std::string err = out.ok() ? out->err : out.status().message();
    while (!err.empty() && std::isspace(static_cast<unsigned char>(err.back()))) err.pop_back();
    r->detail = "scontrol requeue " + r->external_id + " failed: " + err;
    return spdlog::error("slurm: {} (for {})", r->detail, r->finding);
  }
  r->requeued = true;
  spdlog::warn("slurm: requeued job {} for {}", r->external_id, r->finding);
}

bool SlurmSyncWorker::State::Cycle(std::string* last_error) {
  Result<slurm::SlurmView> view = slurm::ReadSlurmView(cli, levels);
  if (!view.ok()) {
    // Said once per distinct error: a cluster that stays unreachable must not flood the log.
    if (view.status().message() != *last_error)
      spdlog::error("slurm: cannot read the cluster: {}", view.status().message());
    *last_error = view.status().message();
    return true;
  }
  if (!last_error->empty()) spdlog::info("slurm: the cluster answers again");
  last_error->clear();
  if (view->topology.note != topology_note && !view->topology.note.empty())
    spdlog::warn("slurm: {}", view->topology.note);
  topology_note = view->topology.note;
  std::optional<SlurmWork> work = channel->Ask<SlurmWork>(
      [controller = controller, view = std::move(view).value()](std::function<void(SlurmWork)> reply) {
        controller->SyncSlurm(view, [reply](Result<SlurmWork> r) {
          if (!r.ok()) spdlog::warn("slurm: sync not applied: {}", r.status().message());
          reply(r.ok() ? std::move(r).value() : SlurmWork{});
        });
      },
      kControlAnswerTimeout);
  if (!work) {
    if (channel->stopped()) return false;
    spdlog::warn(
        "slurm: the control thread did not take the cluster's view within {} s; read again next cycle",
        kControlAnswerTimeout.count());
    return true;
  }
  std::vector<SlurmCommandResult> results;
  for (const SlurmNodeCommand& c : work->commands) {
    Status s =
        c.kind == SlurmNodeCommand::Kind::kDrain ? cli.DrainNode(c.node, c.reason) : cli.ResumeNode(c.node);
    results.push_back({c, std::move(s)});
  }
  // Every watched job, every cycle: SlurmJobWatch forgets the jobs it is not told about.
  std::vector<SlurmJobSighting> sightings;
  for (const WatchedSlurmJob& w : work->watched) sightings.push_back({w, cli.ShowJob(w.external_id)});
  if (!results.empty() || !sightings.empty())
    channel->Tell(
        [controller = controller, report = SlurmCycleResults{std::move(results), std::move(sightings)}] {
          controller->OnSlurmReport(report);
        });
  return true;
}

}  // namespace shepherd
