// Opening the daemon's store: SQLite at --db / --store sqlite://PATH, or etcd at --store etcd://... under
// --store-prefix (docs/operations.md, "Store: SQLite or etcd"). The one place serve.cpp and the store
// subcommands open a store. Main thread, at start-up.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "daemon/config.h"
#include "storage/etcd_store.h"
#include "storage/store.h"

namespace shepherd {

// The store `location` names: SQLite (its lock refuses a database another process holds), or etcd under
// `prefix`, fenced by `fence` when given (a replica that won leadership; kInvalidArgument with SQLite).
Result<std::unique_ptr<Store>> OpenStoreAt(const StoreLocation& location, const std::string& prefix,
                                           std::optional<EtcdFence> fence = std::nullopt);

// The etcd store's options for the daemon's configuration: `prefix`, and transactions sized to the cluster's
// limits (etcd_max_txn_ops; 5/6 of etcd_max_request_bytes for keys and values, the rest for framing).
EtcdStoreOptions EtcdOptionsFor(const DaemonConfig& config, const StoreLocation& location);

// The store the daemon's configuration names (ConfiguredStore), opened as OpenStoreAt does.
Result<std::unique_ptr<Store>> OpenConfiguredStore(const DaemonConfig& config,
                                                   std::optional<EtcdFence> fence = std::nullopt);

// "database PATH" or "etcd http://h:p,... prefix P": where state is, for log lines.
std::string DescribeStore(const DaemonConfig& config);

}  // namespace shepherd
