// Cluster: each domain's leaf and its entries in the free histograms (cluster.h).
#include "scheduler/cluster.h"

namespace shepherd {
namespace {

void Bump(Cluster::FreeHistogram& h, int64_t key, int by) {
  auto it = h.try_emplace(key, 0).first;
  if ((it->second += by) == 0) h.erase(it);
}

}  // namespace

void Cluster::CountFree(int d, int sign) {
  Domain& dom = domains_[d];
  if (dom.counted_free == 0) return;
  const int finest = static_cast<int>(levels_.size()) - 1;
  Bump(free_domains_, dom.counted_free, sign);
  for (int k = finest; k >= 0; --k) {
    TreeGroup& g = tree_[k][dom.counted_chain[k]];
    const bool was_empty = g.free.empty();
    Bump(g.free, dom.counted_free, sign);
    if (k == finest) {  // the leaf lists the domain itself
      if (sign > 0)
        g.children.insert(d);
      else
        g.children.erase(d);
    }
    if (was_empty == g.free.empty()) continue;  // still listed (or not) in its parent
    std::set<int>& listed = k > 0 ? tree_[k - 1][dom.counted_chain[k - 1]].children : free_roots_;
    if (sign > 0)
      listed.insert(dom.counted_chain[k]);
    else
      listed.erase(dom.counted_chain[k]);
  }
}

void Cluster::RefreshDomain(int d) {
  Domain& dom = domains_[d];
  dom.leaf = -1;
  for (int i : dom.members) {
    if (IsUsable(nodes_[i].node)) {
      dom.leaf = nodes_[i].groups.back();
      break;
    }
  }
  std::vector<int> chain;
  if (dom.leaf >= 0 && dom.free_gpus > 0) {
    chain.assign(levels_.size(), dom.leaf);
    for (size_t k = levels_.size() - 1; k > 0; --k) chain[k - 1] = parents_[k][chain[k]];
  }
  const int64_t free = chain.empty() ? 0 : dom.free_gpus;
  if (free == dom.counted_free && chain == dom.counted_chain) return;
  CountFree(d, -1);
  dom.counted_free = free;
  dom.counted_chain = std::move(chain);
  CountFree(d, +1);
}

}  // namespace shepherd
