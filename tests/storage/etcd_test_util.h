// Helpers for tests of the etcd store against real members (tests/fakes/etcd_cluster.h): a raw client to
// look behind the store's back, the store's options, opening and loading with the failure reported.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "net/etcd_client.h"
#include "storage/etcd_store.h"
#include "tests/fakes/etcd_cluster.h"

namespace shepherd::testing {

inline std::unique_ptr<net::EtcdClient> Raw(const EtcdCluster& etcd) {
  auto c = net::EtcdClient::Create(net::EtcdClientOptions{.endpoints = etcd.endpoints()});
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c).value();
}

// Every key under `prefix` with its value, read behind the store's back.
inline std::map<std::string, std::string> Keys(const EtcdCluster& etcd, const std::string& prefix) {
  auto r = Raw(etcd)->Range(prefix, true);
  EXPECT_TRUE(r.ok()) << r.status().message();
  std::map<std::string, std::string> out;
  if (r.ok())
    for (auto& kv : r->kvs) out[kv.key] = kv.value;
  return out;
}

inline int64_t Revision(const EtcdCluster& etcd) {
  auto r = Raw(etcd)->Range("/", true, 1, 0, true);
  return r.ok() ? r->revision : -1;
}

inline EtcdStoreOptions Options(const EtcdCluster& etcd, std::string prefix = "/shepherd") {
  return EtcdStoreOptions{.endpoints = etcd.endpoints(), .prefix = std::move(prefix)};
}

inline std::unique_ptr<Store> Open(const EtcdStoreOptions& options) {
  Result<std::unique_ptr<Store>> r = OpenEtcdStore(options);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : nullptr;
}

inline Snapshot LoadOrDie(Store& store) {
  Result<Snapshot> s = store.Load();
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : Snapshot{};
}

}  // namespace shepherd::testing
