// Staged writes of the etcd store (storage/etcd_store.h): how a batch larger than one etcd transaction is
// kept under `<prefix>/stage/<id>/` until it is applied to its records. The encoding and StageArea are pure;
// WriteStaged, Apply and FinishLeftovers are the writer's steps over an injected `commit` (one fenced
// transaction, as the store runs it) and run on the store's writer thread; ReadArea reads through the
// caller's client (Load's, or the writer's).
//
// Layout of one staged batch `<id>` (20 decimal digits, the writer's etcd revision when it staged, so ids
// sort in the order the batches were written):
//   <prefix>/stage/<id>/<n>      chunk n (6 digits from 000000): a run of the batch's etcd operations,
//                                 each "p<key length>,<value length>,<key><value>" (a put) or
//                                 "d<key length>,<key>" (a delete), keys relative to `<prefix>/r/`
//   <prefix>/stage/<id>/commit   "<chunks>,<operations>,<digest>": written after every chunk, in one fenced
//                                 transaction; the batch's commit point. The digest (FNV-1a 64, hex) covers
//                                 the chunks in order.
// A stage without its commit key is uncommitted: readers ignore it, the next writer deletes it. A committed
// stage is the batch: readers overlay it on the records (its puts and deletes win) until the writer has
// applied it to the records and deleted the stage, in that order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/etcd_client.h"
#include "storage/etcd_store.h"

namespace shepherd::etcd_stage {

// "<prefix>/stage/"
std::string AreaPrefix(const std::string& prefix);
// "<prefix>/stage/<id>/": `id` zero-padded to 20 digits.
std::string StageDir(const std::string& prefix, int64_t id);
std::string ChunkKey(const std::string& stage_dir, size_t n);
std::string CommitKey(const std::string& stage_dir);
// The longest chunk key StageDir + ChunkKey make (for the chunk budget).
size_t MaxChunkKeySize(const std::string& prefix);

// `ops` (puts and single-key deletes, every key starting with `records_prefix`) cut into chunk values of at
// most `max_chunk_bytes` bytes each, in order. kInvalidArgument when one operation alone is larger.
Result<std::vector<std::string>> EncodeChunks(const std::vector<net::EtcdOp>& ops,
                                              const std::string& records_prefix, int64_t max_chunk_bytes);
// A chunk's operations with full keys (`records_prefix` + the stored key). kInternal when malformed.
Result<std::vector<net::EtcdOp>> DecodeChunk(const std::string& chunk, const std::string& records_prefix);

struct CommitRecord {
  int64_t chunks = 0;
  int64_t ops = 0;
  uint64_t digest = 0;
};
uint64_t Digest(const std::vector<std::string>& chunks);
std::string EncodeCommit(const CommitRecord& c);
std::optional<CommitRecord> DecodeCommit(const std::string& value);

// The stage area as read at one revision.
class StageArea {
 public:
  // Adds a key read under AreaPrefix(prefix) (the full key) and its value. Keys that are neither a chunk
  // nor a commit of a well-formed id are kept as debris: the next writer deletes them with the rest.
  void Add(const std::string& area_prefix, const std::string& key, std::string value);
  bool empty() const { return stages_.empty() && debris_ == 0; }
  // Stages without a commit key (and debris): what a writer deletes.
  size_t uncommitted() const;

  // Every committed stage's operations, in id order (then in the batch's order), with full keys.
  // kInternal naming the stage when a committed stage lacks a chunk, has one too many, or its digest or
  // operation count disagrees (the stage area was changed by hand).
  struct CommittedStage {
    std::string id;
    std::vector<net::EtcdOp> ops;
  };
  Result<std::vector<CommittedStage>> Committed(const std::string& records_prefix) const;

 private:
  struct Stage {
    std::optional<std::string> commit;
    std::map<size_t, std::string> chunks;
  };
  std::map<std::string, Stage> stages_;  // by id
  size_t debris_ = 0;
};

// The stage area under `prefix` at `revision` (0: the current one; *read_at receives the one read).
Result<StageArea> ReadArea(net::EtcdClient& client, const std::string& prefix, int64_t revision,
                           int64_t* read_at = nullptr);

// What the writer's steps need: the limits of one transaction, and how to run one.
struct Writer {
  std::string prefix;
  std::string records_prefix;  // "<prefix>/r/"
  int64_t max_ops = 128;
  int64_t max_bytes = 5 << 18;
  int64_t op_overhead = 32;  // bytes counted per operation beyond its key and value
  // Runs one transaction (fenced), waiting out an etcd that does not answer; any error is final.
  std::function<Status(const std::vector<net::EtcdOp>&)> commit;
  std::function<bool(EtcdStoreOptions::StagePoint)> hook;  // optional: see EtcdStoreOptions::stage_hook
};

struct StagedWrite {
  size_t chunks = 0;
  int64_t bytes = 0;  // of the chunks' values
  // How applying went, after the commit point: the batch is durable (readers see it; the next writer
  // finishes it) even when this is an error, which then fails the store for what comes after.
  Status applied;
};

// Stages `ops` (folded: one operation per key; puts and single-key deletes of records) as stage `id`: the
// chunk transactions, the commit transaction, then Apply. An error means the commit point was not reached
// (the batch is not durable); kInvalidArgument, before anything is written, when one operation alone is
// larger than a request allows.
Result<StagedWrite> WriteStaged(const Writer& w, const std::vector<net::EtcdOp>& ops, int64_t id);

// Writes `ops` to the records in transactions within the limits, then deletes every key under `cleanup`
// (one operation, so the stage goes at once).
Status Apply(const Writer& w, const std::vector<net::EtcdOp>& ops, const std::string& cleanup);

// A new writer's first step: applies the committed stages in `area` in order and deletes the whole stage
// area (uncommitted stages with it); logs one line when there was anything.
Status FinishLeftovers(const Writer& w, const StageArea& area);

}  // namespace shepherd::etcd_stage
