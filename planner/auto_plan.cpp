// AutoPlan: exhaustive search over (tp, cp, pp, etp, ep, vpp, micro_batch_size), every ZeRO stage that
// fits and, unless the spec names it, selective or full activation recompute (the fastest wins; ties to the
// smaller stage). The space stays small because every axis must divide
// something: tp divides the KV heads and fits the NVLink domain, cp is a power of two dividing seq_len/2
// (flash attention only), etp (MoE only) is tp or 1, ep (MoE only) divides experts and tp·cp·dp/etp, pp
// divides gpus/(tp·cp) and is at most the layer count, dp = gpus/(tp·cp·pp) divides the batch, micro-batches
// are powers of two (or the spec's own size when it names one). At 131,072 GPUs that is tens of thousands of
// estimates (bench/planner_bench.cpp). Pruning: a larger micro-batch never needs less memory, so the
// micro-batch loop stops at the first size nothing fits.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "planner/memory_model.h"
#include "planner/pipeline_layout.h"
#include "planner/planner.h"
#include "planner/planner_internal.h"

namespace shepherd {

namespace {

using namespace planner_internal;

constexpr int kMaxVpp = 16;
constexpr int kMaxCp = 64;

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "{" + s + "}";
}

// Fastest first; ties (1e-9 relative) to lower ZeRO, fewer stages, smaller tp, cp, ep, etp = tp, vpp, larger
// micro-batch.
bool Faster(const PlanEstimate& a, const PlanEstimate& b) {
  const double tol = 1e-9 * std::max(a.step_time_s, b.step_time_s);
  if (a.step_time_s < b.step_time_s - tol) return true;
  if (b.step_time_s < a.step_time_s - tol) return false;
  const Plan &p = a.plan, &q = b.plan;
  if (p.zero_stage != q.zero_stage) return p.zero_stage < q.zero_stage;
  if (p.pp != q.pp) return p.pp < q.pp;
  if (p.tp != q.tp) return p.tp < q.tp;
  if (p.cp != q.cp) return p.cp < q.cp;
  if (p.ep != q.ep) return p.ep < q.ep;
  if (p.etp != q.etp) return p.etp < q.etp;  // 0: etp = tp, the default
  if (p.vpp != q.vpp) return p.vpp < q.vpp;
  return p.micro_batch_size > q.micro_batch_size;
}

struct Search {
  int layouts = 0;                // (tp, cp, pp) whose product divides the GPUs
  int rejected_batch = 0;         // ... whose dp does not divide the global batch
  int rejected_memory = 0;        // (layout, vpp) that do not fit with any ZeRO stage at micro-batch 1
  int fitting_candidates = 0;     // fitting (layout, vpp, micro-batch) combinations
  std::vector<PlanEstimate> top;  // fastest first, at most 3
  std::optional<PlanEstimate> best_lower_zero;  // the winner's layout one ZeRO stage lower (did not fit)
  std::optional<PlanEstimate> closest;          // least memory per GPU, for when nothing fits

