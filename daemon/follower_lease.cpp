#include "daemon/follower_lease.h"

#include <algorithm>
#include <limits>

namespace shepherd {

RenewalDecision DecideRenewal(const RenewalInput& in) {
  using enum RenewalVerdict;
  // The view must be no older than S at the answer (a slow load can age it past S after its refresh).
  if (!in.confirmed_at || in.now - *in.confirmed_at > in.max_age || in.max_age <= std::chrono::nanoseconds(0))
    return {kRefuse, RenewalRefusal::kStaleView};
  if (!in.node_known) return {kRefuse, RenewalRefusal::kUnknownNode};
  if (std::find(in.running.begin(), in.running.end(), RankInView::kLost) != in.running.end())
    return {kStop, RenewalRefusal::kNone};
  if (std::find(in.running.begin(), in.running.end(), RankInView::kNotDesired) != in.running.end())
    return {kRefuse, RenewalRefusal::kNotDesired};
  return {kRenew, RenewalRefusal::kNone};
}

const char* ToString(RenewalRefusal why) {
  switch (why) {
    case RenewalRefusal::kNone:
      return "none";
    case RenewalRefusal::kStaleView:
      return "stale_view";
    case RenewalRefusal::kUnknownNode:
      return "unknown_node";
    case RenewalRefusal::kNotDesired:
      return "not_desired";
  }
  return "none";
}

Result<std::vector<RankRef>> RunningRanksOf(const Json& body) {
  if (!body.is_object()) return InvalidContent("invalid heartbeat", {{"$", "must be an object"}});
  std::vector<RankRef> out;
  auto procs = body.find("processes");
  if (procs == body.end() || procs->is_null()) return out;
  if (!procs->is_array()) return InvalidContent("invalid heartbeat", {{"processes", "must be an array"}});
  if (procs->size() > kMaxRenewalRanks)
    return InvalidContent("invalid heartbeat",
                          {{"processes", "at most " + std::to_string(kMaxRenewalRanks) + " entries"}});
  std::vector<FieldError> errs;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (std::size_t i = 0; i < procs->size(); ++i) {
    const Json& p = (*procs)[i];
    const std::string at = "processes[" + std::to_string(i) + "]";
    if (!p.is_object()) {
      errs.push_back({at, "must be an object"});
      continue;
    }
    auto state = p.find("state");
    if (state == p.end() || !state->is_string() || (*state != "running" && *state != "exited")) {
      errs.push_back({at + ".state", "must be \"running\" or \"exited\""});
      continue;
    }
    if (*state != "running") continue;
    RankRef r;
    auto job = p.find("job");
    if (job == p.end() || !job->is_string() || job->get_ref<const std::string&>().empty() ||
        job->get_ref<const std::string&>().size() > 128)
      errs.push_back({at + ".job", "must be a string of 1-128 characters"});
    else
      r.job = job->get<std::string>();
    auto whole = [&](const char* key, int* into) {
      auto v = p.find(key);
      if (v == p.end() || !v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > kMax)
        errs.push_back({at + "." + key, "must be an integer from 0 to 2^31-1"});
      else
        *into = static_cast<int>(v->get<int64_t>());
    };
    whole("attempt", &r.attempt);
    whole("rank", &r.rank);
    out.push_back(std::move(r));
  }
  if (!errs.empty()) return InvalidContent("invalid heartbeat", std::move(errs));
  return out;
}

}  // namespace shepherd
