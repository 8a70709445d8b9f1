#include "health/hang_watchdog.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

namespace shepherd {
namespace {

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

// The world group has every rank as a member: its waits are found from the ranks sorted by the last world
// seq they entered (most behind first), at most kMaxWorldWaits of them per waiter, so a world-collective
// hang of a large job costs O(n log n), not O(n²). The most lagging ranks are the chains' likely ends.
constexpr size_t kMaxWorldWaits = 256;

// What the analysis reads, and the group of a rank's current collective.
struct Graph {
  const RankLayout& layout;
  const std::vector<RankState>& ranks;
  const NamedGroups& named;
  const std::vector<bool>& alive;
  std::vector<std::pair<int64_t, int>> world_by_entered;  // (entered_seq[world], rank), ascending

  // A group whose members are known: an axis, world, or a named group the ranks sent members for.
  static bool Known(const RankState& s) { return s.collective_group != GroupKind::kOther || s.named_group; }
  std::string GroupName(const RankState& s) const {
    return s.named_group ? named.Name(s.named_group) : ToString(s.collective_group);
  }
  std::string CollectiveName(const RankState& s) const {
    return GroupName(s) + "#" + std::to_string(s.collective_seq);
  }
  // REQUIRES: Known(ranks[r]).
  std::vector<int> Members(int r) const {
    const RankState& s = ranks[r];
    return s.named_group ? named.Members(s.named_group) : layout.GroupMembers(r, s.collective_group);
  }
  // The highest seq of s's current group that m entered.
  int64_t Entered(int m, const RankState& s) const {
    return s.named_group ? named.EnteredSeq(s.named_group, m)
                         : ranks[m].entered_seq[static_cast<int>(s.collective_group)];
  }
  bool SameCollective(const RankState& p, const RankState& s) const {
    return p.has(RankState::kInCollective) && p.collective_group == s.collective_group &&
           p.named_group == s.named_group && p.collective_seq == s.collective_seq;
  }

