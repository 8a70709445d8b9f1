#include "daemon/slurm_job_asker.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/control_channel.h"
#include "slurm/cli.h"

namespace shepherd {

using Answer = std::function<void(Result<slurm::SlurmJob>)>;

struct SlurmJobAsker::State : std::enable_shared_from_this<SlurmJobAsker::State> {
  slurm::SlurmCli cli;
  std::shared_ptr<ControlChannel> channel;
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;                             // guarded by mu
  std::deque<std::string> order;                     // guarded by mu: ids to ask, oldest first
  std::map<std::string, std::vector<Answer>> asked;  // guarded by mu: id -> who waits for it

  void Run() {
    for (;;) {
      std::string id;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [this] { return stopping || !order.empty(); });
        if (stopping) return;
        id = std::move(order.front());
        order.pop_front();
      }
      Result<slurm::SlurmJob> shown = cli.ShowJob(id);
      std::vector<Answer> waiting;
      {
        std::lock_guard lock(mu);
        waiting = std::exchange(asked[id], {});
        asked.erase(id);
      }
      // Owed to callers waiting on the control thread: delivered even once stopped.
      channel->Tell(
          [waiting = std::move(waiting), shown = std::move(shown)] {
            for (const Answer& d : waiting) d(shown);
          },
          /*even_stopped=*/true);
    }
  }
};

SlurmJobAsker::SlurmJobAsker(const SlurmConfig& config, Post post) : state_(std::make_shared<State>()) {
  slurm::SlurmCli::Options o;
  o.slurm_conf = config.slurm_conf;
  o.timeout =
      std::chrono::milliseconds(static_cast<long>(std::min(config.command_timeout_s, kMaxTimeoutS) * 1000));
  state_->cli = slurm::SlurmCli(o);
  state_->channel = ControlChannel::Create(std::move(post));
  state_->worker = std::thread([s = state_] { s->Run(); });
}

SlurmJobAsker::~SlurmJobAsker() {
  Stop();
}

void SlurmJobAsker::Ask(const std::string& id, Answer done) {
  if (!slurm::ValidJobId(id)) return done(InvalidArgument("not a Slurm job id: " + id));
  {
    std::lock_guard lock(state_->mu);
    if (!state_->stopping) {
      auto it = state_->asked.find(id);
      if (it != state_->asked.end()) return it->second.push_back(std::move(done));
      if (state_->asked.size() < kMaxPending) {
        state_->asked[id].push_back(std::move(done));
        state_->order.push_back(id);
        state_->cv.notify_one();
        return;
      }
    }
  }
  done(Unavailable("Slurm is being asked about too many jobs at once"));
}

void SlurmJobAsker::Stop() {
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopping) return;
    state_->stopping = true;
  }
  state_->cv.notify_all();
  if (state_->worker.joinable()) state_->worker.join();
  std::map<std::string, std::vector<Answer>> dropped;
  {
    std::lock_guard lock(state_->mu);
    dropped = std::exchange(state_->asked, {});
    state_->order.clear();
  }
  if (!dropped.empty())
    state_->channel->Tell(
        [dropped = std::move(dropped)] {
          for (const auto& [id, waiting] : dropped)
            for (const Answer& d : waiting) d(Unavailable("the daemon is stopping"));
        },
        /*even_stopped=*/true);
  state_->channel->Stop();
}

}  // namespace shepherd
