#include "daemon/slurm_sync.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "slurm/cli.h"
#include "slurm/inventory.h"

namespace shepherd {

struct SlurmSyncLoop::State : std::enable_shared_from_this<SlurmSyncLoop::State> {
  SlurmConfig config;
  TopologyLevels levels;
  Controller* controller = nullptr;
  Post post;
  slurm::SlurmCli cli;
  std::thread worker;
  std::atomic<bool> stopped{false};  // read by callbacks on the control thread
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                                // guarded by mu
  std::optional<std::vector<SlurmNodeCommand>> answer;  // guarded by mu: the controller's commands

  void Run();
  // One cycle: read, reconcile on the control thread, run the commands. False when stopping.
  bool Cycle(std::string* last_error);
  // Waits for the controller's answer; nullopt when stopping.
  std::optional<std::vector<SlurmNodeCommand>> AwaitAnswer();
};

namespace {
slurm::SlurmCli::Options CliOptions(const SlurmConfig& c) {
  slurm::SlurmCli::Options o;
  o.slurm_conf = c.slurm_conf;
  o.timeout = std::chrono::milliseconds(static_cast<long>(c.command_timeout_s * 1000));
  return o;
}
}  // namespace

ExternalRequeue MakeSlurmRequeue(const SlurmConfig& config) {
  return [cli = slurm::SlurmCli(CliOptions(config))](const std::string& job, const Finding& f) {
    std::thread([cli, job, finding = f.id] {
      // Only a job that still runs: ranks that finished go silent too, and Slurm would requeue a finished
      // batch job as readily as a hung one.
      auto shown = cli.ShowJob(job);
      if (!shown.ok())
        return spdlog::error("slurm: not requeueing job {} for {}: {}", job, finding,
                             shown.status().message());
      if (shown->state != slurm::SlurmJobState::kRunning)
        return spdlog::warn("slurm: not requeueing job {} for {}: it is {}", job, finding, shown->state_text);
      auto out = cli.Run({"scontrol", "requeue", job});
      if (!out.ok() || !out->ok())
        return spdlog::error("slurm: requeue of job {} for {} failed: {}", job, finding,
                             out.ok() ? out->err : out.status().message());
      spdlog::warn("slurm: requeued job {} for {}", job, finding);
    }).detach();
  };
}

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
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  if (state_->worker.joinable()) state_->worker.join();
}

void SlurmSyncLoop::State::Run() {
  const auto interval = std::chrono::milliseconds(static_cast<long>(config.reconcile_interval_s * 1000));
  std::string last_error;
  while (Cycle(&last_error)) {
    std::unique_lock lock(mu);
    if (cv.wait_for(lock, interval, [this] { return stopping; })) return;
  }
}

std::optional<std::vector<SlurmNodeCommand>> SlurmSyncLoop::State::AwaitAnswer() {
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
  post([self = shared_from_this(), view = std::move(view).value()] {
    if (self->stopped) return;
    self->controller->SyncSlurm(view, [self](Result<std::vector<SlurmNodeCommand>> r) {
      if (!r.ok()) spdlog::warn("slurm: sync not applied: {}", r.status().message());
      {
        std::lock_guard lock(self->mu);
        self->answer = r.ok() ? std::move(r).value() : std::vector<SlurmNodeCommand>{};
      }
      self->cv.notify_all();
    });
  });
  std::optional<std::vector<SlurmNodeCommand>> commands = AwaitAnswer();
  if (!commands) return false;
  std::vector<SlurmCommandResult> results;
  for (const SlurmNodeCommand& c : *commands) {
    Status s =
        c.kind == SlurmNodeCommand::Kind::kDrain ? cli.DrainNode(c.node, c.reason) : cli.ResumeNode(c.node);
    results.push_back({c, std::move(s)});
  }
  if (!results.empty())
    post([self = shared_from_this(), results = std::move(results)] {
      if (!self->stopped) self->controller->SlurmCommandsDone(results);
    });
  return true;
}

}  // namespace shepherd
