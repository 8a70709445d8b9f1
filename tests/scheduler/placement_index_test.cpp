// The Cluster's incremental indexes (kept up to date by every write, which never walks the inventory) against values
// recomputed from the nodes, and placement through them against placement on a cluster built from scratch
// in the same state, and the what-if options (release_job, out_of_service) against an explicit copy.
// Inventories are generated from fixed seeds: mixed 4- and 8-GPU nodes, shared NVLink domains, missing
// leaf labels, spares, cordoned and failed nodes, jobs placed and released, nodes moved and removed.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <random>
#include <set>

#include "scheduler/cluster.h"
#include "scheduler/placement.h"

namespace shepherd {
namespace {

Node GenNode(std::mt19937& rng, int i) {
  Node n;
  n.id = "n" + std::to_string(1000 + i);
  n.hostname = n.id;
  const bool pair = rng() % 3 == 0;  // two 4-GPU nodes share one NVLink domain
  n.gpus = pair ? 4 : 8;
  n.nvlink_domain = pair ? "d" + std::to_string(i / 2) : "";
  n.gpu_memory_gib = rng() % 4 == 0 ? 40 : 80;
  n.topology = {{"spine", "s" + std::to_string(rng() % 3)}};
  if (rng() % 10 != 0) n.topology["leaf"] = "l" + std::to_string(rng() % 4);  // else alone at leaf level
  n.spare = rng() % 8 == 0;
  n.schedulable = rng() % 10 != 0;
  n.failed = rng() % 20 == 0;
  return n;
}

// A cluster built from scratch with c's nodes and allocations (the reference for the indexes).
Cluster Rebuilt(const Cluster& c, const std::map<std::string, Placement>& held) {
  Cluster fresh(c.levels());
  for (const Node* n : c.nodes()) EXPECT_TRUE(fresh.UpsertNode(*n).ok());
  for (const auto& [job, p] : held) EXPECT_TRUE(fresh.Allocate(job, p).ok());
  return fresh;
}

// The free histograms and child lists (Place's capacity) against a pass over every domain.
void ExpectFreeTreeMatchesDomains(const Cluster& c) {
  const int levels = static_cast<int>(c.levels().size());
  std::vector<std::map<int, Cluster::FreeHistogram>> hist(levels);
  std::vector<std::map<int, std::set<int>>> children(levels);
  Cluster::FreeHistogram all, usable;
  std::set<int> roots;
  for (int d = 0; d < c.domain_count(); ++d) {
    if (c.domain_usable_gpus(d) > 0) ++usable[c.domain_usable_gpus(d)];
    if (c.domain_leaf(d) < 0 || c.domain_free_gpus(d) == 0) continue;
    ++all[c.domain_free_gpus(d)];
    int child = d;
    for (int k = levels - 1, g = c.domain_leaf(d); k >= 0;
         child = g, g = k > 0 ? c.parent_group(k, g) : -1, --k) {
      ++hist[k][g][c.domain_free_gpus(d)];
      children[k][g].insert(child);
    }
    roots.insert(child);
  }
  EXPECT_EQ(c.free_domains(), all);
  EXPECT_EQ(c.usable_domains(), usable);
  EXPECT_EQ(c.free_roots(), roots);
  for (int k = 0; k < levels; ++k) {
    for (int g = 0; g < c.group_count(k); ++g) {
      EXPECT_EQ(c.group_free_domains(k, g), hist[k][g]) << "level " << k << " group " << g;
      EXPECT_EQ(c.free_children(k, g), children[k][g]) << "level " << k << " group " << g;
    }
  }
}

void ExpectIndexesMatchNodes(const Cluster& c) {
  std::map<std::string, std::pair<int64_t, int64_t>> by_domain;  // domain -> usable GPUs, free of them
  std::optional<double> min_memory;
  for (const Node* n : c.nodes()) {
    if (!IsUsable(*n)) continue;
    auto& d = by_domain[n->nvlink_domain.empty() ? n->id : n->nvlink_domain];
    d.first += n->gpus;
    d.second += std::popcount(c.FreeGpuMask(n->id));
    min_memory = std::min(min_memory.value_or(n->gpu_memory_gib), n->gpu_memory_gib);
  }
  int64_t max_domain = 0;
  for (const auto& [name, d] : by_domain) max_domain = std::max(max_domain, d.first);
  EXPECT_EQ(c.MinUsableGpuMemory(), min_memory);
  EXPECT_EQ(c.MaxUsableDomainGpus(), max_domain);
  size_t ready = 0, indexed = 0;  // no stale entries in the ready index
  for (const Node* n : c.nodes()) ready += n->schedulable && !n->failed && c.FreeGpuMask(n->id) != 0;
  for (bool spare : {false, true})
    for (const auto& [f, ids] : c.ready_nodes(spare, c.levels().size(), 0)) indexed += ids.size();
  EXPECT_EQ(indexed, ready);
  ExpectFreeTreeMatchesDomains(c);
  for (int i = 0; i < c.size(); ++i) {
    const Node& n = c.node(i);
    const int d = c.domain(i);
    const auto it = by_domain.find(n.nvlink_domain.empty() ? n.id : n.nvlink_domain);
    EXPECT_EQ(c.domain_usable_gpus(d), it == by_domain.end() ? 0 : it->second.first) << n.id;
    EXPECT_EQ(c.domain_free_gpus(d), it == by_domain.end() ? 0 : it->second.second) << n.id;
    const auto& m = c.domain_members(d);
    EXPECT_TRUE(std::is_sorted(m.begin(), m.end()));
    EXPECT_EQ(std::count(m.begin(), m.end(), i), 1) << n.id;
    for (int k = 1; k < static_cast<int>(c.levels().size()); ++k)
      EXPECT_EQ(c.parent_group(k, c.group(i, k)), c.group(i, k - 1)) << n.id;
    const int free = std::popcount(c.free_mask(i));
    const bool ready = n.schedulable && !n.failed && free > 0;
    for (int k = 0; k <= static_cast<int>(c.levels().size()); ++k) {
      const auto& by_free =
          c.ready_nodes(n.spare, k, k < static_cast<int>(c.levels().size()) ? c.group(i, k) : 0);
      size_t listed_here = 0;
      for (const auto& [f, ids] : by_free) listed_here += ids.count(n.id) * (f == free ? 1 : 1000);
      EXPECT_EQ(listed_here, ready ? 1u : 0u) << n.id << " level " << k;
    }
    int leaf = -1;  // what Place derived by walking the nodes before the index
    for (int j = 0; j < c.size() && leaf < 0; ++j)
      if (c.domain(j) == d && IsUsable(c.node(j))) leaf = c.group(j, c.levels().size() - 1);
    EXPECT_EQ(c.domain_leaf(d), leaf) << n.id;
  }
}

const Plan kPlans[] = {{.tp = 8, .pp = 2, .dp = 3}, {.tp = 4, .pp = 1, .dp = 5}, {.tp = 2, .pp = 3, .dp = 2},
                       {.tp = 8, .pp = 1, .dp = 1}, {.tp = 4, .pp = 2, .dp = 8}, {.tp = 1, .pp = 1, .dp = 7}};

void ExpectSamePlacement(const Result<Placement>& a, const Result<Placement>& b, const std::string& what) {
  ASSERT_EQ(a.ok(), b.ok()) << what << ": " << a.status().message() << " / " << b.status().message();
  if (!a.ok()) {
    EXPECT_EQ(a.status().code(), b.status().code()) << what;
    return;
  }
  EXPECT_TRUE(a->ranks == b->ranks) << what;
}

// Churn: jobs placed and released, nodes re-registered with other flags; with `relabel`, also with other
// labels and domains, and removed. Indexes must match the nodes either way. Placement must match a cluster
// built from scratch in the same state where interning order is the same (no relabel): group and domain
// ids break ties, and a relabelled cluster interns in another order than a fresh one.
void Churn(unsigned seed, bool relabel) {
  std::mt19937 rng(seed);
  Cluster c;
  int next = 0;
  for (; next < 120; ++next) ASSERT_TRUE(c.UpsertNode(GenNode(rng, next)).ok());
  std::map<std::string, Placement> held;
  for (int round = 0; round < 40; ++round) {
    const Plan& plan = kPlans[rng() % std::size(kPlans)];
    Result<Placement> p = Place(c, plan);
    const std::string job = "j" + std::to_string(round);
    if (p.ok() && c.Allocate(job, *p).ok()) held[job] = *p;
    if (!held.empty() && rng() % 3 == 0) {  // release one
      auto it = std::next(held.begin(), rng() % held.size());
      ASSERT_TRUE(c.Release(it->first).ok());
      held.erase(it);
    }
    const Node* n = c.nodes()[rng() % c.size()];
    if (!c.JobsOn(n->id).empty()) continue;
    Node m = GenNode(rng, next++);
    if (relabel && rng() % 4 == 0) {
      ASSERT_TRUE(c.RemoveNode(n->id).ok());
      ASSERT_TRUE(c.UpsertNode(m).ok());
      continue;
    }
    if (!relabel) m.topology = n->topology, m.nvlink_domain = n->nvlink_domain, m.gpus = n->gpus;
    m.id = m.hostname = n->id;
    ASSERT_TRUE(c.UpsertNode(m).ok());
  }
  ExpectIndexesMatchNodes(c);
  if (relabel) return;
  const Cluster fresh = Rebuilt(c, held);
  for (const Plan& plan : kPlans) {
    PlaceOptions o;
    o.exclude_nodes = {c.nodes()[0]->id, c.nodes()[5]->id};
    ExpectSamePlacement(Place(c, plan, o), Place(fresh, plan, o), "plan tp " + std::to_string(plan.tp));
  }
}

TEST(PlacementIndexTest, IndexesFollowAllocationsAndFlagsAndPlaceAsAFreshCluster) {
  for (unsigned seed : {1u, 7u, 42u, 2024u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Churn(seed, false);
  }
}

TEST(PlacementIndexTest, IndexesFollowRelabelledAndRemovedNodes) {
  for (unsigned seed : {1u, 7u, 42u, 2024u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Churn(seed, true);
  }
}

// release_job and out_of_service give what an explicit copy with the job released and the nodes cordoned
// or failed gives (recovery's what-if, which no longer copies the cluster).
TEST(PlacementIndexTest, WhatIfOptionsMatchAnExplicitCopy) {
  for (unsigned seed : {3u, 11u, 99u}) {
    std::mt19937 rng(seed);
    Cluster c;
    for (int i = 0; i < 80; ++i) ASSERT_TRUE(c.UpsertNode(GenNode(rng, i)).ok());
    std::vector<std::pair<std::string, Placement>> jobs;
    for (int j = 0; j < 12; ++j) {
      Result<Placement> p = Place(c, kPlans[j % std::size(kPlans)]);
      if (p.ok() && c.Allocate("j" + std::to_string(j), *p).ok())
        jobs.emplace_back("j" + std::to_string(j), *p);
    }
    ASSERT_GE(jobs.size(), 3u);
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const auto& [job, placement] : jobs) {
      const std::string faulty = placement.ranks.front().node;
      Cluster what_if = c;
      ASSERT_TRUE(what_if.Release(job).ok());
      Node cordoned = *what_if.Find(faulty);
      cordoned.schedulable = false;
      ASSERT_TRUE(what_if.UpsertNode(cordoned).ok());
      for (const Plan& plan : kPlans) {
        PlaceOptions o;
        o.exclude_nodes = {faulty};
        o.release_job = job;
        o.out_of_service = {faulty};
        PlaceOptions copy_o;
        copy_o.exclude_nodes = {faulty};
        ExpectSamePlacement(Place(c, plan, o), Place(what_if, plan, copy_o), job + " place");
      }
      ReplaceOptions r{
          .use_spares = true, .replace_without_spare = true, .exclude_nodes = {}, .release_job = job};
      ReplaceOptions copy_r{.use_spares = true, .replace_without_spare = true, .exclude_nodes = {}};
      Result<Replacement> a = ReplaceNode(c, placement, faulty, r);
      Result<Replacement> b = ReplaceNode(what_if, placement, faulty, copy_r);
      ASSERT_EQ(a.ok(), b.ok()) << job;
      if (a.ok()) {
        EXPECT_EQ(a->spare, b->spare) << job;
        EXPECT_TRUE(a->placement.ranks == b->placement.ranks) << job;
      }
    }
  }
}

// The replacement ReplaceNode must choose, by a scan of every node (its contract in placement.h): the
// smallest (locality, id) among the nodes of the pass with enough GPUs free for the replacement.
std::string ExpectedReplacement(const Cluster& c, const Placement& p, const std::string& failed,
                                const ReplaceOptions& o) {
  std::map<std::string, uint64_t> used, released;
  int need = 0;
  for (const RankSlot& r : p.ranks) {
    used[r.node] |= uint64_t{1} << r.gpu;
    need += r.node == failed;
  }
  bool spans = false;
  for (const RankSlot& r : p.ranks)
    for (const RankSlot& q : p.ranks)
      spans |= r.node == failed && q.node != failed && r.pp == q.pp && r.cp == q.cp && r.dp == q.dp;
  for (const auto& [i, mask] : c.HeldBy(o.release_job)) released[c.node(i).id] = mask;
  const int fi = c.IndexOf(failed), levels = static_cast<int>(c.levels().size());
  auto pass = [&](bool spare) {
    std::pair<int, std::string> best{levels + 2, ""};
    for (int i = 0; i < c.size(); ++i) {
      const Node& n = c.node(i);
      if (i == fi || n.spare != spare || !n.schedulable || n.failed || o.exclude_nodes.count(n.id)) continue;
      if (spans && c.domain(i) != c.domain(fi)) continue;
      if (std::popcount((c.free_mask(i) | released[n.id]) & ~used[n.id]) < need) continue;
      int score = levels + 1;
      for (int k = 0; k < levels; ++k)
        if (c.group(i, k) == c.group(fi, k)) score = levels - k;
      if (c.domain(i) == c.domain(fi)) score = 0;
      best = std::min(best, {score, n.id});
    }
    return best.second;
  };
  std::string chosen = o.use_spares ? pass(true) : "";
  if (chosen.empty() && o.replace_without_spare) chosen = pass(false);
  return chosen;
}

// ReplaceNode through the ready index against the scan above, for every node of every job on churned
// clusters, with and without spares, the fallback, an excluded node and the job's own GPUs released.
TEST(PlacementIndexTest, ReplaceNodeMatchesAScanOfEveryNode) {
  int replaced = 0, refused = 0;
  for (unsigned seed : {5u, 17u, 123u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    Cluster c;
    for (int i = 0; i < 150; ++i) ASSERT_TRUE(c.UpsertNode(GenNode(rng, i)).ok());
    std::vector<std::pair<std::string, Placement>> jobs;
    for (int j = 0; j < 30; ++j) {
      Result<Placement> p = Place(c, kPlans[j % std::size(kPlans)]);
      if (p.ok() && c.Allocate("j" + std::to_string(j), *p).ok())
        jobs.emplace_back("j" + std::to_string(j), *p);
      if (j % 4 == 3) {  // release one still held
        auto& [gone, gone_placement] = jobs[rng() % jobs.size()];
        if (c.Holds(gone)) {
          ASSERT_TRUE(c.Release(gone).ok());
        }
      }
    }
    for (const auto& [job, placement] : jobs) {
      if (!c.Holds(job)) continue;
      std::set<std::string> nodes;
      for (const RankSlot& r : placement.ranks) nodes.insert(r.node);
      for (const std::string& failed : nodes) {
        for (int variant = 0; variant < 8; ++variant) {
          ReplaceOptions o{.use_spares = (variant & 1) != 0, .replace_without_spare = (variant & 2) != 0};
          if (variant & 4) o.release_job = job;
          if (variant == 7) o.exclude_nodes = {c.node(static_cast<int>(rng() % c.size())).id};
          const std::string want = ExpectedReplacement(c, placement, failed, o);
          Result<Replacement> got = ReplaceNode(c, placement, failed, o);
          ASSERT_EQ(got.ok(), !want.empty()) << job << " " << failed << " variant " << variant;
          if (got.ok()) {
            EXPECT_EQ(got->spare, want) << job << " " << failed << " variant " << variant;
          }
          ++(got.ok() ? replaced : refused);
        }
      }
    }
  }
  EXPECT_GT(replaced, 50);  // both outcomes are exercised
  EXPECT_GT(refused, 10);
}

}  // namespace
}  // namespace shepherd
