#include "daemon/config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/fields.h"
#include "core/sbatch_policy.h"
#include "net/endpoint_list.h"

namespace shepherd {
namespace {

// A Unix user name as run_as and slurm_users take one: 1 to 32 letters, digits, '.', '_', '-', not
// starting with '-'.
bool ValidUnixUser(const std::string& u) {
  return !u.empty() && u.size() <= 32 &&
         u.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
             std::string::npos &&
         u[0] != '-';
}
Result<Json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  // The site's own files: an inventory of tens of thousands of nodes is more than any request body.
  JsonLimits limits = kLargeJsonLimits;
  limits.max_depth = 64;
  auto j = ParseJsonText(ss.str(), limits);
  if (!j.ok()) return InvalidArgument(path + ": " + j.status().message());
  return j;
}
}  // namespace

bool ValidLogLevel(const std::string& level) {
  for (const char* name : {"trace", "debug", "info", "warn", "error", "critical", "off"})
    if (level == name) return true;
  return false;
}

Result<StoreLocation> ConfiguredStore(const DaemonConfig& config) {
  if (config.store.empty()) return StoreLocation{.kind = StoreLocation::Kind::kSqlite, .path = config.db};
  Result<StoreLocation> loc = ParseStoreLocation(config.store);
  if (!loc.ok()) return loc.status();
  const std::string& p = config.store_prefix;
  if (loc->kind == StoreLocation::Kind::kEtcd &&
      (p.empty() || p[0] != '/' || p.back() == '/' || p.size() > 512 ||
       p.find_first_of(std::string("\0\n", 2)) != std::string::npos))
    return InvalidArgument("--store-prefix '" + p +
                           "': must start with '/', not end with '/', at most 512 bytes");
  return loc;
}