  // Out-edges of r in the wait-for graph (see header). Ends of chains have none.
  void WaitsFor(int r, std::vector<int>* out) const {
    out->clear();
    const RankState& s = ranks[r];
    if (!alive[r] || !s.has(RankState::kInCollective) || !Known(s)) return;
    if (s.collective_group == GroupKind::kWorld) {
      for (const auto& [entered, m] : world_by_entered) {
        if (entered >= s.collective_seq || out->size() >= kMaxWorldWaits) break;
        if (m != r) out->push_back(m);
      }
      return;
    }
    for (int m : Members(r))
      if (m != r && Entered(m, s) < s.collective_seq) out->push_back(m);
  }
};

// Every live member inside the group's op receives (or every one sends): nothing is in flight between
// them, so no link is at fault. nullopt when a member is in a collective, or both sides are there (a
// transfer that does not complete: a communication fault).
std::optional<RankState::P2p> OneSidedP2p(const Graph& g, const std::vector<int>& members) {
  std::optional<RankState::P2p> side;
  for (int m : members) {
    if (!g.alive[m]) continue;
    const RankState::P2p p = g.ranks[m].p2p;
    if (p == RankState::P2p::kNone || (side && *side != p)) return std::nullopt;
    side = p;
  }
  return side;
}

// Receivers facing receivers (a stage skipped or reordered its send) or senders facing senders: the job's
// code deadlocked. Each is a culprit, heartbeating: nothing against its node.
void AddP2pDeadlock(const Graph& g, const std::vector<int>& members, RankState::P2p side, HangAnalysis* a) {
  const char* verb = side == RankState::P2p::kRecv ? "receives" : "sends";
  for (int m : members) {
    if (!g.alive[m]) continue;
    a->culprits.push_back(
        {m, std::string(side == RankState::P2p::kRecv ? "inside recv " : "inside send ") +
                g.CollectiveName(g.ranks[m]) + " while every peer in it " + verb +
                " too: no transfer is in flight, a point-to-point deadlock in the job's code"});
  }
}

}  // namespace

std::vector<int> HangAnalysis::SuspectRanks() const {
  std::vector<int> out;
  for (const auto& c : culprits) out.push_back(c.rank);
  if (out.empty())
    for (const auto& f : comm_faults) out.insert(out.end(), f.members.begin(), f.members.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

HangAnalysis AnalyzeHang(const RankLayout& layout, const std::vector<RankState>& ranks,
                         const NamedGroups& named, double silent_after_s, const std::vector<bool>& alive,
                         double hang_timeout_s, Time now) {
  HangAnalysis a;
  Graph graph{layout, ranks, named, alive, {}};
  const int n = static_cast<int>(ranks.size());
  std::vector<int> roots;
  for (int r = 0; r < n; ++r) {
    const RankState& s = ranks[r];
    if (!s.has(RankState::kInCollective)) continue;
    double open_s = ToSeconds(now - s.collective_since);
    if (open_s <= hang_timeout_s) continue;
    roots.push_back(r);
    if (open_s > a.oldest_open_s) {
      a.oldest_open_s = open_s;
      a.oldest_rank = r;
      a.oldest_group = graph.GroupName(s);
      a.oldest_seq = s.collective_seq;
    }
  }
  a.waiting_past_timeout = static_cast<int>(roots.size());
  if (roots.empty()) return a;
  a.hung = true;
  if (std::any_of(ranks.begin(), ranks.end(), [](const RankState& s) {
        return s.has(RankState::kInCollective) && s.collective_group == GroupKind::kWorld;
      })) {
    const int w = static_cast<int>(GroupKind::kWorld);
    graph.world_by_entered.reserve(n);
    for (int r = 0; r < n; ++r) graph.world_by_entered.emplace_back(ranks[r].entered_seq[w], r);
    std::sort(graph.world_by_entered.begin(), graph.world_by_entered.end());
  }
  std::map<int64_t, bool> world_sinks;  // world seqs judged once: whether the peers wait for its waiters
  std::vector<bool> is_root(n, false);
  for (int r : roots) is_root[r] = true;

  // Iterative Tarjan over the part of the graph reachable from the roots; sink SCCs are chain ends.
  std::vector<int> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<int> stack;
  std::vector<bool> on_stack(n, false);
  struct Frame {
    int rank;
    std::vector<int> edges;
    size_t next = 0;
  };
  std::vector<Frame> dfs;
  std::vector<std::vector<int>> comps;
  std::vector<bool> comp_is_sink;
  int counter = 0;
  std::vector<int> scratch;
  auto push = [&](int r) {
    index[r] = low[r] = counter++;
    stack.push_back(r);
    on_stack[r] = true;
    graph.WaitsFor(r, &scratch);
    dfs.push_back({r, scratch, 0});
  };
  for (int root : roots) {
    if (index[root] != -1) continue;
    push(root);
    while (!dfs.empty()) {
      Frame& f = dfs.back();
      if (f.next < f.edges.size()) {
        int m = f.edges[f.next++];
        if (index[m] == -1) {
          push(m);
        } else if (on_stack[m]) {
          low[f.rank] = std::min(low[f.rank], index[m]);
        }
        continue;
      }
      int r = f.rank;
      dfs.pop_back();
      if (!dfs.empty()) low[dfs.back().rank] = std::min(low[dfs.back().rank], low[r]);
      if (low[r] != index[r]) continue;
      std::vector<int> members;
      int m;
      do {
        m = stack.back();
        stack.pop_back();
        on_stack[m] = false;
        comp[m] = static_cast<int>(comps.size());
        members.push_back(m);
      } while (m != r);
      // Tarjan emits a component only after all components it reaches, so their ids are known here.
      bool sink = true;
      for (int x : members) {
        graph.WaitsFor(x, &scratch);
        for (int y : scratch)
          if (comp[y] != comp[x]) sink = false;
      }
      comps.push_back(std::move(members));
      comp_is_sink.push_back(sink);
    }
  }

  for (size_t c = 0; c < comps.size(); ++c) {
    if (!comp_is_sink[c]) continue;
    std::vector<int>& members = comps[c];
    std::sort(members.begin(), members.end());
    if (members.size() > 1) {
      for (int r : members)
        a.culprits.push_back({r, "waits in a cycle of collectives (order mismatch): inside " +
                                     graph.CollectiveName(ranks[r])});
      continue;
    }
    int r = members[0];
    const RankState& s = ranks[r];
    if (!s.ever_seen()) {
      a.culprits.push_back({r, "has never reported", true});
    } else if (s.has(RankState::kFinished)) {
      a.culprits.push_back(
          {r, "reported finished (step " + std::to_string(s.step) + ") while peers wait for it"});
    } else if (!alive[r]) {
      a.culprits.push_back({r, "no heartbeat for " + Fmt(ToSeconds(now - s.last_seen)) + " s", true});
    } else if (!s.has(RankState::kInCollective)) {
      a.culprits.push_back(
          {r, "heartbeating but inside no collective (step " + std::to_string(s.step) + ")"});
    } else if (!Graph::Known(s)) {
      a.culprits.push_back({r, "inside a collective of a group whose membership is unknown (seq " +
                                   std::to_string(s.collective_seq) + "); its chain cannot be followed"});
    } else {
      // Every member of a world collective is in the same group, and what its members say (silent ones,
      // completed ones) is the same for each waiter: judged once per seq; later waiters only take their
      // own part (stuck in a collective the peers completed).
      if (s.collective_group == GroupKind::kWorld) {
        auto [it, first] = world_sinks.try_emplace(s.collective_seq);
        if (!first) {
          if (it->second)
            a.culprits.push_back({r, "inside " + graph.CollectiveName(s) +
                                         ", which its peers completed, while they wait for it"});
          continue;
        }
      }
      std::vector<int> members = graph.Members(r);
      bool any_silent = false;
      for (int m : members) {
        double silent_s = ToSeconds(now - ranks[m].last_seen);
        if (!ranks[m].ever_seen() || silent_s <= silent_after_s) continue;
        any_silent = true;
        if (ranks[m].has(RankState::kFinished)) {
          a.culprits.push_back({m, "reported finished (step " + std::to_string(ranks[m].step) + ") while " +
                                       graph.CollectiveName(s) + " waits for it"});
          continue;
        }
        a.culprits.push_back({m,
                              "inside " + graph.CollectiveName(s) + " but silent for " + Fmt(silent_s) +
                                  " s while its peers report: the process or its host stopped",
                              true});
      }
      if (any_silent) continue;
      // Members that entered (G, s) and have left it: the collective completed for them. Then r's report
      // predates its own completion (judged again next time), unless those members now wait for r past
      // the timeout: r is stuck in a collective its peers completed.
      // A communication fault also needs the last member to enter to have been inside past the timeout:
      // a long-open collective whose last member just arrived is completing, not stuck.
      bool completed_elsewhere = false, peers_wait = false, all_past_timeout = true;
      for (int m : members) {
        const RankState& p = ranks[m];
        if (!alive[m]) continue;
        if (graph.SameCollective(p, s)) {
          all_past_timeout = all_past_timeout && ToSeconds(now - p.collective_since) > hang_timeout_s;
          continue;
        }
        completed_elsewhere = true;
        peers_wait = peers_wait || is_root[m];
      }
      if (s.collective_group == GroupKind::kWorld) world_sinks[s.collective_seq] = peers_wait;
      if (peers_wait) {
        a.culprits.push_back(
            {r, "inside " + graph.CollectiveName(s) + ", which its peers completed, while they wait for it"});
      } else if (!completed_elsewhere && all_past_timeout) {
        if (std::optional<RankState::P2p> side = OneSidedP2p(graph, members))
          AddP2pDeadlock(graph, members, *side, &a);
        else
          a.comm_faults.push_back({graph.GroupName(s), s.collective_seq, std::move(members)});
      }
    }
  }
  if (a.culprits.empty() && a.comm_faults.empty()) {
    a.hung = false;  // only collectives that are completing
    return a;
  }
  // Every member of a stuck group is its own chain end, so a silent member may be named more than once.
  std::sort(a.culprits.begin(), a.culprits.end(), [](auto& x, auto& y) { return x.rank < y.rank; });
  a.culprits.erase(
      std::unique(a.culprits.begin(), a.culprits.end(), [](auto& x, auto& y) { return x.rank == y.rank; }),
      a.culprits.end());
  // Two ranks of one stuck group yield the same fault: keep one per (group, seq, members).
  std::sort(a.comm_faults.begin(), a.comm_faults.end(),
            [](auto& x, auto& y) { return std::tie(x.members, x.seq) < std::tie(y.members, y.seq); });
  a.comm_faults.erase(std::unique(a.comm_faults.begin(), a.comm_faults.end(),
                                  [](auto& x, auto& y) { return x.members == y.members && x.seq == y.seq; }),
                      a.comm_faults.end());

  std::string d = "collective " + a.oldest_group + "#" + std::to_string(a.oldest_seq) + " open " +
                  Fmt(a.oldest_open_s) + " s (rank " + std::to_string(a.oldest_rank) + "; " +
                  std::to_string(a.waiting_past_timeout) + " rank(s) waiting past the " +
                  Fmt(hang_timeout_s) + " s hang timeout)";
  if (!a.culprits.empty()) {
    d += "; wait chains end at ";
    for (size_t i = 0; i < a.culprits.size() && i < 8; ++i)
      d += (i ? ", rank " : "rank ") + std::to_string(a.culprits[i].rank) + " (" + a.culprits[i].reason + ")";
    if (a.culprits.size() > 8) d += " and " + std::to_string(a.culprits.size() - 8) + " more";
  }
  for (size_t i = 0; i < a.comm_faults.size() && i < 4; ++i) {
    const CommFault& f = a.comm_faults[i];
    d += "; every member of " + f.group + " group {";
    for (size_t k = 0; k < f.members.size() && k < 16; ++k)
      d += (k ? "," : "") + std::to_string(f.members[k]);
    if (f.members.size() > 16) d += ",...";
    d += "} entered " + f.group + "#" + std::to_string(f.seq) +
         ": communication fault suspected on their nodes";
  }
  a.detail = std::move(d);
  return a;
}

}  // namespace shepherd
