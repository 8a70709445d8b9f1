#include "slurm/step_fence.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "net/endpoint_list.h"

namespace shepherd::slurm {

FenceOutcome AskOrder(const OrderQuestion& q) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  const Clock::time_point deadline = Clock::now() + milliseconds(static_cast<int64_t>(q.timeout_s * 1000));
  net::HttpClientOptions o;
  o.base_url = q.url;
  o.token = q.token;
  o.body_limit = 64 * 1024;
  auto client = net::EndpointListClient::Create(o);
  if (!client.ok()) return {OrderVerdict::kRefused, "SHEPHERD_URL: " + client.status().message()};
  const std::string target = "/v1/jobs/" + net::EscapePathSegment(q.job) + "/slurm-order";
  const std::string body = OrderRequestBody(q);
  std::string last = "no answer";
  milliseconds pause(200);
  while (true) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= milliseconds(0)) break;
    auto r = (*client)->Request("POST", target, body, std::min(left, milliseconds(10000)));
    if (r.ok()) {
      const OrderVerdict v = ReadOrderAnswer(r->status, r->body);
      if (v != OrderVerdict::kRetry)
        return {v, "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300)};
      last = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300);
    } else {
      last = r.status().message();
    }
    // Bounded polling: every endpoint was tried in this request; wait a little before the next round.
    const auto rest = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (rest <= milliseconds(0)) break;
    std::this_thread::sleep_for(std::min(pause, rest));
    pause = std::min(pause * 2, milliseconds(2000));
  }
  return {OrderVerdict::kRetry, last};
}

}  // namespace shepherd::slurm