  void Offer(const PlanEstimate& e, const std::optional<PlanEstimate>& lower_zero) {
    ++fitting_candidates;
    auto at = std::find_if(top.begin(), top.end(), [&](const PlanEstimate& t) { return Faster(e, t); });
    if (at == top.end() && top.size() >= 3) return;
    if (at == top.begin()) best_lower_zero = lower_zero;
    top.insert(at, e);
    if (top.size() > 3) top.pop_back();
  }
  void OfferClosest(const PlanEstimate& e) {
    if (!closest || e.memory.total < closest->memory.total ||
        (e.memory.total == closest->memory.total && Faster(e, *closest))) {
      closest = e;
    }
  }
};

// " of the first N layers of each virtual stage" under block recompute; "" for every layer.
std::string RecomputedText(const PlanEstimate& e) {
  return e.recompute_num_layers > 0 ? Format(" of the first %d layer%s of each virtual stage",
                                             e.recompute_num_layers, e.recompute_num_layers == 1 ? "" : "s")
                                    : "";
}

// The layout, and full recompute when auto chose it.
std::string Candidate(const PlanEstimate& e, const TrainingSpec& t) {
  if (t.activation_recompute_given) return Describe(e.plan);
  if (e.activation_recompute == Recompute::kFull)
    return Describe(e.plan) + " with full activation recompute" + RecomputedText(e);
  // Under fsdp, where selective (torchtitan's per-op checkpointing) is the default, none is a choice too.
  return Describe(e.plan) +
         (e.activation_recompute == Recompute::kNone ? " without activation recompute" : "");
}

std::string Summary(const PlanEstimate& e, const TrainingSpec& t) {
  return Format("%s: step %.3g s, %.0f TFLOP/s per GPU, %.1f GB per GPU", Candidate(e, t).c_str(),
                e.step_time_s, e.tflops_per_gpu, e.memory.total / 1e9);
}

// Why `a` beats `b`: the step-time terms side by side.
std::string WhyFaster(const PlanEstimate& a, const PlanEstimate& b) {
  const double bubble_a = a.compute_time_s * a.bubble_fraction / (1 - a.bubble_fraction);
  const double bubble_b = b.compute_time_s * b.bubble_fraction / (1 - b.bubble_fraction);
  return Format(
      "compute %.3g vs %.3g s, pipeline bubble %.3g vs %.3g s, exposed communication %.3g vs %.3g s",
      a.compute_time_s, b.compute_time_s, bubble_a, bubble_b, a.exposed_comm_s, b.exposed_comm_s);
}

// What was searched and what was rejected, up to the number of fitting candidates.
std::string SearchedText(const JobSpec& spec, const Hardware& hw, const std::vector<int>& tps,
                         const std::vector<int>& cps, const Search& s) {
  const ModelSpec& m = spec.model;
  const bool mbs_given = spec.training.micro_batch_size_given;
  std::string x = Format(
      "auto: searched tp in %s (dividing %d heads and %d KV heads within the %d-GPU NVLink domain), cp in "
      "%s, "
      "pp from 1 to %d layers (uneven stages balanced), vpp up to %d in equal chunks, %s%s, "
      "every fitting ZeRO stage%s; %d (tp, cp, pp) layouts divide %d GPUs",
      Join(tps).c_str(), m.heads, m.kv(), hw.nvlink_domain_gpus, Join(cps).c_str(), m.layers, kMaxVpp,
      m.moe.enabled() ? Format("etp of tp or 1, ep dividing %d experts and tp·cp·dp/etp%s, ", m.moe.experts,
                               spec.training.moe_a2a_overlap
                                   ? " (ep > 1 and vpp > 1 where pp > 1: training.moe_a2a_overlap)"
                                   : "")
                            .c_str()
                      : "",
      mbs_given ? Format("micro-batches of the given %d", spec.training.micro_batch_size).c_str()
                : "micro-batches of powers of two",
      spec.training.activation_recompute_given
          ? Format(" (%s activation recompute, as given)", ToString(spec.training.activation_recompute))
                .c_str()
      : OpCheckpointing(spec.training)
          ? " and no, per-op selective (torchtitan's) or full activation recompute"
          : " and no, selective or full activation recompute",
      s.layouts, spec.resources.gpus);
  if (s.rejected_batch > 0) {
    x += Format("; %d rejected because %s does not divide the global batch of %d", s.rejected_batch,
                mbs_given ? "micro_batch_size·dp" : "dp", spec.training.global_batch_size);
  }
  if (s.rejected_memory > 0) {
    x += Format(
        "; %d (layout, vpp) rejected because they do not fit in memory at any ZeRO stage with "
        "micro-batch 1",
        s.rejected_memory);
  }
  return x + Format("; %d fitting candidates compared by estimated step time. ", s.fitting_candidates);
}

std::string Explain(const JobSpec& spec, const Hardware& hw, const std::vector<int>& tps,
                    const std::vector<int>& cps, const Search& s) {
  std::string x = ParameterNote(spec.model) + SearchedText(spec, hw, tps, cps, s);
  if (s.top.empty()) {
    x += "Nothing fits; closest (least memory per GPU): " + Candidate(*s.closest, spec.training) + ": " +
         DescribeEstimate(*s.closest, hw) + ". More GPUs" +
         (spec.training.activation_recompute == Recompute::kFull || !spec.training.activation_recompute_given
              ? ""
              : ", a higher recompute level") +
         " or a shorter sequence would reduce memory per GPU.";
    return x;
  }
  const PlanEstimate& best = s.top.front();
  x +=
      "Chose " + Candidate(best, spec.training) + " (fastest that fits): " + DescribeEstimate(best, hw) + ".";
  if (s.best_lower_zero) {
    x += Format(" ZeRO-%d would need %.1f GB per GPU.", s.best_lower_zero->plan.zero_stage,
                s.best_lower_zero->memory.total / 1e9);
  }
  x += " Top candidates: ";
  for (size_t i = 0; i < s.top.size(); ++i)
    x += Format("%zu) %s; ", i + 1, Summary(s.top[i], spec.training).c_str());
  if (s.top.size() > 1) {
    x += Format("the winner is %.1f%% faster than the runner-up (%s).",
                100 * (s.top[1].step_time_s / best.step_time_s - 1), WhyFaster(best, s.top[1]).c_str());
  }
  return x;
}

// The expert grids searched over the tp·cp·dp ranks of a stage: etp is tp (Megatron's default) or, for a
// MoE model with tp > 1, 1 (the experts whole on each rank, as Megatron-Bridge's MoE recipes run them); ep
// each common divisor of the routed experts and tp·cp·dp/etp. A dense model has the one grid (tp, 1).
struct ExpertGrid {
  int etp, ep;
};
std::vector<ExpertGrid> ExpertGrids(const ModelSpec& m, int tp, long long stage_ranks) {
  if (!m.moe.enabled()) return {{tp, 1}};
  std::vector<ExpertGrid> grids;
  for (int etp : tp > 1 ? std::vector<int>{tp, 1} : std::vector<int>{tp}) {
    const long long limit = std::gcd(static_cast<long long>(m.moe.experts), stage_ranks / etp);
    for (int ep = 1; ep <= limit; ++ep)
      if (limit % ep == 0) grids.push_back({etp, ep});
  }
  return grids;
}

// `fits`, an estimate of `plan` under `full` (full recompute of every layer, a recompute the request left
// open), with as few layers recomputed as still fit: Megatron-Core's block method (recompute_num_layers N,
// the first N of each virtual stage) is faster by the forwards it does not run again. Memory falls as N
// grows, so N is bisected between 1 and the largest virtual stage's layers (all of them: `fits` itself).
PlanEstimate FewestRecomputed(const JobSpec& full, const Plan& plan, const Hardware& hw,
                              const ModelCounts& counts, PlanEstimate fits) {
  if (full.training.framework != Framework::kMegatron) return fits;  // the block method is Megatron-Core's
  const std::vector<int>& stages = fits.stage_layers;  // the candidate's, as its estimate laid them out
  const int all = (*std::max_element(stages.begin(), stages.end()) + plan.vpp - 1) / plan.vpp;
  JobSpec block = full;
  int lo = 1, hi = all;  // hi fits
  std::optional<PlanEstimate> best;
  while (lo < hi) {
    block.training.recompute_num_layers = (lo + hi) / 2;
    PlanEstimate e = Estimate(block, plan, hw, counts);
    if (e.fits) {
      hi = block.training.recompute_num_layers;
      best = std::move(e);
    } else {
      lo = block.training.recompute_num_layers + 1;
    }
  }
  return best ? std::move(*best) : std::move(fits);
}

std::vector<int> ZeroStages(const TrainingSpec& t, int shards, int pp) {
  if (t.framework == Framework::kFsdp) return {3};
  // DeepSpeed's pipeline engine takes ZeRO 0 or 1 only.
  const int top = t.framework == Framework::kDeepSpeed && pp > 1 ? 1 : 3;
  std::vector<int> out;
  // FP8 parameters are gathered from the optimizer's shards; with one shard there is nothing to shard.
  for (int z = t.fp8_param_gather ? 1 : 0; z <= (shards == 1 && !t.fp8_param_gather ? 0 : top); ++z)
    out.push_back(z);
  return out;
}

// The tp and cp values searched: tp divides the heads and the KV heads within the NVLink domain; cp is a
// power of two dividing seq_len/2, flash attention only (ring attention is fused).
struct Axes {
  std::vector<int> tps, cps;
};
Axes AxesOf(const JobSpec& spec, const Hardware& hw) {
  const ModelSpec& m = spec.model;
  Axes axes;
  const int tp_limit = std::gcd(m.heads, m.kv());
  for (int tp = 1; tp <= std::min(tp_limit, hw.nvlink_domain_gpus); ++tp) {
    if (tp_limit % tp == 0) axes.tps.push_back(tp);
  }
  const int max_cp = spec.training.attention == Attention::kFlash ? kMaxCp : 1;
  for (int cp = 1; cp <= max_cp; cp *= 2) {
    if (cp == 1 || m.seq_len % (2 * cp) == 0) axes.cps.push_back(cp);
  }
  return axes;
}

// The specs a candidate is estimated under. Full recompute costs a forward pass per micro-batch but keeps
// only each layer's input: it is tried where the spec leaves recompute open, unless moe_a2a_overlap asks
// for the combined 1F1B, which refuses it. Selective recompute runs work again (Megatron's core attention,
// torchtitan's per-op checkpointing under fsdp): none is tried first where the spec leaves recompute open;
// where selective keeps as much as none (flash attention in 16 bits), it is only slower: not evaluated.
struct RecomputeChoices {
  std::optional<JobSpec> full, none;
  bool selective_saves = false;
  ModelCounts counts;  // the model's, the same under every choice
};
RecomputeChoices RecomputeChoicesOf(const JobSpec& spec) {
  RecomputeChoices r;
  r.counts = ModelCountsOf(spec.model);
  const bool open =
      !spec.training.activation_recompute_given && spec.training.activation_recompute != Recompute::kFull;
  if (!open) return r;
  if (!spec.training.moe_a2a_overlap) {
    r.full = spec;
    r.full->training.activation_recompute = Recompute::kFull;
  }
  r.none = spec;
  r.none->training.activation_recompute = Recompute::kNone;
  const Plan one{.tp = 1, .pp = 1, .dp = 1, .zero_stage = 0, .micro_batches = 1, .micro_batch_size = 1};
  r.selective_saves = ActivationBytesPerLayer(spec.model, spec.training, one) <
                      ActivationBytesPerLayer(spec.model, r.none->training, one);
  return r;
}

// Every fitting ZeRO stage of `plan` is a candidate: a higher stage needs less memory but may also be
// faster (ZeRO-1's gather overlaps the forward where ZeRO-0's all-reduce follows the backward). Whether
// any fitted.
bool OfferZeroStages(const JobSpec& spec, const RecomputeChoices& r, Plan plan, const Hardware& hw,
                     Search* s) {
  std::optional<PlanEstimate> lower;  // the stage below the first that fits
  bool fitted = false;
  for (int zero : ZeroStages(spec.training, plan.dp * plan.cp, plan.pp)) {
    plan.zero_stage = zero;
    PlanEstimate e = Estimate(r.none ? *r.none : spec, plan, hw, r.counts);
    if (r.none && !e.fits && r.selective_saves) e = Estimate(spec, plan, hw, r.counts);
    const double state = e.memory.total - e.memory.activations;
    if (!e.fits && r.full &&
        (state <= e.usable_memory_bytes ||
         (s->top.empty() && (!s->closest || state < s->closest->memory.total)))) {
      // Full recompute is slower than selective at the same stage: tried only where selective does not
      // fit and the model state alone would, or while nothing fits where it could need less memory than
      // the closest so far (for `closest`).
      PlanEstimate f = Estimate(*r.full, plan, hw, r.counts);
      s->OfferClosest(f);
      if (f.fits) e = FewestRecomputed(*r.full, plan, hw, r.counts, std::move(f));
    }
    s->OfferClosest(e);
    if (e.fits) {
      s->Offer(e, fitted ? std::nullopt : lower);
      fitted = true;
    } else {
      lower = e;
    }
  }
  return fitted;
}

// The candidates of one (tp, cp, pp) layout with dp ranks: each expert grid, vpp and micro-batch size (a
// size the spec names is kept: it may be what the user's data loader or convergence needs; otherwise
// powers of two from 1).
void SearchLayout(const JobSpec& spec, const RecomputeChoices& r, const Hardware& hw, int tp, int cp, int pp,
                  int dp, Search* s) {
  const ModelSpec& m = spec.model;
  const int batch = spec.training.global_batch_size;
  const bool mbs_given = spec.training.micro_batch_size_given;
  const int mbs_first = mbs_given ? spec.training.micro_batch_size : 1;
  const int mbs_last = mbs_given ? mbs_first : batch;
  const std::vector<int> stages = StageLayers(m.layers, pp);
  const int max_vpp = pp == 1 || spec.training.framework == Framework::kDeepSpeed  // not interleaved
                          ? 1
                          : std::min(kMaxVpp, MaxVirtualStages(stages));
  for (const ExpertGrid g : ExpertGrids(m, tp, static_cast<long long>(tp) * cp * dp))
    for (int vpp = 1; vpp <= max_vpp; ++vpp) {
      if (vpp > 1 && !EvenVirtualStages(stages, vpp)) continue;
      // moe_a2a_overlap needs expert parallelism and, with a pipeline, the interleaved schedule.
      if (spec.training.moe_a2a_overlap && (g.ep < 2 || (pp > 1 && vpp < 2))) continue;
      for (int mbs = mbs_first; mbs <= mbs_last && batch % (static_cast<long long>(mbs) * dp) == 0;
           mbs *= 2) {
        if (vpp > 1 && batch / (mbs * dp) < pp) break;  // interleaving needs M >= pp (ValidateLayout)
        const Plan plan{.tp = tp,
                        .pp = pp,
                        .dp = dp,
                        .micro_batches = batch / (mbs * dp),
                        .micro_batch_size = mbs,
                        .cp = cp,
                        .vpp = vpp,
                        .sequence_parallel = tp > 1,
                        .pipeline_layers = {},
                        .ep = g.ep,
                        .etp = g.etp == tp ? 0 : g.etp};
        if (!OfferZeroStages(spec, r, plan, hw, s)) {
          if (mbs == mbs_first) ++s->rejected_memory;
          break;  // larger micro-batches need at least as much memory
        }
      }
    }
}

// The answer when no candidate was estimated at all.
Status NoLayoutError(const JobSpec& spec, const Hardware& hw, const Search& s) {
  const ModelSpec& m = spec.model;
  if (spec.training.moe_a2a_overlap && s.layouts > 0) {
    return InvalidContent(
        "no parallel layout divides the job",
        {{"training.moe_a2a_overlap", "no layout with ep > 1 (and vpp > 1 where pp > 1) divides the job"}});
  }
  return InvalidContent(
      "no parallel layout divides the job",
      {{"resources.gpus",
        Format("%d GPUs admit no tp (dividing %d heads and %d KV heads, <= %d) × cp × pp (<= %d layers) × dp "
               "dividing the global batch of %d",
               spec.resources.gpus, m.heads, m.kv(), hw.nvlink_domain_gpus, m.layers,
               spec.training.global_batch_size)}});
}

// The search itself, for spec.resources.gpus (validated by the caller).
Result<PlanEstimate> SearchLayouts(const JobSpec& spec, const Hardware& hw) {
  const long long gpus = spec.resources.gpus;
  const int batch = spec.training.global_batch_size;
  const int mbs_first = spec.training.micro_batch_size_given ? spec.training.micro_batch_size : 1;
  const Axes axes = AxesOf(spec, hw);
  const RecomputeChoices recompute = RecomputeChoicesOf(spec);
  // Megatron-Core offloads activations only without pipeline parallelism.
  const int max_pp = spec.training.cpu_offload_layers > 0 ? 1 : spec.model.layers;
  Search s;
  for (int tp : axes.tps)
    for (int cp : axes.cps)
      for (int pp = 1; pp <= max_pp; ++pp) {
        const long long model_ranks = static_cast<long long>(tp) * cp * pp;
        if (model_ranks > gpus) break;
        if (gpus % model_ranks != 0) continue;
        ++s.layouts;
        const int dp = static_cast<int>(gpus / model_ranks);
        if (batch % (static_cast<long long>(mbs_first) * dp) != 0) {
          ++s.rejected_batch;
          continue;
        }
        SearchLayout(spec, recompute, hw, tp, cp, pp, dp, &s);
      }
  if (!s.closest) return NoLayoutError(spec, hw, s);
  PlanEstimate result = s.top.empty() ? *s.closest : s.top.front();
  result.explanation = Explain(spec, hw, axes.tps, axes.cps, s);
  return result;
}

// Multiples of the GPU count tried when nothing fits, and the largest count tried: a search at 2^k times
// the GPUs costs about what the first did, so the answer stays within a few searches' time.
constexpr int kMaxGpuMultiple = 64;
constexpr long long kMaxGpusTried = 262144;

}  // namespace

