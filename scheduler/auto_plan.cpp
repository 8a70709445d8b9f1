// AutoPlan: exhaustive search over (tp, pp, micro_batch_size) with the smallest ZeRO stage that fits.
// The space is small (divisors of heads × divisors of layers × log2(batch) × 4 stages, a few thousand
// estimates at most), so no pruning beyond "a larger micro-batch never needs less memory".
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/planner.h"
#include "scheduler/planner_internal.h"

namespace shepherd {

namespace {

using namespace planner_internal;

std::vector<int> Divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "{" + s + "}";
}

// Fastest first; ties (1e-9 relative) to lower ZeRO, fewer stages, smaller TP, larger micro-batch.
bool Faster(const PlanEstimate& a, const PlanEstimate& b) {
  const double tol = 1e-9 * std::max(a.step_time_s, b.step_time_s);
  if (a.step_time_s < b.step_time_s - tol) return true;
  if (b.step_time_s < a.step_time_s - tol) return false;
  if (a.plan.zero_stage != b.plan.zero_stage) return a.plan.zero_stage < b.plan.zero_stage;
  if (a.plan.pp != b.plan.pp) return a.plan.pp < b.plan.pp;
  if (a.plan.tp != b.plan.tp) return a.plan.tp < b.plan.tp;
  return a.plan.micro_batch_size > b.plan.micro_batch_size;
}

struct Search {
  int layouts = 0;             // (tp, pp) pairs whose product divides the GPUs
  int rejected_batch = 0;      // ... whose dp does not divide the global batch
  int rejected_memory = 0;     // ... that do not fit even with ZeRO-3 at micro-batch 1
  int fitting_candidates = 0;  // (tp, pp, micro-batch) combinations that fit
  std::optional<PlanEstimate> best, runner_up;
  std::optional<PlanEstimate> best_lower_zero;  // the winner's layout one ZeRO stage lower (did not fit)
  std::optional<PlanEstimate> closest;          // least memory per GPU, for when nothing fits

  void Offer(const PlanEstimate& e, const std::optional<PlanEstimate>& lower_zero) {
    ++fitting_candidates;
    if (!best || Faster(e, *best)) {
      if (best && (!runner_up || Faster(*best, *runner_up))) runner_up = best;
      best = e;
      best_lower_zero = lower_zero;
    } else if (!runner_up || Faster(e, *runner_up)) {
      runner_up = e;
    }
  }
  void OfferClosest(const PlanEstimate& e) {
    if (!closest || e.memory.total < closest->memory.total ||
        (e.memory.total == closest->memory.total && Faster(e, *closest))) {
      closest = e;
    }
  }
};

std::string Explain(const JobSpec& spec, const Hardware& hw, const std::vector<int>& tps,
                    const std::vector<int>& pps, const Search& s) {
  const ModelSpec& m = spec.model;
  std::string x = Format(
      "auto: searched tp in %s (divisors of %d heads within the %d-GPU NVLink domain) and pp in %s "
      "(divisors of %d layers); %d (tp, pp) layouts divide %d GPUs",
      Join(tps).c_str(), m.heads, hw.nvlink_domain_gpus, Join(pps).c_str(), m.layers, s.layouts,
      spec.resources.gpus);
  if (s.rejected_batch > 0) {
    x += Format("; %d rejected because dp does not divide the global batch of %d", s.rejected_batch,
                spec.training.global_batch_size);
  }
  if (s.rejected_memory > 0) {
    x += Format("; %d rejected because they do not fit in memory even with ZeRO-3 and micro-batch 1",
                s.rejected_memory);
  }
  x += Format("; %d fitting (layout, micro-batch) candidates compared by estimated step time. ",
              s.fitting_candidates);
  if (!s.best) {
    x += "Nothing fits; closest (least memory per GPU): " + Describe(s.closest->plan) + ": " +
         DescribeEstimate(*s.closest, hw) +
         ". More GPUs, a higher recompute level or a shorter sequence would reduce memory per GPU.";
    return x;
  }
  x += "Chose " + Describe(s.best->plan) + " (fastest that fits): " + DescribeEstimate(*s.best, hw) + ".";
  if (s.best_lower_zero) {
    x += Format(" ZeRO-%d would need %.1f GB per GPU.", s.best_lower_zero->plan.zero_stage,
                s.best_lower_zero->memory.total / 1e9);
  }
  if (s.runner_up) {
    x += Format(" Runner-up %s: step %.3g s (%+.1f%%).", Describe(s.runner_up->plan).c_str(),
                s.runner_up->step_time_s, 100 * (s.runner_up->step_time_s / s.best->step_time_s - 1));
  }
  return x;
}

}  // namespace

Result<PlanEstimate> AutoPlan(const JobSpec& spec, const Hardware& hw) {
  std::vector<FieldError> errors = ValidateSpec(spec, hw);
  if (!errors.empty()) return InvalidContent("invalid job for planning", std::move(errors));
  const int gpus = spec.resources.gpus;
  const int batch = spec.training.global_batch_size;

  std::vector<int> tps;
  for (int tp : Divisors(spec.model.heads)) {
    if (tp <= hw.nvlink_domain_gpus) tps.push_back(tp);
  }
  const std::vector<int> pps = Divisors(spec.model.layers);

  Search s;
  for (int tp : tps) {
    for (int pp : pps) {
      if (gpus % (static_cast<long long>(tp) * pp) != 0) continue;
      ++s.layouts;
      const int dp = gpus / (tp * pp);
      if (batch % dp != 0) {
        ++s.rejected_batch;
        continue;
      }
      for (int mbs = 1; batch % (static_cast<long long>(mbs) * dp) == 0; mbs *= 2) {
        Plan plan{.tp = tp, .pp = pp, .dp = dp, .micro_batches = batch / (mbs * dp), .micro_batch_size = mbs};
        std::optional<PlanEstimate> lower;
        bool fitted = false;
        // With dp = 1 ZeRO shards nothing, so only stage 0 is worth naming.
        for (int zero = 0; zero <= (dp > 1 ? 3 : 0) && !fitted; ++zero) {
          plan.zero_stage = zero;
          PlanEstimate e = Estimate(spec, plan, hw);
          s.OfferClosest(e);
          if (e.fits) {
            s.Offer(e, lower);
            fitted = true;
          } else {
            lower = e;
          }
        }
        if (!fitted) {
          if (mbs == 1) ++s.rejected_memory;
          break;  // larger micro-batches need at least as much memory
        }
      }
    }
  }
  if (s.layouts == 0 || !s.closest) {
    return InvalidContent(
        "no parallel layout divides the job",
        {{"resources.gpus",
          Format("%d GPUs admit no tp (dividing %d heads, <= %d) × pp (dividing %d layers) "
                 "× dp dividing the global batch of %d",
                 gpus, spec.model.heads, hw.nvlink_domain_gpus, spec.model.layers, batch)}});
  }
  PlanEstimate result = s.best ? *s.best : *s.closest;
  result.explanation = Explain(spec, hw, tps, pps, s);
  return result;
}

}  // namespace shepherd
