// One term of serving, and the replica loop around it. ServeTerm (daemon/serve.cpp) is the daemon's whole
// path over an open store: the only daemon on SQLite runs one term; a replica over etcd (RunReplica,
// daemon/replica.cpp) runs one per leadership it wins. Main thread.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "daemon/config.h"
#include "daemon/leadership.h"
#include "storage/etcd_store.h"
#include "storage/store.h"

namespace shepherd {

// How a term of serving ended: the exit code (SIGTERM: 0, a storage failure: 1), or deposed (leadership
// lost: the replica follows again).
struct TermEnd {
  int exit_code = 0;
  bool deposed = false;
};

struct TermContext {
  Store* store = nullptr;
  std::string store_name;            // for log lines
  Leadership* leadership = nullptr;  // null: the only daemon (SQLite); nothing is guarded
  uint16_t port = 0;                 // where to listen
  bool write_port_file = true;       // the first bind writes it; replicas write it once
};

// The daemon's whole path over an open store: recover, serve, tick, until SIGTERM/SIGINT, a storage failure,
// or (with leadership) the end of this replica's term (daemon/serve.cpp).
TermEnd ServeTerm(const DaemonConfig& config, const TermContext& term);

// A replica over an etcd store: follower -> (wins) leader -> (loses) follower, until SIGTERM/SIGINT; the
// process's exit code.
int RunReplica(const DaemonConfig& config, const StoreLocation& location);

// Writes `port` to `path` atomically (write + rename).
Status WritePortFile(const std::string& path, uint16_t port);

}  // namespace shepherd