namespace {

// What an explicit layout leaves open (CompleteLayout), and the values tried for each.
struct OpenChoices {
  bool vpp = false, zero = false, mbs = false, recompute = false;
  std::vector<int> zeros, vpps;
};
OpenChoices OpenChoicesOf(const JobSpec& spec, const Plan& given) {
  const TrainingSpec& t = spec.training;
  const ParallelismSpec& par = spec.parallelism;
  OpenChoices o;
  o.vpp = !par.vpp_given && given.pp > 1 && t.framework != Framework::kDeepSpeed;
  o.zero = !par.zero_stage_given && t.framework != Framework::kFsdp;
  o.mbs = !t.micro_batch_size_given;
  o.recompute = !t.activation_recompute_given && t.activation_recompute != Recompute::kFull;
  o.zeros = o.zero ? ZeroStages(t, given.dp * given.cp, given.pp) : std::vector<int>{given.zero_stage};
  o.vpps = {given.vpp};
  if (o.vpp) {
    const std::vector<int> stages = StageLayers(spec.model.layers, given.pp, given.pipeline_layers);
    for (int v = 2; v <= std::min(kMaxVpp, MaxVirtualStages(stages)); ++v)
      if (EvenVirtualStages(stages, v)) o.vpps.push_back(v);
    // The combined 1F1B of moe_a2a_overlap runs only on the interleaved schedule.
    if (t.moe_a2a_overlap && o.vpps.size() > 1) o.vpps.erase(o.vpps.begin());
  }
  return o;
}

// "vpp, zero_stage and micro_batch_size"
std::string OpenNames(const OpenChoices& o) {
  std::vector<std::string> open;
  if (o.vpp) open.push_back("vpp");
  if (o.zero) open.push_back("zero_stage");
  if (o.mbs) open.push_back("micro_batch_size");
  if (o.recompute) open.push_back("activation_recompute");
  std::string names;
  for (size_t i = 0; i < open.size(); ++i)
    names += (i == 0 ? "" : i + 1 == open.size() ? " and " : ", ") + open[i];
  return names;
}

// The fastest fitting completion of `given`, the one needing the least memory, and how many fit.
struct Completion {
  std::optional<PlanEstimate> best, closest;
  int fitting = 0;
};
Completion Complete(const JobSpec& spec, const Plan& given, const Hardware& hw, const OpenChoices& o) {
  const TrainingSpec& t = spec.training;
  const int batch = t.global_batch_size, dp = given.dp;
  std::vector<JobSpec> specs{spec};  // selective (or as given), then full recompute and none
  if (o.recompute) {
    for (Recompute r : {Recompute::kFull, Recompute::kNone}) {
      specs.push_back(spec);
      specs.back().training.activation_recompute = r;
    }
  }
  const ModelCounts counts = ModelCountsOf(spec.model);
  Completion c;
  for (int vpp : o.vpps) {
    for (int mbs = o.mbs ? 1 : t.micro_batch_size; batch % (static_cast<long long>(mbs) * dp) == 0;
         mbs *= 2) {
      bool fitted = false;
      for (int zero : o.zeros)
        for (const JobSpec& s : specs) {
          Plan p = given;
          p.vpp = vpp;
          p.zero_stage = zero;
          p.micro_batch_size = mbs;
          p.micro_batches = batch / (mbs * dp);
          if (!ValidateLayout(s, p, hw).empty()) continue;
          PlanEstimate e = Estimate(s, p, hw, counts);
          if (!c.closest || e.memory.total < c.closest->memory.total) c.closest = e;
          if (!e.fits) continue;
          if (o.recompute && s.training.activation_recompute == Recompute::kFull)
            e = FewestRecomputed(s, p, hw, counts, std::move(e));
          fitted = true;
          ++c.fitting;
          if (!c.best || Faster(e, *c.best)) c.best = std::move(e);
        }
      // A larger micro-batch never needs less memory.
      if (!fitted || !o.mbs) break;
    }
  }
  return c;
}

}  // namespace

