// EtcdClient: the calls Shepherd makes to an etcd 3.4 cluster, through etcd's v3 HTTP/JSON gateway
// (POST /v3/kv/range, /v3/kv/txn, /v3/kv/compaction, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke,
// /v3/maintenance/status) over net::HttpClient. Keys and values are bytes here; the base64 and the
// int64-as-string of the gateway's JSON stay inside etcd_client.cpp.
//
// Endpoints: every call goes to the current endpoint; a transport failure (refused, reset, timeout) or a
// gateway answer that the member has no leader moves to the next endpoint and retries, until every endpoint
// was tried once; then the call fails with kUnavailable naming the endpoints and the last error. An answer
// etcd gave (an error code in the body, a compare that failed) is never retried.
//
// Threading: one call at a time per client (it owns one connection per endpoint); use one client per thread.
// Cancel() may be called from any thread and fails every call in flight and after it with kUnavailable.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace shepherd::net {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0 when the key is attached to no lease
};

// A txn's compare (etcd's Compare): `key`'s target field against the given number or value.
struct EtcdCompare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kCreateRevision;
  Result result = Result::kEqual;
  int64_t number = 0;  // for the revision and version targets
  std::string value;   // for kValue
};

// A txn's operation: a put (attached to `lease` when non-zero), a delete of one key, or a delete of every
// key under a prefix (`prefix` true: `key` is the prefix).
struct EtcdOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;
  int64_t lease = 0;
  bool prefix = false;
};

struct EtcdTxnResult {
  bool succeeded = false;  // whether the compares held (and the ops ran)
  int64_t revision = 0;    // the store's revision after the txn
};

struct EtcdRangeResult {
  std::vector<EtcdKeyValue> kvs;  // in key order
  int64_t revision = 0;           // the store's revision the range was read at
  bool more = false;              // `limit` cut the answer short
};

struct EtcdClientOptions {
  std::vector<std::string> endpoints;  // "http://host:port", at least one
  std::chrono::milliseconds timeout{5000};  // per call and endpoint, connect included
};

// The smallest key greater than every key that starts with `prefix` (etcd's range_end for a prefix).
std::string EtcdPrefixEnd(const std::string& prefix);

class EtcdClient {
 public:
  // kInvalidArgument when there is no endpoint or one is not http://host:port.
  static Result<std::unique_ptr<EtcdClient>> Create(const EtcdClientOptions& options);
  virtual ~EtcdClient() = default;

  // Every key in [key, range_end) with range_end the prefix's successor when `prefix`, else just `key`;
  // at most `limit` keys when non-zero (then `more` says whether there were others), read at `revision`
  // when non-zero. Keys only (values empty) when `keys_only`.
  virtual Result<EtcdRangeResult> Range(const std::string& key, bool prefix, int64_t limit = 0,
                                        int64_t revision = 0, bool keys_only = false) = 0;

  // Every key in [from, end) (etcd's key and range_end; `end` from EtcdPrefixEnd for "the rest of a
  // prefix"): paging through a prefix resumes at the last key seen plus "\0". Otherwise as Range.
  virtual Result<EtcdRangeResult> RangeBetween(const std::string& from, const std::string& end, int64_t limit,
                                               int64_t revision = 0, bool keys_only = false) {
    (void)from, (void)end, (void)limit, (void)revision, (void)keys_only;
    return Internal("RangeBetween is not implemented by this EtcdClient");
  }

  // One transaction: when every compare holds, `success` runs, else `failure` (its gets are not returned;
  // use Range). etcd limits a txn to 128 operations and a request to 1.5 MiB by default: the caller splits.
  virtual Result<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                                    const std::vector<EtcdOp>& failure = {}) = 0;

  // A lease of `ttl_s` seconds; its id.
  virtual Result<int64_t> LeaseGrant(int64_t ttl_s) = 0;
  // Renews lease `id`; the TTL it now has left, 0 when the lease had already expired (or never existed).
  virtual Result<int64_t> LeaseKeepAlive(int64_t id) = 0;
  // Ends lease `id` and deletes its keys. An unknown lease is not an error.
  virtual shepherd::Status LeaseRevoke(int64_t id) = 0;

  // Discards history before `revision` (kv/compaction, physical).
  virtual shepherd::Status Compact(int64_t revision) = 0;

  // The current endpoint's member status: the database size in bytes, and whether the member sees a leader
  // (kUnavailable when it does not: the cluster has no quorum).
  struct MemberStatus {
    int64_t db_size = 0;
    int64_t revision = 0;
    std::string endpoint;
  };
  virtual Result<MemberStatus> MemberHealth() = 0;

  // Thread-safe; see above.
  virtual void Cancel() = 0;
};

}  // namespace shepherd::net
