#include "slurm/step_env.h"

#include <charconv>
#include <vector>

namespace shepherd::slurm {
namespace {

std::vector<std::string> SplitComma(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t c = s.find(sep, pos);
    out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) return out;
    pos = c + 1;
  }
}

bool ToInt(const std::string& s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0;
}

const std::string* Get(const EnvMap& env, const char* key) {
  auto it = env.find(key);
  return it == env.end() ? nullptr : &it->second;
}

}  // namespace

EnvMap EncodeLayout(const Placement& placement) {
  std::string nodes, gpus, coords;
  for (const RankSlot& r : placement.ranks) {
    if (!nodes.empty()) nodes += ',', gpus += ',', coords += ',';
    nodes += r.node;
    gpus += std::to_string(r.gpu);
    coords += std::to_string(r.tp) + "." + std::to_string(r.pp) + "." + std::to_string(r.dp);
  }
  return {{"SHEPHERD_SLURM_NODES", nodes}, {"SHEPHERD_SLURM_GPUS", gpus}, {"SHEPHERD_SLURM_COORDS", coords}};
}

Result<EnvMap> EncodeRankTables(const std::vector<EnvMap>& per_rank) {
  EnvMap out;
  if (per_rank.empty()) return out;
  std::string keys;
  for (const auto& [key, first] : per_rank[0]) {
    std::string table;
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      auto it = per_rank[r].find(key);
      if (it == per_rank[r].end())
        return InvalidArgument("rank tables: rank " + std::to_string(r) + " has no " + key);
      if (it->second.find(';') != std::string::npos)
        return InvalidArgument("rank tables: " + key + " of rank " + std::to_string(r) + " contains ';'");
      table += (r ? ";" : "") + it->second;
    }
    keys += (keys.empty() ? "" : ",") + key;
    out["SHEPHERD_SLURM_V_" + key] = std::move(table);
  }
  for (std::size_t r = 1; r < per_rank.size(); ++r)
    if (per_rank[r].size() != per_rank[0].size())
      return InvalidArgument("rank tables: rank " + std::to_string(r) + " has other keys than rank 0");
  out["SHEPHERD_SLURM_KEYS"] = keys;
  return out;
}

Result<EnvMap> RankEnvironment(const EnvMap& task_env) {
  const std::string* procid = Get(task_env, "SLURM_PROCID");
  const std::string* nodes_s = Get(task_env, "SHEPHERD_SLURM_NODES");
  const std::string* gpus_s = Get(task_env, "SHEPHERD_SLURM_GPUS");
  const std::string* coords_s = Get(task_env, "SHEPHERD_SLURM_COORDS");
  if (!procid || !nodes_s || !gpus_s || !coords_s)
    return InvalidArgument("shepherd-slurm-rank: SLURM_PROCID or a SHEPHERD_SLURM_* table is missing");
  std::vector<std::string> nodes = SplitComma(*nodes_s), gpus = SplitComma(*gpus_s),
                           coords = SplitComma(*coords_s);
  if (nodes.size() != gpus.size() || nodes.size() != coords.size())
    return InvalidArgument("shepherd-slurm-rank: the SHEPHERD_SLURM_* tables differ in length");
  int rank = 0, gpu = 0;
  if (!ToInt(*procid, rank) || rank >= static_cast<int>(nodes.size()))
    return InvalidArgument("shepherd-slurm-rank: SLURM_PROCID " + *procid + " outside the layout of " +
                           std::to_string(nodes.size()) + " ranks");
  if (!ToInt(gpus[rank], gpu)) return InvalidArgument("shepherd-slurm-rank: bad GPU '" + gpus[rank] + "'");
  const std::string& node = nodes[rank];
  const std::string* actual = Get(task_env, "SLURMD_NODENAME");
  if (!actual || *actual != node)
    return Conflict("shepherd-slurm-rank: rank " + std::to_string(rank) + " was placed on " + node +
                    " but runs on " + (actual ? *actual : std::string("an unknown node")));
  // Composed by the controller (EncodeRankTables): the tables are the rank's variables, nothing is derived.
  if (const std::string* keys = Get(task_env, "SHEPHERD_SLURM_KEYS"); keys && !keys->empty()) {
    EnvMap out;
    for (const std::string& key : SplitComma(*keys)) {
      const std::string* table = Get(task_env, ("SHEPHERD_SLURM_V_" + key).c_str());
      std::vector<std::string> values = table ? SplitComma(*table, ';') : std::vector<std::string>{};
      if (values.size() != nodes.size())
        return InvalidArgument("shepherd-slurm-rank: table SHEPHERD_SLURM_V_" + key + " does not list " +
                               std::to_string(nodes.size()) + " ranks");
      out[key] = values[rank];
    }
    return out;
  }
  std::string coord = coords[rank];
  int tp = 0, pp = 0, dp = 0;
  std::size_t d1 = coord.find('.'), d2 = coord.find('.', d1 == std::string::npos ? 0 : d1 + 1);
  if (d1 == std::string::npos || d2 == std::string::npos || !ToInt(coord.substr(0, d1), tp) ||
      !ToInt(coord.substr(d1 + 1, d2 - d1 - 1), pp) || !ToInt(coord.substr(d2 + 1), dp))
    return InvalidArgument("shepherd-slurm-rank: bad coordinates '" + coord + "'");
  int local_rank = 0, local_world = 0;
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r] != node) continue;
    if (static_cast<int>(r) < rank) ++local_rank;
    ++local_world;
  }
  return EnvMap{
      {"RANK", std::to_string(rank)},
      {"SHEPHERD_RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(nodes.size())},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"CUDA_VISIBLE_DEVICES", std::to_string(gpu)},
      {"SHEPHERD_RANK_COORDS", std::to_string(tp) + "," + std::to_string(pp) + "," + std::to_string(dp)}};
}

}  // namespace shepherd::slurm