Status LoadConfigFile(const std::string& path, DaemonConfig* c) {
  auto j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  std::vector<FieldError> errs;
  FieldReader r(*j, "", &errs);
  r.OnlyKnown({"listen", "db", "store", "store_prefix", "etcd_max_txn_ops", "etcd_max_request_bytes",
               "findings_retention_days", "inventory", "port_file", "tokens", "tokens_file", "job_policy",
               "max_connections", "max_connections_per_address", "body_budget", "topology_levels",
               "default_gpu_memory_gib", "min_spares_per_leaf", "min_spares_per_spine", "body_limit",
               "header_limit", "idle_timeout_s", "shutdown_grace_s", "tick_interval_s", "log_level",
               "advertise_url", "client_urls", "node_heartbeat_timeout_s", "stop_timeout_s",
               "remediation_hook", "health_check_passes", "lateness_threshold_s", "agent_lease_s", "slurm",
               "unknown_process_timeout_s", "run_as", "slurm_users",
               // Fleet scale: queue bounds, quotas, the test hook.
               "queue_priority", "queue_write", "queue_read", "max_nodes", "max_active_jobs_per_submitter",
               "test_hooks",
               // Body budget and connection caps by class and identity.
               "max_connections_per_identity", "max_connections_per_rank_token", "max_connections_per_rank",
               "body_reserve_liveness", "body_share_per_identity", "body_share_low_role",
               "body_budget_low_roles", "body_min_rate", "body_rate_grace_s", "read_timeout_s", "ui_dir",
               "heartbeats_per_node_s", "reports_per_rank_s",
               // Events (docs/events.md).
               "event_retention", "webhooks",
               // Replicas (daemon/leadership.h).
               "leader_ttl_s", "replica_id", "follower_read_max_age_s", "follower_renewal_max_age_s"});
  if (auto v = r.String("listen", false)) c->listen = *v;
  if (auto v = r.String("db", false, 4096)) c->db = *v;
  if (auto v = r.String("store", false, 8192)) {
    if (auto loc = ParseStoreLocation(*v); !loc.ok())
      r.Error("store", loc.status().message());
    else
      c->store = *v;
  }
  if (auto v = r.String("store_prefix", false, 1024)) c->store_prefix = *v;
  if (auto v = r.Number("etcd_max_txn_ops", false, 128, 10000000)) c->etcd_max_txn_ops = static_cast<int>(*v);
  if (auto v = r.Number("etcd_max_request_bytes", false, 1536 * 1024, 1LL << 31))
    c->etcd_max_request_bytes = static_cast<int64_t>(*v);
  if (auto v = r.Number("findings_retention_days", false, 0, 36500))
    c->controller.finding_retention.max_age_s = *v * 86400;
  if (auto v = r.String("inventory", false, 4096)) c->inventory = *v;
  if (auto v = r.String("port_file", false, 4096)) c->port_file = *v;
  if (auto v = r.String("log_level", false)) {
    if (ValidLogLevel(*v))
      c->log_level = *v;
    else
      r.Error("log_level", "must be one of trace, debug, info, warn, error, critical, off");
  }
  if (auto v = r.String("advertise_url", false, 1024)) c->advertise_url = *v;
  if (auto v = r.Number("leader_ttl_s", false, 2, 3600)) c->leader_ttl_s = static_cast<int64_t>(*v);
  if (auto v = r.String("replica_id", false, 256)) c->replica_id = *v;
  if (auto v = r.Number("follower_read_max_age_s", false, 0, 3600)) c->follower_read_max_age_s = *v;
  if (auto v = r.Number("follower_renewal_max_age_s", false, 0, 60)) c->follower_renewal_max_age_s = *v;
  if (auto v = r.String("client_urls", false, 8192)) {
    if (Result<std::vector<std::string>> urls = net::ParseEndpointList(*v); urls.ok())
      c->client_urls = net::JoinEndpoints(*urls);
    else
      r.Error("client_urls", urls.status().message());
  }
  if (auto v = r.Number("node_heartbeat_timeout_s", false, 0.1, 86400))
    c->controller.node_heartbeat_timeout_s = *v;
  if (auto v = r.Number("stop_timeout_s", false, 0, 3600)) c->controller.stop_timeout_s = *v;
  // At least 3 s: agents SIGTERM their ranks 2 s before the lease ends and heartbeat every second, so a
  // shorter lease fences healthy agents (docs/agent-protocol.md, "Lease").
  if (auto v = r.Number("agent_lease_s", false, 3, 86400)) c->controller.agent_lease_s = *v;
  if (auto v = r.Number("unknown_process_timeout_s", false, 0, 365 * 86400))
    c->controller.unknown_process_timeout_s = *v;
  if (auto v = r.Int("health_check_passes", false, 1, 1000)) c->controller.health_check_passes = int(*v);
  auto strings = [&](const char* key, std::vector<std::string>* out) {
    const Json* a = r.Find(key);
    if (!a) return;
    if (!a->is_array()) return r.Error(key, "must be an array of strings");
    out->clear();
    for (const auto& s : *a) {
      if (!s.is_string() || s.get_ref<const std::string&>().empty())
        return r.Error(key, "must be an array of non-empty strings");
      out->push_back(s.get<std::string>());
    }
  };
  strings("remediation_hook", &c->remediation_hook);
  if (r.Find("tokens"))
    r.Error("tokens", "tokens are no longer accepted in the configuration; use tokens_file (mode 0600)");
  if (auto v = r.String("tokens_file", false, 4096)) c->tokens_file = *v;
  if (auto v = r.String("ui_dir", false, 4096)) c->ui_dir = *v;
  if (auto v = r.Int("max_connections", false, 1, 1 << 24)) c->max_connections = size_t(*v);
  if (auto v = r.Int("max_connections_per_address", false, 1, 1 << 24))
    c->max_connections_per_address = size_t(*v);
  if (auto v = r.Int("body_budget", false, 1024, 1LL << 40)) c->body_budget = size_t(*v);
  if (auto v = r.Int("max_connections_per_identity", false, 1, 1 << 24))
    c->max_connections_per_identity = size_t(*v);
  if (auto v = r.Int("max_connections_per_rank_token", false, 1, 1 << 24))
    c->max_connections_per_rank_token = size_t(*v);
  if (auto v = r.Int("max_connections_per_rank", false, 1, 1 << 24)) c->max_connections_per_rank = size_t(*v);
  if (auto v = r.Int("body_reserve_liveness", false, 0, 1LL << 40)) c->body_reserve_liveness = size_t(*v);
  if (auto v = r.Int("body_share_per_identity", false, 1024, 1LL << 40))
    c->body_share_per_identity = size_t(*v);
  if (auto v = r.Int("body_share_low_role", false, 1024, 1LL << 40)) c->body_share_low_role = size_t(*v);
  if (auto v = r.Int("body_budget_low_roles", false, 1024, 1LL << 40)) c->body_budget_low_roles = size_t(*v);
  if (auto v = r.Int("body_min_rate", false, 0, 1LL << 40)) c->body_min_rate = size_t(*v);
  if (auto v = r.Number("body_rate_grace_s", false, 0.01, 3600)) c->body_rate_grace_s = *v;
  if (auto v = r.Number("read_timeout_s", false, 0.01, 86400)) c->read_timeout_s = *v;
  if (auto v = r.Number("heartbeats_per_node_s", false, 0, 1e6)) c->heartbeats_per_node_s = *v;
  if (auto v = r.Number("reports_per_rank_s", false, 0, 1e6)) c->reports_per_rank_s = *v;
  if (c->body_reserve_liveness >= c->body_budget)
    r.Error("body_reserve_liveness", "must be less than body_budget (the rest is what other requests share)");
  if (auto v = r.Int("queue_priority", false, 1, 1 << 24)) c->queues.priority = size_t(*v);
  if (auto v = r.Int("queue_write", false, 1, 1 << 24)) c->queues.write = size_t(*v);
  if (auto v = r.Int("queue_read", false, 1, 1 << 24)) c->queues.read = size_t(*v);
  if (auto v = r.Int("max_nodes", false, 0, 1 << 24)) c->quotas.max_nodes = int(*v);
  if (auto v = r.Int("max_active_jobs_per_submitter", false, 0, 1 << 24))
    c->quotas.max_active_jobs_per_submitter = int(*v);
  if (auto v = r.Bool("test_hooks")) c->test_hooks = *v;
  if (const Json* p = r.Find("job_policy")) {
    FieldReader jp(*p, "job_policy", &errs);
    jp.OnlyKnown({"command_prefixes", "refused_env", "refused_env_prefixes", "allowed_env", "env_allow",
                  "sbatch_options", "allowed_sbatch_options"});
    auto list = [&](const Json* a, const std::string& key, std::vector<std::string>* out) {
      if (!a) return;
      if (!a->is_array()) return jp.Error(key, "must be an array of strings");
      out->clear();
      for (const auto& s : *a) {
        if (!s.is_string() || s.get_ref<const std::string&>().empty())
          return jp.Error(key, "must be an array of non-empty strings");
        out->push_back(s.get<std::string>());
      }
    };
    if (jp.ok()) {
      list(jp.Find("refused_env"), jp.Path("refused_env"), &c->job_policy.refused_env);
      list(jp.Find("refused_env_prefixes"), jp.Path("refused_env_prefixes"),
           &c->job_policy.refused_env_prefixes);
      list(jp.Find("allowed_env"), jp.Path("allowed_env"), &c->job_policy.allowed_env);
      if (const Json* a = jp.Find("env_allow")) {
        c->job_policy.env_allow.emplace();
        list(a, jp.Path("env_allow"), &*c->job_policy.env_allow);
      }
      for (const char* key : {"sbatch_options", "allowed_sbatch_options"}) {
        std::vector<std::string>* out = std::string(key) == "sbatch_options"
                                            ? &c->job_policy.sbatch_options
                                            : &c->job_policy.allowed_sbatch_options;
        list(jp.Find(key), jp.Path(key), out);
        for (const std::string& o : *out)
          if (!ValidSbatchOptionSpec(o))
            jp.Error(jp.Path(key),
                     "\"" + o + "\" is not \"--name=\" (an option with a value) or \"--name\" (a flag)");
      }
      if (const Json* cp = jp.Find("command_prefixes")) {
        if (!cp->is_array()) {
          jp.Error(jp.Path("command_prefixes"), "must be an array of arrays of strings");
        } else {
          c->job_policy.command_prefixes.clear();
          for (size_t i = 0; i < cp->size(); ++i) {
            std::vector<std::string> one;
            const std::string key = jp.Path("command_prefixes") + "[" + std::to_string(i) + "]";
            list(&(*cp)[i], key, &one);
            if (one.empty()) jp.Error(key, "must be a non-empty array of strings");
            c->job_policy.command_prefixes.push_back(std::move(one));
          }
        }
      }
    }
  }
  if (const Json* ra = r.Find("run_as")) {
    // {"<job owner>": "<Unix user>", "*": "<user for everyone else>"}: the user each job's ranks run as.
    if (!ra->is_object()) {
      r.Error("run_as", "must be an object of job owner -> Unix user name");
    } else {
      c->controller.run_as.clear();
      for (const auto& [owner, user] : ra->items()) {
        const bool name_ok = user.is_string() && ValidUnixUser(user.get_ref<const std::string&>());
        if (!name_ok || owner.empty()) {
          r.Error("run_as." + owner, "must be a Unix user name (letters, digits, '.', '_', '-')");
          continue;
        }
        c->controller.run_as[owner] = user.get<std::string>();
      }
    }
  }
  if (const Json* su = r.Find("slurm_users")) {
    if (!su->is_object()) {
      r.Error("slurm_users", "must be an object of token name -> Unix user name");
    } else {
      c->slurm.users.clear();
      for (const auto& [name, user] : su->items()) {
        if (!user.is_string() || !ValidUnixUser(user.get_ref<const std::string&>()) || name.empty()) {
          r.Error("slurm_users." + name, "must be a Unix user name (letters, digits, '.', '_', '-')");
          continue;
        }
        c->slurm.users[name] = user.get<std::string>();
      }
    }
  }
  if (const Json* sl = r.Find("slurm")) {
    FieldReader sr(*sl, "slurm", &errs);
    sr.OnlyKnown({"enabled", "slurm_conf", "reconcile_interval_s", "command_timeout_s", "launch_poll_s",
                  "rank_exec", "step_log_dir", "request_gpus", "rank_table_dir"});
    if (sr.ok()) {
      c->slurm.enabled = sr.Bool("enabled").value_or(true);
      if (auto v = sr.String("slurm_conf", false, 4096)) c->slurm.slurm_conf = *v;
      if (auto v = sr.Number("reconcile_interval_s", false, 0.1, 86400)) c->slurm.reconcile_interval_s = *v;
      if (auto v = sr.Number("command_timeout_s", false, 1, 3600)) c->slurm.command_timeout_s = *v;
      if (auto v = sr.Number("launch_poll_s", false, 0.05, 3600)) c->slurm.launch_poll_s = *v;
      if (auto v = sr.String("rank_exec", false, 4096)) c->slurm.rank_exec = *v;
      if (auto v = sr.String("step_log_dir", false, 4096)) c->slurm.step_log_dir = *v;
      if (auto v = sr.Bool("request_gpus")) c->slurm.request_gpus = *v;
      if (auto v = sr.String("rank_table_dir", false, 4096)) c->slurm.rank_table_dir = *v;
    }
  }
  if (const Json* er = r.Find("event_retention")) {
    FieldReader rr(*er, "event_retention", &errs);
    rr.OnlyKnown({"max_events", "max_age_days"});
    if (rr.ok()) {
      if (auto v = rr.Int("max_events", false, 1, 1LL << 32)) c->controller.event_retention.max_events = *v;
      if (auto v = rr.Number("max_age_days", false, 0.001, 36500))
        c->controller.event_retention.max_age_s = *v * 86400;
    }
  }
  if (const Json* wh = r.Find("webhooks")) {
    if (!wh->is_array()) r.Error("webhooks", "must be an array of {url, events, secret_file}");
    for (std::size_t i = 0; wh->is_array() && i < wh->size(); ++i) {
      const std::string at = "webhooks[" + std::to_string(i) + "]";
      FieldReader w((*wh)[i], at, &errs);
      w.OnlyKnown({"url", "events", "secret_file"});
      if (!w.ok()) continue;
      WebhookConfig hook;
      if (auto v = w.String("url", true, 2048)) {
        if (v->rfind("http://", 0) != 0 || v->size() <= 7)
          w.Error(w.Path("url"), "must be an http:// URL (TLS is not supported)");
        hook.url = *v;
      }
      if (auto v = w.String("secret_file", true, 4096)) hook.secret_file = *v;
      if (const Json* ev = w.Find("events")) {
        if (!ev->is_array()) w.Error(w.Path("events"), "must be an array of event types");
        for (const Json& t : ev->is_array() ? *ev : Json::array()) {
          auto type = t.is_string() ? EventTypeFromString(t.get<std::string>()) : std::nullopt;
          if (type)
            hook.events.insert(*type);
          else
            w.Error(w.Path("events"), "must name event types: finding, action, job_state, node_state");
        }
      }
      c->webhooks.push_back(std::move(hook));
    }
  }
  strings("topology_levels", &c->controller.levels);
  if (c->controller.levels.empty()) r.Error("topology_levels", "must name at least one level");
  if (auto v = r.Number("default_gpu_memory_gib", false, 1, 1 << 20))
    c->controller.default_gpu_memory_gib = *v;
  if (auto v = r.Int("min_spares_per_leaf", false, 0, 1 << 20)) c->controller.min_spares_per_leaf = int(*v);
  if (auto v = r.Int("min_spares_per_spine", false, 0, 1 << 20)) c->controller.min_spares_per_spine = int(*v);
  if (auto v = r.Int("body_limit", false, 1024, 1LL << 32)) c->body_limit = size_t(*v);
  if (auto v = r.Int("header_limit", false, 1024, 1 << 20)) c->header_limit = size_t(*v);
  if (auto v = r.Number("idle_timeout_s", false, 0.01, 86400)) c->idle_timeout_s = *v;
  if (auto v = r.Number("shutdown_grace_s", false, 0, 3600)) c->shutdown_grace_s = *v;
  if (auto v = r.Number("tick_interval_s", false, 0.01, 60)) c->tick_interval_s = *v;
  if (auto v = r.Number("lateness_threshold_s", false, 0.1, 3600)) c->lateness_threshold_s = *v;
  if (!errs.empty()) {
    std::string msg = path + ": invalid configuration:";
    for (const auto& e : errs) msg += " " + e.field + " " + e.message + ";";
    return InvalidArgument(msg);
  }
  return Status::Ok();
}

