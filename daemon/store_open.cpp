#include "daemon/store_open.h"

namespace shepherd {

Result<std::unique_ptr<Store>> OpenStoreAt(const StoreLocation& location, const std::string& prefix,
                                           std::optional<EtcdFence> fence) {
  if (location.kind == StoreLocation::Kind::kSqlite) {
    if (fence) return InvalidArgument("a fenced store needs etcd, not SQLite " + location.path);
    return OpenSqliteStore(location.path);
  }
  EtcdStoreOptions options;
  options.endpoints = location.endpoints;
  options.prefix = prefix;
  options.fence = std::move(fence);
  return OpenEtcdStore(options);
}

EtcdStoreOptions EtcdOptionsFor(const DaemonConfig& config, const StoreLocation& location) {
  EtcdStoreOptions options;
  options.endpoints = location.endpoints;
  options.prefix = config.store_prefix;
  options.max_ops_per_txn = config.etcd_max_txn_ops;
  options.max_txn_bytes = config.etcd_max_request_bytes / 6 * 5;
  return options;
}

Result<std::unique_ptr<Store>> OpenConfiguredStore(const DaemonConfig& config,
                                                   std::optional<EtcdFence> fence) {
  Result<StoreLocation> location = ConfiguredStore(config);
  if (!location.ok()) return location.status();
  if (location->kind == StoreLocation::Kind::kSqlite) return OpenStoreAt(*location, config.store_prefix, fence);
  EtcdStoreOptions options = EtcdOptionsFor(config, *location);
  options.fence = std::move(fence);
  return OpenEtcdStore(options);
}

std::string DescribeStore(const DaemonConfig& config) {
  Result<StoreLocation> location = ConfiguredStore(config);
  if (!location.ok() || location->kind == StoreLocation::Kind::kSqlite) return "database " + config.db;
  std::string hosts;
  for (const std::string& e : location->endpoints) hosts += (hosts.empty() ? "" : ",") + e;
  return "etcd " + hosts + " prefix " + config.store_prefix;
}

}  // namespace shepherd
