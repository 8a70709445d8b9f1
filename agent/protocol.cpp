#include "agent/protocol.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "core/fields.h"
#include "core/node.h"

namespace shepherd::agent {
namespace {

bool IsInt(const Json& j) {
  return j.is_number_integer();
}

// Reads job/attempt/rank from `j` into `key`; appends an error for `path` otherwise.
bool ReadKey(const Json& j, const std::string& path, RankKey* key, std::vector<FieldError>* errs) {
  bool ok = true;
  if (!j.contains("job") || !j["job"].is_string() || j["job"].get<std::string>().empty()) {
    errs->push_back({path + ".job", "must be a non-empty string"});
    ok = false;
  } else {
    key->job = j["job"].get<std::string>();
  }
  for (const char* f : {"attempt", "rank"}) {
    if (!j.contains(f) || !IsInt(j[f]) || j[f].get<std::int64_t>() < 0 ||
        j[f].get<std::int64_t>() > std::numeric_limits<int>::max()) {
      errs->push_back({path + "." + f, "must be a non-negative integer"});
      ok = false;
    }
  }
  if (ok) {
    key->attempt = j["attempt"].get<int>();
    key->rank = j["rank"].get<int>();
  }
  return ok;
}

}  // namespace

Result<Assignments> ParseAssignments(const Json& j) {
  std::vector<FieldError> errs;
  Assignments out;
  if (!j.is_object()) return InvalidContent("assignments: not an object", {{"", "must be an object"}});
  if (!j.contains("version") || !IsInt(j["version"])) {
    errs.push_back({"version", "must be an integer"});
  } else {
    out.version = j["version"].get<std::int64_t>();
  }
  if (!j.contains("ranks") || !j["ranks"].is_array()) {
    errs.push_back({"ranks", "must be an array"});
  } else {
    for (std::size_t i = 0; i < j["ranks"].size(); ++i) {
      const Json& r = j["ranks"][i];
      std::string path = "ranks[" + std::to_string(i) + "]";
      if (!r.is_object()) {
        errs.push_back({path, "must be an object"});
        continue;
      }
      RankAssignment a;
      bool ok = ReadKey(r, path, &a.key, &errs);
      if (r.contains("gpu") && !r["gpu"].is_null()) {
        if (IsInt(r["gpu"]) && r["gpu"].get<std::int64_t>() >= 0 && r["gpu"].get<std::int64_t>() < 1 << 20) {
          a.gpu = r["gpu"].get<int>();
        } else {
          errs.push_back({path + ".gpu", "must be a non-negative integer"});
          ok = false;
        }
      }
      const Json* cmd = r.contains("command") ? &r["command"] : nullptr;
      if (!cmd || !cmd->is_array() || cmd->empty()) {
        errs.push_back({path + ".command", "must be a non-empty array of strings"});
        ok = false;
      } else {
        for (const Json& arg : *cmd) {
          if (!arg.is_string()) {
            errs.push_back({path + ".command", "must be a non-empty array of strings"});
            ok = false;
            break;
          }
          a.command.push_back(arg.get<std::string>());
        }
      }
      if (r.contains("env") && !r["env"].is_null()) {
        if (!r["env"].is_object()) {
          errs.push_back({path + ".env", "must be an object of strings"});
          ok = false;
        } else {
          for (const auto& [k, v] : r["env"].items()) {
            if (!v.is_string() || k.empty() || k.find('=') != std::string::npos) {
              errs.push_back({path + ".env." + k, "must be a string under a name without '='"});
              ok = false;
              continue;
            }
            a.env[k] = v.get<std::string>();
          }
        }
      }
      if (r.contains("run_as") && !r["run_as"].is_null()) {
        if (r["run_as"].is_string() && !r["run_as"].get<std::string>().empty()) {
          a.run_as = r["run_as"].get<std::string>();
        } else {
          errs.push_back({path + ".run_as", "must be a non-empty string (a user name)"});
          ok = false;
        }
      }
      if (ok) out.ranks.push_back(std::move(a));
    }
  }
  if (j.contains("keep") && !j["keep"].is_null()) {
    if (!j["keep"].is_array()) {
      errs.push_back({"keep", "must be an array"});
    } else {
      for (std::size_t i = 0; i < j["keep"].size(); ++i) {
        const Json& e = j["keep"][i];
        std::string path = "keep[" + std::to_string(i) + "]";
        RankKey k;
        if (!e.is_object())
          errs.push_back({path, "must be an object"});
        else if (ReadKey(e, path, &k, &errs))
          out.keep.push_back(std::move(k));
      }
    }
  }
  if (!errs.empty()) return InvalidContent("invalid assignments answer", std::move(errs));
  return out;
}

Json HeartbeatBody(const AgentIdentity& agent, const Json& gpu_faults,
                   const std::vector<ProcessReport>& processes) {
  // Within the daemon's bounds (core/node.h), or it would refuse the whole heartbeat: running ranks first
  // (an exit left out is sent once earlier ones are acknowledged), the first dumps by path.
  std::vector<const ProcessReport*> listed;
  for (const ProcessReport& p : processes)
    if (p.running) listed.push_back(&p);
  for (const ProcessReport& p : processes)
    if (!p.running) listed.push_back(&p);
  if (listed.size() > kMaxHeartbeatProcesses) listed.resize(kMaxHeartbeatProcesses);
  Json procs = Json::array();
  for (const ProcessReport* entry : listed) {
    const ProcessReport& p = *entry;
    Json e = {{"job", p.key.job},
              {"attempt", p.key.attempt},
              {"rank", p.key.rank},
              {"pid", p.pid},
              {"state", p.running ? "running" : "exited"}};
    if (!p.running) {
      e["exit_code"] = p.exit_code ? Json(*p.exit_code) : Json(nullptr);
      e["signal"] = p.signal ? Json(*p.signal) : Json(nullptr);
      if (!p.error.empty()) e["error"] = p.error;
      if (!p.log_tail.empty()) e["log_tail"] = p.log_tail;
      if (p.oom_kill) e["oom_kill"] = *p.oom_kill;
      if (p.fenced) e["fenced"] = true;
    }
    if (!p.flight_recorder.empty()) {
      Json dumps = Json::array();
      for (std::size_t i = 0; i < p.flight_recorder.size() && i < kMaxHeartbeatDumps; ++i)
        dumps.push_back({{"path", p.flight_recorder[i].path}, {"size", p.flight_recorder[i].size}});
      e["flight_recorder"] = std::move(dumps);
    }
    procs.push_back(std::move(e));
  }
  return {{"agent", {{"pid", agent.pid}, {"started_at", agent.started_at}}},
          {"gpu_faults", gpu_faults.is_array() ? gpu_faults : Json::array()},
          {"processes", std::move(procs)}};
}

Result<HeartbeatAnswer> ParseHeartbeatAnswer(const Json& j) {
  HeartbeatAnswer out;
  if (!j.is_object()) return InvalidContent("heartbeat answer: not an object", {{"", "must be an object"}});
  std::vector<FieldError> errs;
  if (j.contains("ack_exits") && !j["ack_exits"].is_null()) {
    if (!j["ack_exits"].is_array()) {
      errs.push_back({"ack_exits", "must be an array"});
    } else {
      for (std::size_t i = 0; i < j["ack_exits"].size(); ++i) {
        RankKey k;
        const Json& e = j["ack_exits"][i];
        std::string path = "ack_exits[" + std::to_string(i) + "]";
        if (!e.is_object()) {
          errs.push_back({path, "must be an object"});
        } else if (ReadKey(e, path, &k, &errs)) {
          out.ack_exits.push_back(std::move(k));
        }
      }
    }
  }
  if (j.contains("assignments_version") && IsInt(j["assignments_version"]))
    out.assignments_version = j["assignments_version"].get<std::int64_t>();
  if (j.contains("lease_s") && !j["lease_s"].is_null()) {
    if (!j["lease_s"].is_number() || j["lease_s"].get<double>() <= 0)
      errs.push_back({"lease_s", "must be a positive number"});
    else
      out.lease_s = j["lease_s"].get<double>();
  }
  for (auto [key, into] :
       {std::pair<const char*, bool*>{"renew_only", &out.renew_only}, {"node_lost", &out.node_lost}})
    if (j.contains(key) && !j[key].is_null()) {
      if (!j[key].is_boolean())
        errs.push_back({key, "must be a boolean"});
      else
        *into = j[key].get<bool>();
    }
  if (!errs.empty()) return InvalidContent("invalid heartbeat answer", std::move(errs));
  return out;
}

Json RegisterBody(const NodeRegistration& n) {
  Json j = {{"id", n.id}, {"hostname", n.hostname}, {"gpus", n.gpus}, {"topology", Json(n.topology)}};
  if (n.spare) j["spare"] = true;
  if (n.gpu_memory_gib) j["gpu_memory_gib"] = *n.gpu_memory_gib;
  if (n.gpu_model) j["gpu_model"] = *n.gpu_model;
  return j;
}

Result<std::map<std::string, std::string>> ParseTopologyFlag(std::string_view text) {
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      return InvalidArgument("--topology: expected level=value, got '" + std::string(item) + "'");
    std::string level(item.substr(0, eq));
    if (!out.emplace(level, std::string(item.substr(eq + 1))).second)
      return InvalidArgument("--topology: level '" + level + "' given twice");
  }
  return out;
}

