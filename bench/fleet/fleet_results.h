// What the fleet simulator reports of its injected faults (bench/fleet/fleet_sim.cpp): the findings each
// fault should produce, and per injection when the daemon found it, on which node, and how its ranks were
// reassigned. Pure functions of the model's records; the simulator's single thread calls them.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/fleet/fleet_model.h"

namespace fleet {

// The finding kinds that attribute fault `k` correctly.
inline std::vector<std::string> Expected(FaultKind k) {
  switch (k) {
    case FaultKind::kGpuXid: case FaultKind::kHbm: case FaultKind::kSram: case FaultKind::kGsp: return {"gpu_fault", "process_exit"};
    case FaultKind::kNcclWatchdog: case FaultKind::kSoftwareBug: return {"process_exit"};
    case FaultKind::kNetworkHang: case FaultKind::kNic: return {"hang"};
    case FaultKind::kSdc: return {"sdc_suspected", "sdc_confirmed"};
    case FaultKind::kSilentRank: return {"heartbeat_lost", "hang"};
    case FaultKind::kNodeLoss: case FaultKind::kHostMaintenance: return {"node_lost"};
  }
  return {};
}

// {n, p50, p99, max} of `v`, or null when empty.
inline nlohmann::json Pct(std::vector<double> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[std::min(v.size() - 1, size_t(std::ceil(p * v.size())) - 1)]; };
  return {{"n", v.size()}, {"p50", q(0.5)}, {"p99", q(0.99)}, {"max", v.back()}};
}

// The report's injection fields: each injection, how many were found, attributed and replaced (on the same
// leaf), and the detection and reassignment times, overall and by kind.
inline nlohmann::json InjectionResults(const std::vector<Injection>& injections) {
  using nlohmann::json;
  json inj = json::array();
  std::map<std::string, std::vector<double>> detect, reassign;
  std::vector<double> all_detect, all_reassign;
  int attributed = 0, found = 0, leaf = 0, replaced = 0;
  for (const Injection& in : injections) {
    json e = {{"kind", in.name}, {"job", in.job}, {"node", in.node}, {"at", in.at}};
    if (in.found_at > 0) {
      ++found;
      e["finding"] = in.finding_kind; e["finding_nodes"] = in.finding_nodes; e["attributed"] = in.attributed;
      e["detect_s"] = in.found_at - in.at; e["actions"] = in.actions;
      detect[in.name].push_back(in.found_at - in.at); all_detect.push_back(in.found_at - in.at);
      attributed += in.attributed;
      if (in.reassigned_at > 0) {
        e["reassign_s"] = in.reassigned_at - in.found_at;
        reassign[in.name].push_back(in.reassigned_at - in.found_at); all_reassign.push_back(in.reassigned_at - in.found_at);
      }
    }
    if (!in.replacement.empty()) { e["replacement"] = in.replacement; e["replacement_scope"] = in.replacement_scope; ++replaced; leaf += in.replacement_scope == "leaf"; }
    inj.push_back(e);
  }
  json by_kind = json::object();
  for (auto& [k, v] : detect) by_kind[k] = {{"detect_s", Pct(v)}, {"reassign_s", Pct(reassign[k])}};
  return {{"injections", inj}, {"found", found}, {"attributed", attributed}, {"replaced", replaced},
          {"replaced_same_leaf", leaf}, {"detect_s", Pct(all_detect)}, {"reassign_s", Pct(all_reassign)},
          {"by_kind", by_kind}};
}

}  // namespace fleet
