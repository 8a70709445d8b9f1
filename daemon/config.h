// Daemon configuration: defaults, then the --config JSON file, then command-line flags.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "api/handlers.h"
#include "api/request_queue.h"
#include "control/controller.h"
#include "core/job_policy.h"
#include "core/status.h"
#include "daemon/webhooks.h"
#include "storage/etcd_store.h"

namespace shepherd {

// `--slurm` / "slurm": {...}: the inventory comes from a Slurm cluster and is kept in sync (docs/slurm.md).
struct SlurmConfig {
  bool enabled = false;
  std::string slurm_conf;            // empty: SLURM_CONF from the environment
  double reconcile_interval_s = 10;  // how often Slurm's nodes are read and reconciled
  double command_timeout_s = 30;     // per Slurm command
  // launcher "slurm" (daemon/slurm_launch_worker.h): how often the launch worker looks at its allocations and
  // steps, the wrapper srun runs as every task (in PATH or absolute, the same on every node), and where
  // srun's output goes (default: "slurm-steps" beside the database).
  double launch_poll_s = 1;
  std::string rank_exec = "shepherd-slurm-rank";
  std::string step_log_dir;
  // Each step asks for its nodes' GPUs (srun --gres=gpu:N, docs/slurm.md "GPUs and ConstrainDevices"), so
  // sites that constrain devices with cgroups work. false: no --gres (nodes without GPU GRES in Slurm).
  bool request_gpus = true;
  // Where the steps' rank tables are read by the tasks: empty (default) copies each with sbcast to /tmp
  // on every node of the allocation; a directory every node sees at the same path skips the copy.
  std::string rank_table_dir;
  // "slurm_users": token name -> the Unix user it stands for in Slurm (binding a Slurm job id, requeues);
  // a name not listed stands for itself.
  std::map<std::string, std::string> users;
};

struct DaemonConfig {
  std::string listen = "127.0.0.1:8080";
  std::string db = "./var/shepherd.db";
  // Where state is kept (--store): empty means SQLite at `db`; "sqlite://PATH" is the same as db = PATH;
  // "etcd://HOST:PORT[,...]" keeps it in etcd under store_prefix (storage/etcd_store.h).
  std::string store;
  std::string store_prefix = "/shepherd";
  // The etcd cluster's own limits (its --max-txn-ops and --max-request-bytes), which size the etcd store's
  // transactions; a write larger than one is staged across several. Optional: raise both on the members
  // and here for fewer, larger transactions, or for a record over 1.25 MiB (docs/operations.md, "Store:
  // SQLite or etcd").
  int etcd_max_txn_ops = 128;
  int64_t etcd_max_request_bytes = 1536 * 1024;
  std::string inventory;  // optional JSON file {"nodes": [...]}
  std::string port_file;
  std::string advertise_url;  // SHEPHERD_URL for ranks; default http://<listen host>:<bound port>
  // Every replica's URL, comma-separated (net/endpoint_list.h's list), handed to ranks as SHEPHERD_URL in
  // place of advertise_url, so they fail over between replicas. Empty: advertise_url alone.
  std::string client_urls;
  // Command (argv) run with a finding's JSON on stdin for jobs whose policy.external_remediation is "hook".
  std::vector<std::string> remediation_hook;
  // Bearer credentials: a JSON file (api/auth.h), mode 0600, re-read on SIGHUP. Empty: auth is off (a
  // warning says so). Tokens never come from argv or the config file.
  std::string tokens_file;
  JobPolicy job_policy;            // "job_policy": what submitted jobs may run
  // All connections, and those of one client address without a credential (api/http_server.h): 16,896
  // agents (a long poll and a heartbeat connection each) behind one NAT or proxy address fit.
  size_t max_connections = 40000;
  size_t max_connections_per_address = 40000;
  // Per-sender request rates, 429 with Retry-After beyond (daemon/overload.h); 0: no limit.
  double heartbeats_per_node_s = 20;
  double reports_per_rank_s = 50;
  size_t body_budget = 256u << 20;  // bytes of request bodies buffered at once, all connections
  // Body budget and connection caps by class and identity (api/http_server.h, docs/security.md).
  size_t max_connections_per_identity = 64;
  // A rank token for any rank (a Slurm step's, another launcher's job's): all its ranks may share it.
  size_t max_connections_per_rank_token = 1024;
  // A rank token naming one rank (an attempt our agents launch): one rank's client needs a few.
  size_t max_connections_per_rank = 16;
  size_t body_reserve_liveness = 64u << 20;  // of body_budget, for heartbeats and reports only
  size_t body_share_per_identity = 16u << 20;
  size_t body_share_low_role = 4u << 20;     // viewers: each
  size_t body_budget_low_roles = 32u << 20;  // viewers: all together
  size_t body_min_rate = 16u << 10;          // bytes/s a body must average after body_rate_grace_s; 0: off
  double body_rate_grace_s = 5;
  double read_timeout_s = 30;  // a whole request (head and body) from its first byte
  RequestQueueLimits queues;   // "queue_priority", "queue_write", "queue_read": 429 beyond
  Quotas quotas;               // "max_nodes", "max_active_jobs_per_submitter" (0: no limit)
  bool test_hooks = false;     // POST /test/block-control (api/front_door.h); tests only
  ControllerOptions controller;
  size_t body_limit = 4 << 20;
  size_t header_limit = 16 << 10;
  double idle_timeout_s = 30;
  double shutdown_grace_s = 10;
  double tick_interval_s = 1;
  // A tick lag, control-queue age or stall of the control thread over this (at least 2 ticks) is the
  // daemon's own lateness: silence verdicts wait a full heartbeat window after it (health/lateness.h).
  double lateness_threshold_s = 2;
  // --salvage: records that cannot be decoded are moved aside (<collection>_quarantine) instead of
  // stopping start-up (docs/design-notes.md, "Start-up safety").
  bool salvage = false;
  std::string log_level = "info";
  SlurmConfig slurm;
  // "webhooks": [{"url", "events", "secret_file"}]: events POSTed to the site (daemon/webhooks.h).
  std::vector<WebhookConfig> webhooks;
  // The dashboard's files (/ui/). Empty: DefaultUiDir().
  std::string ui_dir;
  // Replicas over an etcd store (daemon/leadership.h, docs/operations.md "Replicas and leadership"):
  // the leader lease's TTL (at least 2 s) and this replica's name in the leader key (default host-pid).
  // Followers redirect clients to the leader's advertise_url.
  int64_t leader_ttl_s = 5;
  std::string replica_id;
  // A follower serves reads of durable state from a view no older than this (daemon/follower_reads.h);
  // 0: followers redirect every read to the leader.
  double follower_read_max_age_s = 1;
  // S: a follower that serves reads renews an agent's lease only from a view no older than this
  // (daemon/follower_lease.h), and a leader starts a lost node's replacements S later for it
  // (control/agent_board.h). The same on every replica (config file only); 0: followers renew no lease.
  double follower_renewal_max_age_s = 1;
};

// spdlog's level names: trace, debug, info, warn, error, critical, off (spdlog reads any other as off).
bool ValidLogLevel(const std::string& level);
// Where the dashboard's files are when no ui_dir is configured: the source tree's ui/ for a shepherdd run
// from its build tree (so a developer's build serves the files being edited), else the installed
// <datadir>/shepherd/ui. Empty when neither holds an index.html.
std::string DefaultUiDir();
// kInvalidArgument naming the option when `dir` holds no index.html.
Status CheckUiDir(const std::string& dir);
// The store the configuration names: `store` parsed, or SQLite at `db` when it is empty. kInvalidArgument
// naming the text (or the prefix) when malformed.
Result<StoreLocation> ConfiguredStore(const DaemonConfig& config);
// Reads `path` (a JSON object with any of the fields above; topology_levels, min_spares_per_leaf, ...).
Status LoadConfigFile(const std::string& path, DaemonConfig* config);
// "host:port" -> parts. kInvalidArgument when malformed.
Status SplitHostPort(const std::string& s, std::string* host, uint16_t* port);
// Reads an inventory file: {"nodes": [node objects as in POST /v1/nodes]}. Errors name the node index.
Result<std::vector<std::pair<Node, bool>>> LoadInventoryFile(const std::string& path,
                                                             const TopologyLevels& levels);

}  // namespace shepherd
