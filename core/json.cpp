#include "core/json.h"

#include <algorithm>

#include "core/fields.h"

namespace shepherd {
namespace {

Json TimeJson(Time t) {
  return FormatRfc3339(t);
}
Time TimeOf(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return Time{};
  return ParseRfc3339(it->get_ref<const std::string&>()).value_or(Time{});
}

// Decodes a record this process wrote; a failure here means the database was edited or corrupted.
template <typename F>
auto Decode(const char* what, F&& f) -> Result<decltype(f())> {
  try {
    return f();
  } catch (const std::exception& e) {
    return Internal(std::string("stored ") + what + " is unreadable: " + e.what());
  }
}

}  // namespace

bool ValidNodeId(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  if (!std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

namespace {

// One container open in the scan of ParseJsonText.
struct OpenContainer {
  bool object = false;
  std::size_t first_key = 0;  // objects: their keys start here in the scan's `keys`
  std::size_t elements = 0;   // arrays: elements begun so far
  std::string_view key;       // objects: the member being read
};

// The JSON path of the value being read in `open[0, n)`: "model.layers", "nodes[1].id"; "$" for the top.
std::string PathIn(const std::vector<OpenContainer>& open, std::size_t n) {
  std::string path;
  for (std::size_t i = 0; i < n; ++i) {
    const OpenContainer& o = open[i];
    if (o.object)
      path += (path.empty() ? "" : ".") + std::string(o.key);
    else
      path += "[" + std::to_string(o.elements == 0 ? 0 : o.elements - 1) + "]";
  }
  return path.empty() ? "$" : path;
}

Status OverLimit(const std::vector<OpenContainer>& open, std::size_t n, const std::string& what) {
  const std::string path = PathIn(open, n);
  return Status(Code::kInvalidArgument, "the JSON value at " + path + " " + what, {{path, what}});
}

}  // namespace

Result<Json> ParseJsonText(std::string_view text, int max_depth) {
  JsonLimits limits;
  limits.max_depth = max_depth;
  return ParseJsonText(text, limits);
}

Result<Json> ParseJsonText(std::string_view text, const JsonLimits& limits) {
  // One scan before parsing: a limit exceeded is refused before anything is built, and a key given twice in
  // one object is found, by its text as written (a key spelled once with \u escapes and once without is not
  // seen), when the object closes: its keys are sorted once, so a flat object of n keys costs n log n, not
  // n^2. Malformed text is left to the parser, whose error comes first.
  struct Key {
    std::string_view text;
    std::size_t at;  // offset in `text`: of two equal keys, the later is the repeat
  };
  std::vector<OpenContainer> open;
  std::vector<Key> keys;  // of the open objects, innermost last
  std::string duplicate;
  std::size_t duplicate_at = std::string_view::npos;  // the first repeat in the text wins
  std::size_t values = 0;
  bool in_string = false, escaped = false, is_key = false, expect_key = false;
  std::size_t string_start = 0;
  const std::string values_over = "has more than " + std::to_string(limits.max_values) + " values in all";
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        if (is_key && !open.empty()) {
          const std::string_view key = text.substr(string_start, i - string_start);
          keys.push_back({key, string_start});
          open.back().key = key;
          if (keys.size() - open.back().first_key > limits.max_members)
            return OverLimit(open, open.size() - 1,
                             "has more than " + std::to_string(limits.max_members) + " members");
          if (++values > limits.max_values) return OverLimit(open, 0, values_over);
        }
      }
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    // The first element of an array begins with its first character other than the closing bracket.
    if (!open.empty() && !open.back().object && open.back().elements == 0 && c != ']') {
      open.back().elements = 1;
      if (++values > limits.max_values) return OverLimit(open, 0, values_over);
    }
    if (c == '"') {
      in_string = true;
      is_key = expect_key;
      expect_key = false;
      string_start = i + 1;
    } else if (c == '{' || c == '[') {
      if (static_cast<int>(open.size()) >= limits.max_depth)
        return InvalidArgument("JSON nesting is deeper than " + std::to_string(limits.max_depth) + " levels");
      open.push_back({.object = c == '{', .first_key = keys.size()});
      expect_key = c == '{';
    } else if (c == '}' || c == ']') {
      if (!open.empty()) {
        OpenContainer& o = open.back();
        if (o.object && keys.size() - o.first_key > 1) {
          const auto first = keys.begin() + static_cast<std::ptrdiff_t>(o.first_key);
          std::sort(first, keys.end(), [](const Key& x, const Key& y) {
            const int order = x.text.compare(y.text);
            return order != 0 ? order < 0 : x.at < y.at;
          });
          for (auto k = first + 1; k != keys.end(); ++k)
            if (k->text == (k - 1)->text && k->at < duplicate_at) {
              duplicate_at = k->at;
              o.key = k->text;
              duplicate = PathIn(open, open.size());
            }
        }
        keys.resize(o.first_key);
        open.pop_back();
      }
      expect_key = false;
    } else if (c == ',' && !open.empty()) {
      OpenContainer& o = open.back();
      if (o.object) {
        expect_key = true;
      } else {
        if (++o.elements > limits.max_elements)
          return OverLimit(open, open.size() - 1,
                           "has more than " + std::to_string(limits.max_elements) + " elements");
        if (++values > limits.max_values) return OverLimit(open, 0, values_over);
      }
    }
  }
  try {
    Json j = Json::parse(text);
    if (!duplicate.empty())
      return Status(Code::kInvalidArgument, "the key '" + duplicate + "' is given twice in one object",
                    {{duplicate, "given twice in one object"}});
    return j;
  } catch (const Json::exception& e) {
    // nlohmann's message without its "[json.exception.parse_error.101] " tag: where and what (it quotes
    // the last token read, escaped; cut to a line).
    std::string what = e.what();
    if (const std::size_t tag = what.find("] ");
        what.starts_with("[json.exception.") && tag != std::string::npos)
      what.erase(0, tag + 2);
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    return InvalidArgument("the body is not valid JSON: " + what);
  }
}

Result<Node> ParseNode(const Json& j, const TopologyLevels& levels) {
  std::vector<FieldError> errs;
  FieldReader r(j, "", &errs);
  Node n;
  if (r.ok()) {
    r.OnlyKnown(
        {"id", "hostname", "gpus", "gpu_memory_gib", "gpu_model", "topology", "spare", "schedulable"});
    if (auto id = r.String("id", true, 128)) {
      if (ValidNodeId(*id))
        n.id = *id;
      else
        r.Error("id", "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$");
    }
    n.hostname = r.String("hostname", false, 253).value_or(n.id);
    if (n.hostname.empty()) n.hostname = n.id;
    n.gpus = int(r.Int("gpus", false, 1, kMaxNodeGpus).value_or(8));
    n.gpu_memory_gib = r.Number("gpu_memory_gib", false, 1, 1 << 20).value_or(80);
    n.gpu_model = r.String("gpu_model", false, 64).value_or("unknown");
    n.spare = r.Bool("spare").value_or(false);
    n.schedulable = r.Bool("schedulable").value_or(true);
    const Json* topo = r.Find("topology");
    if (!topo && !levels.empty()) r.Error("topology", "is required");
    if (topo) {
      FieldReader t(*topo, "topology", &errs);
      for (const auto& level : levels)
        if (auto v = t.String(level.c_str(), true, 128)) n.topology[level] = *v;
      n.nvlink_domain = t.String("nvlink_domain", false, 128).value_or("");
      if (t.ok())
        for (const auto& [k, v] : topo->items())
          if (k != "nvlink_domain" && !n.topology.count(k) &&
              std::find(levels.begin(), levels.end(), k) == levels.end())
            t.Error(t.Path(k.c_str()), "unknown topology level");
    }
    if (n.nvlink_domain.empty()) n.nvlink_domain = n.id;
  }
  if (!errs.empty()) return InvalidContent("the node is invalid", std::move(errs));
  return n;
}

void KeepOmittedFields(const Json& body, const Node& stored, Node* node) {
  if (!body.is_object()) return;
  if (!body.contains("hostname")) node->hostname = stored.hostname;
  if (!body.contains("gpus")) node->gpus = stored.gpus;
  if (!body.contains("gpu_memory_gib")) node->gpu_memory_gib = stored.gpu_memory_gib;
  if (!body.contains("gpu_model")) node->gpu_model = stored.gpu_model;
  if (!body.contains("spare")) node->spare = stored.spare;
  const Json* topo = body.contains("topology") ? &body["topology"] : nullptr;
  if (!topo || !topo->is_object() || !topo->contains("nvlink_domain"))
    node->nvlink_domain = stored.nvlink_domain;
}

Json ToJson(const Node& n) {
  Json topo = n.topology;
  topo["nvlink_domain"] = n.nvlink_domain;
  Json out = {{"id", n.id},
              {"hostname", n.hostname},
              {"gpus", n.gpus},
              {"gpu_memory_gib", n.gpu_memory_gib},
              {"gpu_model", n.gpu_model},
              {"topology", topo},
              {"spare", n.spare},
              {"schedulable", n.schedulable},
              {"failed", n.failed},
              {"reason", n.reason},
              {"agent_attached", n.agent_attached},
              {"created_at", TimeJson(n.created_at)},
              {"updated_at", TimeJson(n.updated_at)}};
  if (!n.schedulable || n.failed)  // who took it out of service, and when
    out["cordon"] = {{"reason", n.reason},
                     {"source", n.cordon_source},
                     {"at", n.cordoned_at ? TimeJson(*n.cordoned_at) : Json(nullptr)},
                     {"drain", n.drain}};
  return out;
}

Json ToJson(const Plan& p) {
  return {{"tp", p.tp},
          {"pp", p.pp},
          {"dp", p.dp},
          {"zero_stage", p.zero_stage},
          {"micro_batches", p.micro_batches},
          {"micro_batch_size", p.micro_batch_size},
          {"cp", p.cp},
          {"ep", p.ep},
          {"etp", p.expert_tp()},
          {"vpp", p.vpp},
          {"sequence_parallel", p.sequence_parallel},
          {"pipeline_layers", p.pipeline_layers}};
}

Result<Plan> ParsePlan(const Json& j) {
  return Decode("plan", [&] {
    Plan p;
    p.tp = j.at("tp");
    p.pp = j.at("pp");
    p.dp = j.at("dp");
    p.zero_stage = j.at("zero_stage");
    p.micro_batches = j.at("micro_batches");
    p.micro_batch_size = j.value("micro_batch_size", 1);
    p.cp = j.value("cp", 1);
    p.ep = j.value("ep", 1);
    const int etp = j.value("etp", 0);
    p.etp = etp == p.tp ? 0 : etp;  // stored before etp existed, or equal to tp: the default
    p.vpp = j.value("vpp", 1);
    p.sequence_parallel = j.value("sequence_parallel", false);
    p.pipeline_layers = j.value("pipeline_layers", std::vector<int>{});
    return p;
  });
}

Json ToJson(const Job& job) {
  return {{"id", job.id},
          {"seq", job.seq},
          {"spec", ToJson(job.spec)},
          {"plan", ToJson(job.plan)},
          {"state", ToString(job.state)},
          {"attempt", job.attempt},
          {"restarts", job.restarts},
          {"reason", job.reason},
          {"owner", job.spec.owner},
          {"launch", {{"mode", ToString(job.spec.launch_mode)}}},
          {"created_at", TimeJson(job.created_at)},
          {"updated_at", TimeJson(job.updated_at)}};
}

Result<Job> JobFromJson(const Json& j) {
  return Decode("job", [&]() -> Job {
    Job job;
    job.id = j.at("id");
    job.seq = j.at("seq");
    auto spec = ParseJobSpec(j.at("spec"));
    if (!spec.ok()) throw std::runtime_error(spec.status().message());
    job.spec = std::move(spec).value();
    job.spec.owner = j.value("owner", "");
    // A record written before the mode was stored has none: the parser decided it from the spec's fields.
    // One that has it must agree with them.
    if (const auto l = j.find("launch"); l != j.end()) {
      const std::optional<LaunchMode> mode = LaunchModeFromString(l->at("mode").get<std::string>());
      if (!mode) throw std::runtime_error("unknown launch mode");
      if (*mode != job.spec.launch_mode)
        throw std::runtime_error("launch.mode disagrees with the job's spec");
    }
    auto plan = ParsePlan(j.at("plan"));
    if (!plan.ok()) throw std::runtime_error(plan.status().message());
    job.plan = *plan;
    auto st = JobStateFromString(j.at("state"));
    if (!st) throw std::runtime_error("unknown job state");
    job.state = *st;
    job.attempt = j.at("attempt");
    job.restarts = j.value("restarts", 0);
    job.reason = j.value("reason", "");
    job.created_at = TimeOf(j, "created_at");
    job.updated_at = TimeOf(j, "updated_at");
    return job;
  });
}

Json ToJson(const RankSlot& r) {
  Json j = {{"rank", r.rank}, {"node", r.node}, {"gpu", r.gpu}, {"tp", r.tp}, {"pp", r.pp}, {"dp", r.dp}};
  if (r.cp > 0) j["cp"] = r.cp;
  return j;
}

// Placements are stored compactly: parallel arrays, nodes interned.
Json ToJson(const Attempt& a) {
  Json nodes = Json::array(), node_of = Json::array(), gpu = Json::array();
  std::unordered_map<std::string, int> index;
  for (const auto& r : a.placement.ranks) {
    auto [it, fresh] = index.emplace(r.node, int(index.size()));
    if (fresh) nodes.push_back(r.node);
    node_of.push_back(it->second);
    gpu.push_back(r.gpu);
  }
  Json out = {{"job", a.job},
              {"number", a.number},
              {"started_at", TimeJson(a.started_at)},
              {"reason", a.reason},
              {"resume_checkpoint", a.resume_checkpoint},
              {"resume_step", a.resume_step},
              {"placement", {{"nodes", nodes}, {"node_of_rank", node_of}, {"gpu_of_rank", gpu}}}};
  if (a.ended_at) out["ended_at"] = TimeJson(*a.ended_at);
  if (a.first_step_at) out["first_step_at"] = TimeJson(*a.first_step_at);
  if (a.last_step_at) {
    out["last_step_at"] = TimeJson(*a.last_step_at);
    out["last_step"] = a.last_step;
  }
  if (a.load_s > 0) out["load_s"] = a.load_s;
  if (a.save_s > 0) out["save_s"] = a.save_s;
  if (a.not_before) out["not_before"] = TimeJson(*a.not_before);
  if (!a.ended_by.empty()) out["ended_by"] = a.ended_by;
  return out;
}

// Coordinates are derived from the rank and the plan: REQUIRES the caller to fill tp/pp/dp afterwards
// (the attempt record does not repeat the plan).
Result<Attempt> AttemptFromJson(const Json& j) {
  return Decode("attempt", [&] {
    Attempt a;
    a.job = j.at("job");
    a.number = j.at("number");
    a.started_at = TimeOf(j, "started_at");
    if (j.contains("ended_at")) a.ended_at = TimeOf(j, "ended_at");
    a.reason = j.value("reason", "");
    a.resume_checkpoint = j.value("resume_checkpoint", "");
    a.resume_step = j.value("resume_step", int64_t{0});
    if (j.contains("first_step_at")) a.first_step_at = TimeOf(j, "first_step_at");
    if (j.contains("last_step_at")) {
      a.last_step_at = TimeOf(j, "last_step_at");
      a.last_step = j.value("last_step", int64_t{0});
    }
    a.load_s = j.value("load_s", 0.0);
    a.save_s = j.value("save_s", 0.0);
    if (j.contains("not_before")) a.not_before = TimeOf(j, "not_before");
    a.ended_by = j.value("ended_by", "");
    const Json& p = j.at("placement");
    const Json& nodes = p.at("nodes");
    const Json& node_of = p.at("node_of_rank");
    const Json& gpu = p.at("gpu_of_rank");
    a.placement.attempt = a.number;
    a.placement.ranks.resize(node_of.size());
    for (size_t i = 0; i < node_of.size(); ++i) {
      RankSlot& r = a.placement.ranks[i];
      r.rank = int(i);
      r.node = nodes.at(node_of[i].get<size_t>());
      r.gpu = gpu.at(i);
    }
    return a;
  });
}

Json ToJson(const Checkpoint& c) {
  return {{"id", c.id},
          {"job", c.job},
          {"attempt", c.attempt},
          {"step", c.step},
          {"path", c.path},
          {"status", ToString(c.status)},
          {"reason", c.reason},
          {"ranks_reported", c.ranks_reported},
          {"created_at", TimeJson(c.created_at)},
          {"updated_at", TimeJson(c.updated_at)}};
}

Result<Checkpoint> CheckpointFromJson(const Json& j) {
  return Decode("checkpoint", [&] {
    Checkpoint c;
    c.id = j.at("id");
    c.job = j.at("job");
    c.attempt = j.at("attempt");
    c.step = j.at("step");
    c.path = j.value("path", "");
    std::string s = j.at("status");
    c.status = s == "good"       ? CheckpointStatus::kGood
               : s == "bad"      ? CheckpointStatus::kBad
               : s == "complete" ? CheckpointStatus::kComplete
                                 : CheckpointStatus::kPending;
    c.reason = j.value("reason", "");
    c.ranks_reported = j.value("ranks_reported", 0);
    c.created_at = TimeOf(j, "created_at");
    c.updated_at = TimeOf(j, "updated_at");
    return c;
  });
}

Json ToJson(const Finding& f) {
  Json out = {{"id", f.id},
              {"job", f.job},
              {"attempt", f.attempt},
              {"kind", ToString(f.kind)},
              {"ranks", f.ranks},
              {"nodes", f.nodes},
              {"step", nullptr},
              {"onset_step", nullptr},
              {"detected_at", TimeJson(f.detected_at)},
              {"detail", f.detail},
              {"actions", f.actions}};
  if (f.step) out["step"] = *f.step;
  if (f.onset_step) out["onset_step"] = *f.onset_step;
  if (f.sdc_verdict != SdcVerdict::kNone) out["sdc_verdict"] = ToString(f.sdc_verdict);
  if (!f.recommended_actions.empty()) out["recommended_actions"] = f.recommended_actions;
  if (f.exit_code) out["exit_code"] = *f.exit_code;
  if (f.signal) out["signal"] = *f.signal;
  if (f.oom_kill) out["oom_kill"] = *f.oom_kill;
  if (f.fenced) out["fenced"] = true;
  if (f.onset_at) out["onset_at"] = TimeJson(*f.onset_at);
  if (!f.incident.empty()) out["incident"] = f.incident;
  if (!f.silent_ranks.empty()) out["silent_ranks"] = f.silent_ranks;
  if (!f.log_tail.empty()) out["log_tail"] = f.log_tail;
  if (!f.flight_recorder.empty()) {
    Json dumps = Json::array();
    for (const FlightRecorderDump& d : f.flight_recorder)
      dumps.push_back({{"path", d.path}, {"size", d.size}});
    out["flight_recorder"] = std::move(dumps);
  }
  if (f.straggler) {
    out["straggler"] = {{"group", f.straggler->group},
                        {"lateness_s", f.straggler->lateness_s},
                        {"share_held_up", f.straggler->share_held_up},
                        {"windows", f.straggler->windows}};
    if (!f.ranks.empty()) out["straggler"]["rank"] = f.ranks.front();
    if (!f.nodes.empty()) out["straggler"]["node"] = f.nodes.front();
  }
  return out;
}

Result<Finding> FindingFromJson(const Json& j) {
  return Decode("finding", [&] {
    Finding f;
    f.id = j.at("id");
    f.job = j.value("job", "");
    f.attempt = j.value("attempt", 0);
    std::string kind = j.at("kind");
    std::optional<FindingKind> k = FindingKindFromString(kind);
    if (!k) throw std::invalid_argument("unknown finding kind " + kind);
    f.kind = *k;
    std::string verdict = j.value("sdc_verdict", "none");
    f.sdc_verdict = verdict == "majority"       ? SdcVerdict::kMajority
                    : verdict == "needs_replay" ? SdcVerdict::kNeedsReplay
                    : verdict == "no_agreement" ? SdcVerdict::kNoAgreement
                                                : SdcVerdict::kNone;
    f.ranks = j.value("ranks", std::vector<int>{});
    f.nodes = j.value("nodes", std::vector<std::string>{});
    if (j.contains("step") && j["step"].is_number()) f.step = j["step"].get<int64_t>();
    if (j.contains("onset_step") && j["onset_step"].is_number())
      f.onset_step = j["onset_step"].get<int64_t>();
    f.detected_at = TimeOf(j, "detected_at");
    f.detail = j.value("detail", "");
    f.actions = j.value("actions", std::vector<std::string>{});
    f.recommended_actions = j.value("recommended_actions", std::vector<std::string>{});
    if (j.contains("exit_code") && j["exit_code"].is_number_integer())
      f.exit_code = j["exit_code"].get<int>();
    if (j.contains("signal") && j["signal"].is_number_integer()) f.signal = j["signal"].get<int>();
    if (j.contains("oom_kill") && j["oom_kill"].is_boolean()) f.oom_kill = j["oom_kill"].get<bool>();
    if (j.contains("fenced") && j["fenced"].is_boolean()) f.fenced = j["fenced"].get<bool>();
    if (j.contains("onset_at")) f.onset_at = TimeOf(j, "onset_at");
    f.incident = j.value("incident", "");
    if (j.contains("silent_ranks")) f.silent_ranks = j["silent_ranks"].get<std::vector<int>>();
    f.log_tail = j.value("log_tail", "");
    for (const Json& d : j.value("flight_recorder", Json::array()))
      f.flight_recorder.push_back({d.at("path").get<std::string>(), d.value("size", uint64_t{0})});
    if (auto e = j.find("straggler"); e != j.end() && e->is_object())
      f.straggler = StragglerEvidence{.group = e->value("group", ""),
                                      .lateness_s = e->value("lateness_s", 0.0),
                                      .share_held_up = e->value("share_held_up", 0.0),
                                      .windows = e->value("windows", 0)};
    return f;
  });
}

}  // namespace shepherd
