#include "slurm/step_order.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include "core/json.h"

namespace shepherd::slurm {

std::string StepName(int attempt, int64_t order) {
  std::string name = "shepherd-a" + std::to_string(attempt);
  if (order > 0) name += "-o" + std::to_string(order);
  return name;
}

bool IsStepOfAttempt(std::string_view name, int attempt) {
  const std::string base = StepName(attempt, 0);
  if (name.substr(0, base.size()) != base) return false;
  std::string_view rest = name.substr(base.size());
  if (rest.empty()) return true;
  if (rest.size() < 3 || rest.substr(0, 2) != "-o") return false;
  for (char c : rest.substr(2))
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

namespace {

template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && p == end && !text.empty();
}

}  // namespace

Result<std::optional<OrderQuestion>> OrderQuestionFrom(const EnvMap& env) {
  auto get = [&](const char* k) -> std::string {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  const std::string order = get(kStepOrderVar);
  if (order.empty()) return std::optional<OrderQuestion>();
  OrderQuestion q;
  if (!ParseNumber(order, &q.order) || q.order <= 0)
    return InvalidArgument(std::string(kStepOrderVar) + ": not a launch order: " + order);
  q.job = get("SHEPHERD_JOB");
  if (q.job.empty()) return InvalidArgument("SHEPHERD_JOB: missing");
  if (!ParseNumber(get("SHEPHERD_ATTEMPT"), &q.attempt) || q.attempt <= 0)
    return InvalidArgument("SHEPHERD_ATTEMPT: missing or not an attempt number");
  q.allocation = get("SLURM_JOB_ID");
  if (q.allocation.empty()) return InvalidArgument("SLURM_JOB_ID: missing");
  q.url = get("SHEPHERD_URL");
  if (q.url.empty()) return InvalidArgument("SHEPHERD_URL: missing");
  q.token = get("SHEPHERD_TOKEN");
  if (const std::string t = get(kOrderCheckTimeoutVar); !t.empty()) {
    char* end = nullptr;
    q.timeout_s = std::strtod(t.c_str(), &end);
    if (*end != '\0' || !std::isfinite(q.timeout_s) || q.timeout_s <= 0 || q.timeout_s > 3600)
      return InvalidArgument(std::string(kOrderCheckTimeoutVar) + ": not a number of seconds in (0, 3600]");
  }
  return std::optional<OrderQuestion>(std::move(q));
}

std::string OrderRequestBody(const OrderQuestion& q) {
  return Json{{"allocation", q.allocation}, {"attempt", q.attempt}, {"order", q.order}}.dump();
}

OrderVerdict ReadOrderAnswer(int http_status, std::string_view body) {
  if (http_status == 200) {
    Result<Json> j = ParseJsonText(body, 4);
    if (!j.ok() || !j->is_object() || !j->contains("current") || !(*j)["current"].is_boolean())
      return OrderVerdict::kRetry;  // not the leader's answer (a proxy's page): ask again
    return (*j)["current"].get<bool>() ? OrderVerdict::kCurrent : OrderVerdict::kStale;
  }
  if (http_status >= 400 && http_status < 500 && http_status != 408 && http_status != 429)
    return OrderVerdict::kRefused;
  return OrderVerdict::kRetry;
}

}  // namespace shepherd::slurm