Result<PlanEstimate> planner_internal::CompleteLayout(const JobSpec& spec, const Plan& given,
                                                      const Hardware& hw) {
  const TrainingSpec& t = spec.training;
  const OpenChoices open = OpenChoicesOf(spec, given);
  // The layout with the defaults of what is open (the lowest ZeRO stage there is: 1 with FP8 parameters;
  // the fewest virtual stages): its validation is the request's, and its estimate is what the answer
  // compares the choice with.
  Plan written = given;
  written.zero_stage = open.zeros.front();
  written.vpp = open.vpps.front();
  Result<PlanEstimate> as_written = EvaluatePlan(spec, written, hw);
  if (!as_written.ok()) return as_written;
  Completion c = Complete(spec, given, hw, open);
  const std::string names = OpenNames(open);
  if (!c.best) {
    // Nothing fits: the choice needing the least memory, with the single changes that would fit.
    JobSpec s = spec;
    s.training.activation_recompute = c.closest ? c.closest->activation_recompute : t.activation_recompute;
    Result<PlanEstimate> e = EvaluatePlan(s, c.closest ? c.closest->plan : written, hw);
    if (e.ok())
      e->explanation =
          Format("No choice of %s fits this layout; the one needing the least memory: ", names.c_str()) +
          e->explanation;
    return e;
  }
  PlanEstimate& best = *c.best;
  best.explanation =
      ParameterNote(spec.model) + Candidate(best, t) + ": " + DescribeEstimate(best, hw) + ". " +
      Format(
          "The layout is as given; the request leaves %s open, and this is the fastest of the %d choices "
          "that fit. As written (%s%s%s%s recompute): %.1f GB per GPU (%s), %.0f TFLOP/s per GPU.",
          names.c_str(), c.fitting, open.vpp ? Format("vpp %d, ", written.vpp).c_str() : "",
          open.zero ? Format("ZeRO-%d, ", written.zero_stage).c_str() : "", open.mbs ? "micro-batch 1, " : "",
          ToString(t.activation_recompute), as_written->memory.total / 1e9,
          as_written->fits ? "fits" : "does not fit", as_written->tflops_per_gpu);
  return std::move(best);
}