namespace {
bool HasIndex(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::is_regular_file(dir + "/index.html", ec);
}
}  // namespace

std::string DefaultUiDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string build = SHEPHERD_BUILD_DIR;
  const bool in_build_tree = !ec && exe.string().rfind(build + "/", 0) == 0;
  for (const std::string& dir : in_build_tree ? std::vector<std::string>{SHEPHERD_UI_SOURCE_DIR}
                                              : std::vector<std::string>{SHEPHERD_UI_INSTALL_DIR})
    if (HasIndex(dir)) return dir;
  return "";
}

Status CheckUiDir(const std::string& dir) {
  if (HasIndex(dir)) return Status::Ok();
  return InvalidArgument("ui_dir " + dir +
                         ": no index.html there (the dashboard's files, ui/ of the source)");
}

Status SplitHostPort(const std::string& s, std::string* host, uint16_t* port) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return InvalidArgument("--listen must be HOST:PORT, got " + s);
  std::string p = s.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(p) > 65535)
    return InvalidArgument("--listen port must be 0-65535, got " + p);
  *host = s.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  *port = static_cast<uint16_t>(std::stoi(p));
  return Status::Ok();
}

Result<std::vector<std::pair<Node, bool>>> LoadInventoryFile(const std::string& path,
                                                             const TopologyLevels& levels) {
  auto j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  if (!j->is_object() || !j->contains("nodes") || !(*j)["nodes"].is_array())
    return InvalidArgument(path + ": must be an object {\"nodes\": [...]}");
  std::vector<std::pair<Node, bool>> out;
  const Json& nodes = (*j)["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto n = ParseNode(nodes[i], levels);
    if (!n.ok()) {
      std::string msg = path + ": nodes[" + std::to_string(i) + "]:";
      for (const auto& e : n.status().fields()) msg += " " + e.field + " " + e.message + ";";
      return InvalidArgument(msg);
    }
    out.emplace_back(std::move(n).value(), nodes[i].contains("schedulable"));
  }
  return out;
}

}  // namespace shepherd
