// Daemon configuration: defaults, then the --config JSON file, then command-line flags.
#pragma once

#include <string>
#include <vector>

#include "control/controller.h"
#include "core/status.h"

namespace shepherd {

struct DaemonConfig {
  std::string listen = "127.0.0.1:8080";
  std::string db = "./var/shepherd.db";
  std::string inventory;  // optional JSON file {"nodes": [...]}
  std::string port_file;
  std::string advertise_url;  // SHEPHERD_URL for ranks; default http://<listen host>:<bound port>
  std::vector<std::string> tokens;
  // Command (argv) run with a finding's JSON on stdin for jobs whose policy.external_remediation is "hook".
  std::vector<std::string> remediation_hook;
  ControllerOptions controller;
  size_t body_limit = 4 << 20;
  size_t header_limit = 16 << 10;
  double idle_timeout_s = 30;
  double shutdown_grace_s = 10;
  double tick_interval_s = 1;
  std::string log_level = "info";
};

// Reads `path` (a JSON object with any of the fields above; topology_levels, min_spares_per_leaf, ...).
Status LoadConfigFile(const std::string& path, DaemonConfig* config);
// "host:port" -> parts. kInvalidArgument when malformed.
Status SplitHostPort(const std::string& s, std::string* host, uint16_t* port);
// Reads an inventory file: {"nodes": [node objects as in POST /v1/nodes]}. Errors name the node index.
Result<std::vector<std::pair<Node, bool>>> LoadInventoryFile(const std::string& path,
                                                             const TopologyLevels& levels);

}  // namespace shepherd
