// The Store (storage/store.h) kept in an etcd 3.4 cluster, for replicated control planes: every record is
// one key `<prefix>/r/<collection>/<key>`, written by the store's writer thread in etcd transactions.
//
// Contract beyond Store's:
// - Fenced writes. With a fence, every transaction also compares the leader key's create_revision with the
//   fence's; when that compare fails (another replica leads, or this one's lease expired) the store fails
//   with kFailedPrecondition ("leadership lost") and writes nothing more: the daemon steps down.
// - etcd's limits. A group commit larger than `max_ops_per_txn` operations or `max_txn_bytes` bytes is split
//   into several transactions, each fenced (the split loses the group's atomicity across batches only, which
//   Store never promised). A batch larger than one transaction is staged (storage/etcd_stage.h): its
//   operations go in chunks under `<prefix>/stage/<id>/`, one fenced transaction writes the stage's commit
//   key (the batch's commit point, when `done` may say ok), then fenced transactions apply it to the records
//   and delete the stage, before any later batch is written. Load overlays a committed stage that was not
//   yet fully applied (a writer stopped mid-apply) on the records and ignores an uncommitted one, so every
//   reader sees each batch whole or not at all. The writer, before its first write (fenced, so a deposed
//   leader cannot), finishes applying a committed stage and deletes uncommitted ones. Only a single record
//   larger than one request (`max_txn_bytes`) is refused: kInvalidArgument, and the store fails, as SQLite
//   would on a write it cannot make.
// - History is compacted: after every `compact_every` revisions the writer compacts to the current revision.
// - Start-up refusals (OpenEtcdStore): no endpoint answers (kUnavailable, naming them); the prefix holds keys
//   that are not Shepherd's (no `<prefix>/schema` key but other keys under the prefix: kFailedPrecondition,
//   nothing written); a schema newer than this binary's (kFailedPrecondition, nothing written).
//
// Layout: `<prefix>/schema` (the layout version, decimal), `<prefix>/r/<collection>/<key>` (a record; its
// value is "<seq>,<job length>,<job><body>", seq being the record's place in Load's order: kept by an
// upsert, new after an erase), `<prefix>/quarantine/<collection>/<key>` (a JSON object: job, body, reason,
// at), `<prefix>/stage/...` (staged batches, above). `<prefix>/leader...` is left to leader election.
//
// Threading: as Store (Write and Flush thread-safe; `done` on the writer thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/store.h"

namespace shepherd {

// The leader key the writes are guarded by, and the create_revision it had when this replica won.
struct EtcdFence {
  std::string leader_key;
  int64_t create_revision = 0;
};

struct EtcdStoreOptions {
  std::vector<std::string> endpoints;  // "http://host:port"
  std::string prefix = "/shepherd";    // no trailing slash
  std::optional<EtcdFence> fence;      // none: unfenced (single writer, tools such as import)
  int max_ops_per_txn = 128;           // etcd's --max-txn-ops default
  // Keys and values per transaction, under etcd's 1.5 MiB --max-request-bytes default (which counts them
  // raw, as protobuf) with room for the compares and framing.
  int64_t max_txn_bytes = 5 << 18;          // 1.25 MiB
  int64_t compact_every = 10000;            // revisions between compactions
  std::chrono::milliseconds timeout{5000};  // per etcd call and endpoint
  // How long a write waits while no etcd member answers (no quorum, every endpoint down) before the store
  // fails: the writer thread waits, as SQLite's lock wait does, and the daemon goes on answering.
  // 120 s, as SQLite's lock wait: an etcd that loses quorum for 30 s (a member rebooting while another is
  // down) costs the daemon nothing but the wait.
  std::chrono::milliseconds unavailable_wait{120000};
  int max_batches_per_commit = 1024;  // group-commit bound (then split into transactions)
  // For tests: called on the writer thread at each point of a staged write; returning false stops the
  // writer there as if its process had died (the store fails with kUnavailable and writes nothing more).
  enum class StagePoint { kChunksWritten, kCommitted, kPartlyApplied };
  std::function<bool(StagePoint)> stage_hook;
};

// Batches this process staged (committed through the stage area) since it started, over every etcd store
// it opened: shepherd_store_staged_batches_total.
uint64_t EtcdStagedBatchesTotal();

// The layout version under the prefix (`<prefix>/schema`), as PRAGMA user_version is for SQLite.
inline constexpr int kEtcdSchemaVersion = 1;

// Connects, checks the prefix (see above; writes `<prefix>/schema` when the prefix is empty), and starts
// the writer thread.
Result<std::unique_ptr<Store>> OpenEtcdStore(const EtcdStoreOptions& options);

// Where the daemon keeps its state, from --store: "sqlite://PATH" (PATH as --db took it) or
// "etcd://HOST:PORT[,HOST:PORT...]". kInvalidArgument naming the text otherwise.
struct StoreLocation {
  enum class Kind { kSqlite, kEtcd };
  Kind kind = Kind::kSqlite;
  std::string path;                    // kSqlite
  std::vector<std::string> endpoints;  // kEtcd, as "http://host:port"
};
Result<StoreLocation> ParseStoreLocation(const std::string& text);

}  // namespace shepherd
