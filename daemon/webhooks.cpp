#include "daemon/webhooks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "net/http_client.h"
#include "core/sha256.h"

namespace shepherd {

std::string WebhookSignature(const std::string& secret, const std::string& body) {
  return "sha256=" + HexOf(HmacSha256(secret, body));
}

namespace {

struct Counters {
  std::atomic<uint64_t> delivered{0}, retried{0}, failed{0}, dropped{0};
};

// One webhook: its queue and the thread that empties it.
class Hook {
 public:
  Hook(WebhookConfig config, std::string secret, std::unique_ptr<net::HttpClient> client,
       WebhookOptions options, Counters* counts)
      : config_(std::move(config)),
        secret_(std::move(secret)),
        client_(std::move(client)),
        options_(options),
        counts_(counts) {
    std::string url = config_.url.substr(7);
    auto slash = url.find('/');
    target_ = slash == std::string::npos ? "/" : url.substr(slash);
    thread_ = std::thread([this] { Run(); });
  }

  bool Wants(EventType t) const { return config_.events.empty() || config_.events.count(t); }

  void Offer(std::string body) {
    {
      std::lock_guard lock(mu_);
      if (queue_.size() >= options_.queue_limit) {
        ++counts_->dropped;
        return;
      }
      queue_.push_back(std::move(body));
    }
    cv_.notify_one();
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    client_->Cancel();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    for (;;) {
      std::string body;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        body = std::move(queue_.front());
        queue_.pop_front();
      }
      Deliver(body);
    }
  }

  void Deliver(const std::string& body) {
    const auto timeout = std::chrono::milliseconds(static_cast<long>(options_.timeout_s * 1000));
    const net::HttpHeaders headers = {{"X-Shepherd-Signature", WebhookSignature(secret_, body)}};
    double backoff = options_.first_backoff_s;
    for (int attempt = 1;; ++attempt) {
      Result<net::HttpResult> r = client_->Request("POST", target_, body, timeout, headers);
      if (r.ok() && r->status >= 200 && r->status < 300) {
        ++counts_->delivered;
        return;
      }
      const std::string why = r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message();
      if (attempt >= options_.max_attempts) {
        ++counts_->failed;
        spdlog::warn("webhook {}: giving up on an event after {} attempts ({})", config_.url, attempt, why);
        return;
      }
      ++counts_->retried;
      spdlog::info("webhook {}: delivery failed ({}); retrying in {:.1f} s", config_.url, why, backoff);
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(backoff), [&] { return stopping_; })) return;
      backoff = std::min(backoff * 2, options_.max_backoff_s);
    }
  }

  WebhookConfig config_;
  std::string secret_;
  std::unique_ptr<net::HttpClient> client_;
  WebhookOptions options_;
  Counters* counts_;
  std::string target_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;  // rendered events, oldest first
  bool stopping_ = false;
  std::thread thread_;
};

class Sender final : public WebhookSender {
 public:
  ~Sender() override { Stop(); }

  void Offer(const std::vector<Event>& events) override {
    for (const Event& e : events) {
      std::string body;
      for (auto& h : hooks_) {
        if (!h->Wants(e.type)) continue;
        if (body.empty()) body = RenderEvent(e).dump();
        h->Offer(body);
      }
    }
  }

  std::map<std::string, uint64_t> Counts() const override {
    return {{"delivered", counts_.delivered.load()},
            {"retried", counts_.retried.load()},
            {"failed", counts_.failed.load()},
            {"dropped", counts_.dropped.load()}};
  }

  void Stop() override {
    for (auto& h : hooks_) h->Stop();
    hooks_.clear();
  }

  Counters counts_;
  std::vector<std::unique_ptr<Hook>> hooks_;
};

}  // namespace

Result<std::unique_ptr<WebhookSender>> WebhookSender::Start(const std::vector<WebhookConfig>& hooks,
                                                            WebhookOptions options) {
  auto sender = std::make_unique<Sender>();
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    const WebhookConfig& h = hooks[i];
    const std::string name = "webhooks[" + std::to_string(i) + "]";
    if (h.url.rfind("http://", 0) != 0)
      return InvalidArgument(name + ".url: must be an http:// URL (TLS is not supported)");
    Result<std::string> secret = net::ReadTokenFile(h.secret_file);
    if (!secret.ok()) return InvalidArgument(name + ".secret_file: " + secret.status().message());
    std::string base = h.url;
    if (auto slash = base.find('/', 7); slash != std::string::npos) base.resize(slash);
    net::HttpClientOptions o;
    o.base_url = base;
    o.keep_alive = true;
    o.body_limit = 1 << 20;
    auto client = net::HttpClient::Create(o);
    if (!client.ok()) return InvalidArgument(name + ".url: " + client.status().message());
    sender->hooks_.push_back(
        std::make_unique<Hook>(h, *secret, std::move(client).value(), options, &sender->counts_));
  }
  return std::unique_ptr<WebhookSender>(std::move(sender));
}

}  // namespace shepherd
