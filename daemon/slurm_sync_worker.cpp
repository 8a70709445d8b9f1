#include "daemon/slurm_sync_worker.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "slurm/cli.h"
#include "slurm/slurm_view.h"

namespace shepherd {

struct SlurmSyncLoop::State : std::enable_shared_from_this<SlurmSyncLoop::State> {
  SlurmConfig config;
  TopologyLevels levels;
  std::string topology_note;  // worker thread only: the last mapping note said (MapTopology)
  Controller* controller = nullptr;
  Post post;
  slurm::SlurmCli cli;
  std::thread worker;
  std::atomic<bool> stopped{false};  // read by callbacks on the control thread
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                        // guarded by mu
  std::optional<Controller::SlurmWork> answer;  // guarded by mu: the controller's answer
  std::vector<RequeueOutcome> requeues;         // guarded by mu: asked for, not yet run

  void Run();
  // One cycle: read, reconcile on the control thread, run the commands, read the watched jobs. False when
  // stopping.
  bool Cycle(std::string* last_error);
  // Waits for the controller's answer; nullopt when stopping.
  std::optional<Controller::SlurmWork> AwaitAnswer();
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

SlurmSyncLoop::SlurmSyncLoop(const SlurmConfig& config, TopologyLevels levels, Controller* controller,
                             Post post)
    : state_(std::make_shared<State>()) {
  state_->config = config;
  state_->levels = std::move(levels);
  state_->controller = controller;
  state_->post = std::move(post);
  state_->cli = slurm::SlurmCli(CliOptions(config));
}

SlurmSyncLoop::~SlurmSyncLoop() {
  Stop();
}

void SlurmSyncLoop::Start() {
  spdlog::info("slurm: inventory from {} every {} s",
               state_->config.slurm_conf.empty() ? std::string("SLURM_CONF of the environment")
                                                 : state_->config.slurm_conf,
               state_->config.reconcile_interval_s);
  state_->worker = std::thread([s = state_] { s->Run(); });
}

void SlurmSyncLoop::Stop() {
  state_->stopped = true;
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

void SlurmSyncLoop::Requeue(const std::string& external_id, const std::string& owner, const Finding& f) {
  {
    std::lock_guard lock(state_->mu);
    state_->requeues.push_back({f.id, f.job, external_id, false, "", owner});
  }
  state_->cv.notify_all();
}

void SlurmSyncLoop::State::Run() {
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
        post([self = shared_from_this(), r] {
          if (!self->stopped) self->controller->OnSlurmReport(r);
        });
      }
    }
  }
}

void SlurmSyncLoop::State::RunRequeue(RequeueOutcome* r) const {
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

std::optional<Controller::SlurmWork> SlurmSyncLoop::State::AwaitAnswer() {
  std::unique_lock lock(mu);
  cv.wait(lock, [this] { return stopping || answer.has_value(); });
  if (stopping) return std::nullopt;
  auto out = std::move(answer);
  answer.reset();
  return out;
}

bool SlurmSyncLoop::State::Cycle(std::string* last_error) {
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
  post([self = shared_from_this(), view = std::move(view).value()] {
    if (self->stopped) return;
    self->controller->SyncSlurm(view, [self](Result<Controller::SlurmWork> r) {
      if (!r.ok()) spdlog::warn("slurm: sync not applied: {}", r.status().message());
      {
        std::lock_guard lock(self->mu);
        self->answer = r.ok() ? std::move(r).value() : Controller::SlurmWork{};
      }
      self->cv.notify_all();
    });
  });
  std::optional<Controller::SlurmWork> work = AwaitAnswer();
  if (!work) return false;
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
    post([self = shared_from_this(), results = std::move(results), sightings = std::move(sightings)] {
      if (!self->stopped) self->controller->OnSlurmReport(SlurmCycleResults{results, sightings});
    });
  return true;
}

}  // namespace shepherd
