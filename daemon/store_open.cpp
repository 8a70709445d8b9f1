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

Result<std::unique_ptr<Store>> OpenConfiguredStore(const DaemonConfig& config,
                                                   std::optional<EtcdFence> fence) {
  Result<StoreLocation> location = ConfiguredStore(config);
  if (!location.ok()) return location.status();
  return OpenStoreAt(*location, config.store_prefix, std::move(fence));
}

std::string DescribeStore(const DaemonConfig& config) {
  Result<StoreLocation> location = ConfiguredStore(config);
  if (!location.ok() || location->kind == StoreLocation::Kind::kSqlite) return "database " + config.db;
  std::string hosts;
  for (const std::string& e : location->endpoints) hosts += (hosts.empty() ? "" : ",") + e;
  return "etcd " + hosts + " prefix " + config.store_prefix;
}

}  // namespace shepherd
