#include "slurm/topology.h"

#include <charconv>

#include "slurm/scontrol_fields.h"
#include "slurm/hostlist.h"

namespace shepherd::slurm {

Result<std::vector<SlurmSwitch>> ParseTopology(std::string_view scontrol_output) {
  std::vector<SlurmSwitch> out;
  for (const Fields& f : SplitRecords(scontrol_output, "SwitchName")) {
    SlurmSwitch s;
    s.name = *FindField(f, "SwitchName");
    if (const std::string* v = FindField(f, "Level")) {
      auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), s.level);
      if (ec != std::errc() || p != v->data() + v->size() || s.level < 0)
        return InvalidArgument("slurm switch " + s.name + ": bad Level '" + *v + "'");
    }
    for (auto [key, target] : {std::pair{"Nodes", &s.nodes}, std::pair{"Switches", &s.switches}}) {
      const std::string* v = FindField(f, key);
      if (!v || *v == "(null)") continue;
      auto hosts = ExpandHostlist(*v);
      if (!hosts.ok()) return InvalidArgument("slurm switch " + s.name + ": " + hosts.status().message());
      *target = std::move(*hosts);
    }
    out.push_back(std::move(s));
  }
  return out;
}

TopologyLevels DefaultLevelNames(int depth) {
  if (depth <= 1) return {"leaf"};
  if (depth == 2) return {"spine", "leaf"};
  if (depth == 3) return {"core", "spine", "leaf"};
  TopologyLevels names;
  for (int l = depth - 1; l >= 0; --l) names.push_back("level" + std::to_string(l));
  return names;
}

Result<TopologyMapping> MapTopology(const std::vector<SlurmSwitch>& switches, const TopologyLevels& levels) {
  int depth = 0;
  for (const SlurmSwitch& s : switches) depth = std::max(depth, s.level + 1);
  TopologyMapping m;
  m.levels = levels.empty() ? DefaultLevelNames(depth) : levels;
  if (switches.empty()) return m;
  const int names = static_cast<int>(m.levels.size());
  if (names != depth)
    m.note = "slurm topology has " + std::to_string(depth) + " switch levels and " + std::to_string(names) +
             " topology_levels are configured: " +
             (names < depth ? (depth - names == 1 ? std::string("the top switch level is left out")
                                                  : "the " + std::to_string(depth - names) +
                                                        " coarsest switch levels are left out")
                            : "the top switch stands for the names above it") +
             " (name all " + std::to_string(depth) + " in topology_levels to use every level)";
  std::map<std::string, const SlurmSwitch*> by_name;
  std::map<std::string, std::string> parent;
  for (const SlurmSwitch& s : switches) by_name[s.name] = &s;
  for (const SlurmSwitch& s : switches)
    for (const std::string& child : s.switches) parent.emplace(child, s.name);
  std::map<std::string, const SlurmSwitch*> home;  // node → lowest-level switch listing it
  for (const SlurmSwitch& s : switches)
    for (const std::string& n : s.nodes) {
      auto [it, fresh] = home.emplace(n, &s);
      if (!fresh && s.level < it->second->level) it->second = &s;
    }
  for (const auto& [node, sw] : home) {
    std::vector<std::string> labels(depth);
    const SlurmSwitch* s = sw;
    for (int guard = 0; s && guard <= depth; ++guard) {  // guard: a cycle in a broken config
      labels[depth - 1 - s->level] = s->name;
      auto p = parent.find(s->name);
      s = p == parent.end() ? nullptr : by_name[p->second];
    }
    for (int i = depth - 2; i >= 0; --i)
      if (labels[i].empty()) labels[i] = labels[i + 1];
    // Configured level i (coarse to fine) is tree level depth − names + i, counted from the top; names
    // above the tree's top take the top's label.
    auto& out = m.labels[node];
    for (int i = 0; i < names; ++i) {
      const std::string& label = labels[std::max(0, depth - names + i)];
      if (!label.empty()) out[m.levels[i]] = label;
    }
  }
  return m;
}

}  // namespace shepherd::slurm