Result<PlanEstimate> AutoPlan(const JobSpec& spec, const Hardware& hw) {
  std::vector<FieldError> errors = ValidateSpec(spec, hw);
  if (!errors.empty()) return InvalidContent("invalid job for planning", std::move(errors));
  Result<PlanEstimate> found = SearchLayouts(spec, hw);
  if (!found.ok() || found->fits) return found;
  // Nothing fits: the first question is how many GPUs would do. The smallest power-of-two multiple of the
  // count at which a layout fits (the same model, batch and options), with that layout.
  JobSpec more = spec;
  std::string answer;
  const long long gpus = spec.resources.gpus;
  for (int k = 2; k <= kMaxGpuMultiple && gpus * k <= kMaxGpusTried; k *= 2) {
    more.resources.gpus = static_cast<int>(gpus * k);
    Result<PlanEstimate> e = SearchLayouts(more, hw);
    if (!e.ok() || !e->fits) continue;
    found->fits_with_gpus = gpus * k;
    answer = Format(" With %d× the GPUs (%lld) a layout fits: %s: %s.", k, gpus * k,
                    Candidate(*e, spec.training).c_str(), DescribeEstimate(*e, hw).c_str());
    break;
  }
  if (answer.empty())
    answer = Format(" No layout fits on up to %lld GPUs (%d× tried, the same batch).",
                    std::min(gpus * kMaxGpuMultiple, kMaxGpusTried), kMaxGpuMultiple);
  found->explanation += answer;
  return found;
}

}  // namespace shepherd
