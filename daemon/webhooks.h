// WebhookSender: delivers events (control/event_log.h) to the site's HTTP endpoints (docs/events.md,
// "Webhooks"). Each event is one POST of its JSON (as GET /v1/events renders it) with
// `X-Shepherd-Signature: sha256=<hex HMAC-SHA256 of the body under the webhook's secret>`.
// Threading: one sender thread per webhook delivers that webhook's events in order; Offer runs on the
// control thread and never blocks on the network (a short mutex hold per webhook): each webhook's queue is
// bounded, and an event offered to a full queue is dropped and counted. A delivery that fails (no
// connection, a timeout, an answer other than 2xx) is retried after an exponential back-off, at most
// max_attempts times, then counted failed; the next event goes on. Only http:// URLs (no TLS in the tree).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "control/event_log.h"
#include "core/status.h"

namespace shepherd {

struct WebhookConfig {
  std::string url;             // http://host[:port][/path]
  std::set<EventType> events;  // empty: every type
  std::string secret_file;     // mode 0600; its contents (trailing whitespace dropped) key the HMAC
};

struct WebhookOptions {
  std::size_t queue_limit = 10000;  // events waiting per webhook
  int max_attempts = 6;
  double first_backoff_s = 0.5;  // doubled after each failed attempt, up to max_backoff_s
  double max_backoff_s = 30;
  double timeout_s = 10;  // one POST, connect included
};

class WebhookSender {
 public:
  // Reads each secret file and starts the threads. kInvalidArgument naming the webhook when a URL is not
  // http:// or a secret file cannot be read (or others may read it).
  static Result<std::unique_ptr<WebhookSender>> Start(const std::vector<WebhookConfig>& hooks,
                                                      WebhookOptions options = {});
  virtual ~WebhookSender() = default;

  // Queues each event for the webhooks that want its type. Never blocks on delivery.
  virtual void Offer(const std::vector<Event>& events) = 0;
  // Deliveries by result, all webhooks together: "delivered", "retried" (an attempt that failed and will
  // be tried again), "failed" (gave up after max_attempts), "dropped" (the queue was full). Thread-safe.
  virtual std::map<std::string, uint64_t> Counts() const = 0;
  // Stops the threads: what is still queued is not delivered; an attempt in flight is cancelled.
  virtual void Stop() = 0;
};

// The value of X-Shepherd-Signature for `body` under `secret`.
std::string WebhookSignature(const std::string& secret, const std::string& body);

}  // namespace shepherd
