// Launch orders of Slurm steps: the fence that keeps one attempt from running as two steps (docs/slurm.md,
// "One step per attempt"). Every srun of an attempt carries a launch order, written durably with the attempt
// before srun starts; the step is named by it and every task's wrapper (`shepherd-slurm-rank`) asks the
// leader whether it is still the attempt's current order before it runs the rank's command.
// Pure: names, the request's body, and the wrapper's reading of the answer. The HTTP exchange itself is in
// slurm/step_fence.h. Any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "slurm/step_env.h"

namespace shepherd::slurm {

// srun's environment: the step's launch order (decimal). Absent in steps of older daemons: no check.
inline constexpr const char* kStepOrderVar = "SHEPHERD_SLURM_ORDER";
// How long the wrapper looks for a leader to confirm its order (seconds, optional; default 60).
inline constexpr const char* kOrderCheckTimeoutVar = "SHEPHERD_SLURM_ORDER_TIMEOUT_S";
// The wrapper's exit when its step's order is no longer the attempt's current one: the rank's command was
// not run (a newer launch order of the attempt exists, or the attempt ended).
inline constexpr int kStaleOrderExit = 121;
// The wrapper's exit when no leader confirmed the order within the timeout: the command was not run.
inline constexpr int kOrderUncheckedExit = 122;

// "shepherd-a<attempt>-o<order>", or "shepherd-a<attempt>" for order 0 (the name older daemons gave).
std::string StepName(int attempt, int64_t order);
// Whether `name` is a step of `attempt` under any launch order: "shepherd-a<attempt>" or
// "shepherd-a<attempt>-o<digits>".
bool IsStepOfAttempt(std::string_view name, int attempt);

// What a task's wrapper asks: its job, attempt, allocation and order, from its environment.
struct OrderQuestion {
  std::string job;         // SHEPHERD_JOB
  int attempt = 0;         // SHEPHERD_ATTEMPT
  std::string allocation;  // SLURM_JOB_ID
  int64_t order = 0;       // SHEPHERD_SLURM_ORDER
  std::string url;         // SHEPHERD_URL: one or more endpoints
  std::string token;       // SHEPHERD_TOKEN: the rank's own credential (may be empty: auth off)
  double timeout_s = 60;
};
// nullopt when the environment names no order (a step of an older daemon: the command runs as before);
// kInvalidArgument naming the variable when it names one but the rest is missing or malformed.
Result<std::optional<OrderQuestion>> OrderQuestionFrom(const EnvMap& env);
// The request body: {"allocation": ..., "attempt": N, "order": K}.
std::string OrderRequestBody(const OrderQuestion& q);

// How the wrapper reads one answer of POST /v1/jobs/{id}/slurm-order.
enum class OrderVerdict {
  kCurrent,  // 200 {"current": true}: run the command
  kStale,    // 200 {"current": false}: exit kStaleOrderExit
  kRetry,    // no leader confirmed it (503, a transport error, 5xx): ask again until the deadline
  kRefused,  // 4xx: the question itself is wrong (credential, body); exit kOrderUncheckedExit at once
};
OrderVerdict ReadOrderAnswer(int http_status, std::string_view body);

}  // namespace shepherd::slurm
