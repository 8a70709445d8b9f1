#include "api/goodput_views.h"

#include <algorithm>

namespace shepherd {
namespace {

Json RenderSpan(const Span& s) {
  return {{"seconds", s.seconds}, {"gpu_hours", s.gpu_hours}};
}

Json RenderBuckets(const std::array<Span, kBucketCount>& buckets, const RecoveryParts& r) {
  Json out = Json::object();
  for (int b = 0; b < kBucketCount; ++b) out[ToString(static_cast<Bucket>(b))] = RenderSpan(buckets[b]);
  out["recovery"]["parts"] = {{"stop", RenderSpan(r.stop)},
                              {"wait", RenderSpan(r.wait)},
                              {"launch", RenderSpan(r.launch)},
                              {"load", RenderSpan(r.load)}};
  return out;
}

Json RenderByCause(const std::map<BadputCause, Span>& by_cause, const std::map<BadputCause, int>& incidents) {
  Json out = Json::object();
  for (const auto& [c, s] : by_cause) {
    Json e = RenderSpan(s);
    auto n = incidents.find(c);
    e["incidents"] = n == incidents.end() ? 0 : n->second;
    out[ToString(c)] = std::move(e);
  }
  return out;
}

double GpuHours(const std::array<Span, kBucketCount>& buckets) {
  double h = 0;
  for (const Span& s : buckets) h += s.gpu_hours;
  return h;
}

}  // namespace

AdviceOrReason AdviceInputFor(const Controller::GoodputRecords& r, const JobGoodput& whole,
                              const FleetRate& fleet) {
  AdviceOrReason out;
  // δ: seconds training waited on saves, per checkpoint saved (every checkpoint past pending).
  double save_s = 0;
  for (const Attempt& a : r.attempts) save_s += std::max(0.0, a.save_s);
  int saved = 0;
  for (const Checkpoint& c : r.checkpoints)
    if (c.status != CheckpointStatus::kPending) ++saved;
  if (saved == 0 || save_s <= 0) {
    out.reason = "no checkpoint save measured yet: the ranks report save time with their checkpoints";
    return out;
  }
  AdviceInput in;
  in.save_s = save_s / saved;
  // R: detection and recovery (less loading) per incident, as measured; else the default.
  int incidents = 0;
  for (const auto& [cause, n] : whole.incidents) incidents += n;
  const double load = whole.recovery.load.seconds;
  const double restart = whole.buckets[static_cast<int>(Bucket::kDetection)].seconds +
                         whole.buckets[static_cast<int>(Bucket::kRecovery)].seconds - load;
  in.restart_s = incidents > 0 ? std::max(0.0, restart / incidents) : kDefaultRestartSeconds;
  // Load: the mean of the attempts that resumed from a checkpoint and measured it.
  double loads = 0;
  int loaded = 0;
  for (const Attempt& a : r.attempts)
    if (!a.resume_checkpoint.empty() && a.load_s > 0) {
      loads += a.load_s;
      ++loaded;
    }
  in.load_s = loaded > 0 ? loads / loaded : 0;
  in.nodes = r.sizes.empty() ? SizeOf(Attempt{}, *r.job).nodes : r.sizes.back().nodes;
  if (in.nodes <= 0) {
    out.reason = "the job's size is not known";
    return out;
  }
  out.rate_source = fleet.enough ? "fleet" : "default";
  in.interruptions_per_node_hour = fleet.enough ? fleet.per_node_hour : kLlama3InterruptionsPerNodeHour;
  // The cadence now: the mean spacing of the running attempt's checkpoints.
  if (!r.attempts.empty() && !r.attempts.back().ended_at) {
    const int number = r.attempts.back().number;
    std::optional<Time> first, last;
    int n = 0;
    for (const Checkpoint& c : r.checkpoints) {
      if (c.attempt != number) continue;
      first = first ? std::min(*first, c.created_at) : c.created_at;
      last = last ? std::max(*last, c.created_at) : c.created_at;
      ++n;
    }
    if (n >= 2 && *last > *first) in.current_interval_s = ToSeconds(*last - *first) / (n - 1);
  }
  out.input = in;
  return out;
}

Json RenderJobGoodput(const Job& job, const JobGoodput& g, const AdviceOrReason& advice) {
  Json attempts = Json::array();
  for (const AttemptGoodput& a : g.attempts)
    attempts.push_back({{"attempt", a.attempt},
                        {"wall_s", a.wall_s},
                        {"productive_s", a.productive_s},
                        {"ettr", a.ettr},
                        {"ended_by", a.ended_by.empty() ? Json(nullptr) : Json(a.ended_by)},
                        {"cause", a.cause ? Json(ToString(*a.cause)) : Json(nullptr)}});
  Json out = {{"job", job.id},
              {"state", ToString(job.state)},
              {"since", FormatRfc3339(g.from)},
              {"until", FormatRfc3339(g.to)},
              {"wall_s", g.wall_s},
              {"gpus", g.gpus},
              {"gpu_hours", GpuHours(g.buckets)},
              {"ettr", g.ettr},
              {"buckets", RenderBuckets(g.buckets, g.recovery)},
              {"attempts", std::move(attempts)},
              {"by_cause", RenderByCause(g.by_cause, g.incidents)}};
  if (!advice.input) {
    out["checkpoint_advice"] = nullptr;
    out["checkpoint_advice_reason"] = advice.reason;
    return out;
  }
  const CheckpointAdvice a = AdviseCheckpoints(*advice.input);
  out["checkpoint_advice"] = ToJson(a);
  out["checkpoint_advice"]["inputs"]["rate_source"] = advice.rate_source;
  return out;
}

void FleetGoodput::Add(const Job& job, const JobGoodput& g) {
  wall_s += g.wall_s;
  for (int b = 0; b < kBucketCount; ++b) buckets[b] += g.buckets[b];
  recovery.stop += g.recovery.stop;
  recovery.wait += g.recovery.wait;
  recovery.launch += g.recovery.launch;
  recovery.load += g.recovery.load;
  for (const auto& [c, s] : g.by_cause) by_cause[c] += s;
  for (const auto& [c, n] : g.incidents) incidents[c] += n;
  jobs.push_back({job.id, job.state, g.wall_s, GpuHours(g.buckets), g.ettr});
}

Json RenderFleetGoodput(const FleetGoodput& f, std::optional<Time> since, Time until, const FleetRate& rate) {
  Json jobs = Json::array();
  for (const FleetGoodput::JobLine& j : f.jobs)
    jobs.push_back({{"job", j.job},
                    {"state", ToString(j.state)},
                    {"wall_s", j.wall_s},
                    {"gpu_hours", j.gpu_hours},
                    {"ettr", j.ettr}});
  const double productive = f.buckets[static_cast<int>(Bucket::kProductive)].seconds;
  return {{"since", since ? Json(FormatRfc3339(*since)) : Json(nullptr)},
          {"until", FormatRfc3339(until)},
          {"wall_s", f.wall_s},
          {"gpu_hours", GpuHours(f.buckets)},
          {"ettr", f.wall_s > 0 ? productive / f.wall_s : 0.0},
          {"buckets", RenderBuckets(f.buckets, f.recovery)},
          {"by_cause", RenderByCause(f.by_cause, f.incidents)},
          {"jobs", std::move(jobs)},
          {"interruption_rate",
           {{"per_node_hour", rate.enough ? rate.per_node_hour : kLlama3InterruptionsPerNodeHour},
            {"measured_per_node_hour", rate.per_node_hour},
            {"incidents", rate.incidents},
            {"node_hours", rate.node_hours},
            {"source", rate.enough ? "fleet" : "default"}}}};
}

FleetRate FleetRateOf(const Controller& c, Time now) {
  FleetRateTally tally;
  c.view().VisitGoodputRecords(Time::min(), false, [&](const Controller::GoodputRecords& r) {
    tally.Add({.job = r.job, .attempts = r.attempts, .findings = r.findings, .sizes = r.sizes}, now);
  });
  return tally.Result();
}

}  // namespace shepherd