namespace {

// One probe entry as the daemon takes it; nullopt to drop it.
std::optional<Json> SanitizedFault(const Json& g, int gpus) {
  if (!g.is_object()) return std::nullopt;
  auto gpu = g.find("gpu");
  if (gpu == g.end() || !gpu->is_number_integer() || gpu->get<int64_t>() < 0 || gpu->get<int64_t>() >= gpus)
    return std::nullopt;
  Json out = {{"gpu", gpu->get<int64_t>()}, {"kind", "fault"}};
  if (auto kind = g.find("kind"); kind != g.end() && kind->is_string()) {
    const std::string& k = kind->get_ref<const std::string&>();
    if (!k.empty() && k.size() <= kMaxGpuFaultKind && !HasControlCharacter(k)) out["kind"] = k;
  }
  if (auto detail = g.find("detail"); detail != g.end() && detail->is_string()) {
    const std::string& whole = detail->get_ref<const std::string&>();
    size_t n = std::min(whole.size(), kMaxGpuFaultDetail);
    while (n > 0 && n < whole.size() && (static_cast<unsigned char>(whole[n]) & 0xC0) == 0x80)
      --n;  // not inside a UTF-8 sequence: the body is serialised as JSON, which must stay valid UTF-8
    std::string text = whole.substr(0, n);
    for (char& c : text)
      if (HasControlCharacter(std::string_view(&c, 1))) c = ' ';
    out["detail"] = text;
  }
  return out;
}

}  // namespace

Json ReadGpuFaults(const std::string& path, int gpus) {
  std::ifstream in(path);
  if (!in) return Json::array();
  std::stringstream ss;
  ss << in.rdbuf();
  Result<Json> j = ParseJsonText(ss.str());
  const Json* entries = nullptr;
  if (j.ok() && j->is_array()) entries = &*j;
  if (j.ok() && j->is_object() && j->contains("gpu_faults") && (*j)["gpu_faults"].is_array())
    entries = &(*j)["gpu_faults"];
  if (!entries) {
    spdlog::warn("agent: ignoring malformed {}", path);
    return Json::array();
  }
  Json out = Json::array();
  for (const Json& g : *entries) {
    if (std::optional<Json> f = SanitizedFault(g, gpus))
      out.push_back(std::move(*f));
    else
      spdlog::warn("agent: ignoring {} entry {}: needs \"gpu\" from 0 to {}", path, g.dump(), gpus - 1);
  }
  return out;
}

}  // namespace shepherd::agent
