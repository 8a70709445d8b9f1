#include "api/simulate_json.h"

#include <limits>

#include "core/fields.h"

namespace shepherd {

namespace {

constexpr double kBig = std::numeric_limits<double>::max();

// Reads the members of object `key` of `r` into doubles by name; unknown names are errors.
template <typename Set>
void ReadObject(FieldReader& r, const char* key, std::initializer_list<const char*> names, Set set) {
  const Json* v = r.Find(key);
  if (v == nullptr) return;
  if (!v->is_object()) {
    r.Error(r.Path(key), "must be an object");
    return;
  }
  std::vector<FieldError> errs;
  FieldReader sub(*v, r.Path(key), &errs);
  sub.OnlyKnown(names);
  for (const char* n : names)
    if (auto x = sub.Number(n, false, -kBig, kBig)) set(n, *x);
  for (FieldError& e : errs) r.Error(e.field, e.message);
}

}  // namespace

Result<SimInput> ParseSimRequest(const Json& body, const InventoryFleet* inventory) {
  std::vector<FieldError> errs;
  if (!body.is_object())
    return InvalidContent("the body must be a JSON object", {{"$", "must be an object"}});
  FieldReader r(body, "", &errs);
  r.OnlyKnown({"scenario", "fleet", "nodes", "spares_per_leaf", "days", "interval_s", "seeds", "seed",
               "repair_hours", "manual_response_hours", "faults", "timing", "policy", "detectors"});
  r.Enum("scenario", {"llama3"});
  const int nodes = static_cast<int>(r.Int("nodes", false, 1, kSimMaxFleetNodes).value_or(kLlama3Nodes));
  const int spares = static_cast<int>(r.Int("spares_per_leaf", false, 0, 16).value_or(1));
  const double days = r.Number("days", false, -kBig, kBig).value_or(kLlama3Days);
  const bool from_inventory =
      r.Enum("fleet", {"generated", "inventory"}).value_or("generated") == "inventory";
  SimInput in = Llama3Scenario(from_inventory ? 1 : nodes, days, spares);
  in.duration_s = days * 86400;
  if (from_inventory && inventory == nullptr) {
    r.Error("fleet",
            "no inventory here: the command line simulates a generated fleet (POST /v1/simulate "
            "to a daemon simulates its inventory)");
  } else if (from_inventory) {
    if (static_cast<int64_t>(inventory->nodes.size()) > kSimMaxFleetNodes) {
      r.Error("fleet", "the inventory has more than " + std::to_string(kSimMaxFleetNodes) + " nodes");
    } else {
      in.fleet = inventory->nodes;
      in.levels = inventory->levels;
      int non_spare = 0, gpus = 0;
      for (Node& n : in.fleet) {
        n.failed = false;  // the fleet's shape, every node healthy
        n.schedulable = true;
        n.drain = false;
        if (!n.spare && ++non_spare == 1) gpus = n.gpus;
      }
      if (non_spare == 0) {
        r.Error("fleet", "the inventory has no non-spare node to run the job on");
      } else {
        const int job_nodes = r.Find("nodes") != nullptr ? nodes : non_spare;
        in.plan = Plan{.tp = gpus, .pp = job_nodes % 16 == 0 ? 16 : 1};
        in.plan.dp = job_nodes / in.plan.pp;
      }
    }
  }
  if (auto v = r.Number("interval_s", false, -kBig, kBig)) in.interval_s = *v;
  if (auto v = r.Int("seeds", false, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()))
    in.seeds = static_cast<int>(*v);
  if (auto v = r.Int("seed", false, 0, std::numeric_limits<long long>::max()))
    in.seed = static_cast<uint64_t>(*v);
  if (auto v = r.Number("repair_hours", false, -kBig, kBig)) in.repair_s = *v * 3600;
  if (auto v = r.Number("manual_response_hours", false, -kBig, kBig)) in.manual_response_s = *v * 3600;

  if (const Json* f = r.Find("faults"); f != nullptr) {
    if (!f->is_object()) {
      r.Error("faults", "must be an object of rates per node-hour by cause");
    } else {
      for (const auto& [name, value] : f->items()) {
        std::optional<FaultCause> c = FaultCauseFromString(name);
        if (!c) {
          r.Error("faults." + name, "unknown cause (known: gpu, host, network, software, sdc, planned)");
          continue;
        }
        if (!value.is_number()) {
          r.Error("faults." + name, "must be a number (faults per node-hour)");
          continue;
        }
        in.faults.per_node_hour[static_cast<int>(*c)] = value.get<double>();
      }
    }
  }
  SimTiming& t = in.timing;
  ReadObject(r, "timing", {"step_s", "save_s", "load_s", "launch_s", "init_s", "stop_s"},
             [&](std::string_view n, double v) {
               (n == "step_s"     ? t.step_s
                : n == "save_s"   ? t.save_s
                : n == "load_s"   ? t.load_s
                : n == "launch_s" ? t.launch_s
                : n == "init_s"   ? t.init_s
                                  : t.stop_s) = v;
             });
  Policy& p = in.policy;
  bool integral = true;
  ReadObject(
      r, "policy",
      {"hang_timeout_s", "restart_backoff_s", "sdc_check_every_steps", "max_restarts", "good_after_steps"},
      [&](std::string_view n, double v) {
        auto as_int = [&](int* out) {
          if (v != static_cast<double>(static_cast<int>(v)) || v < -1e9 || v > 1e9)
            integral = false;
          else
            *out = static_cast<int>(v);
        };
        if (n == "hang_timeout_s") p.hang_timeout_s = v;
        if (n == "restart_backoff_s") p.restart_backoff_s = v;
        if (n == "sdc_check_every_steps") as_int(&p.sdc_check_every_steps);
        if (n == "max_restarts") as_int(&p.max_restarts);
        if (n == "good_after_steps") as_int(&p.good_after_steps);
      });
  if (!integral)
    r.Error("policy", "sdc_check_every_steps, max_restarts and good_after_steps must be integers");
  DetectorSettings& d = in.detectors;
  ReadObject(r, "detectors",
             {"tick_interval_s", "node_heartbeat_timeout_s", "agent_lease_s", "agent_heartbeat_interval_s",
              "agent_supervise_interval_s"},
             [&](std::string_view n, double v) {
               (n == "tick_interval_s"              ? d.tick_interval_s
                : n == "node_heartbeat_timeout_s"   ? d.node_heartbeat_timeout_s
                : n == "agent_lease_s"              ? d.agent_lease_s
                : n == "agent_heartbeat_interval_s" ? d.agent_heartbeat_interval_s
                                                    : d.agent_supervise_interval_s) = v;
             });
  if (!errs.empty()) return InvalidContent("invalid simulation request", std::move(errs));
  if (Status s = ValidateSimInput(in); !s.ok()) return s;
  return in;
}

Json ToJson(const SimResult& r) {
  Json j;
  j["ettr"] = {{"mean", r.ettr_mean}, {"ci95", {r.ettr_low, r.ettr_high}}};
  j["job"] = {{"nodes", r.job_nodes}, {"gpus", r.job_gpus}};
  j["checkpoint"] = {{"interval_s", r.interval_s},
                     {"advised_interval_s", r.advice.interval_s},
                     {"young_interval_s", r.advice.young_interval_s},
                     {"mtbf_s", r.advice.mtbf_s},
                     {"ettr_advised", r.advice.ettr_advised},
                     {"ettr_at_interval", r.advice.ettr_now ? Json(*r.advice.ettr_now) : Json(nullptr)}};
  Json detection = Json::object();
  for (int c = 0; c < kFaultCauseCount; ++c)
    detection[ToString(static_cast<FaultCause>(c))] = r.detection_s[c];
  j["detection_s"] = detection;
  Json buckets = Json::object();
  for (int b = 0; b < kBucketCount; ++b)
    buckets[ToString(static_cast<Bucket>(b))] = {{"seconds", r.bucket_s[b]}, {"gpu_hours", r.bucket_s[b] * r.job_gpus / 3600}};
  j["buckets"] = buckets;
  Json badput = Json::object();
  for (const auto& [cause, gh] : r.badput_gpu_hours) badput[ToString(cause)] = {{"gpu_hours", gh}};
  j["badput_by_cause"] = badput;
  j["restarts_mean"] = r.restarts_mean;
  Json days = Json::array();
  for (const SparePoint& p : r.spares_by_day)
    days.push_back({{"day", p.day}, {"min_ready_spares", p.min_ready_spares}});
  j["spares"] = {{"at_start", r.spares},
                 {"min_ready", r.min_ready_spares},
                 {"needed", r.spares_needed},
                 {"by_day", days}};
  Json seeds = Json::array();
  for (const SeedOutcome& s : r.seeds) {
    Json faults = Json::object();
    for (int c = 0; c < kFaultCauseCount; ++c)
      faults[ToString(static_cast<FaultCause>(c))] = s.interruptions[c];
    seeds.push_back({{"seed", s.seed},
                     {"ettr", s.ettr},
                     {"interruptions", faults},
                     {"restarts", s.restarts},
                     {"queued", s.queued},
                     {"manual_interventions", s.manual_interventions},
                     {"idle_node_faults", s.idle_node_faults},
                     {"min_ready_spares", s.min_ready_spares},
                     {"max_out_of_service", s.max_out_of_service},
                     {"final_step", s.final_step},
                     {"events", s.events}});
  }
  j["seeds"] = seeds;
  return j;
}

}  // namespace shepherd
