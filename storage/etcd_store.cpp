// OpenEtcdStore (storage/etcd_store.h; ParseStoreLocation is in store_location.cpp). One writer thread with
// group commit, as storage/sqlite_store.cpp: it takes up to max_batches_per_commit queued batches, folds them
// into etcd transactions of at most max_ops_per_txn operations and max_txn_bytes bytes (a key written twice
// in one transaction is folded into its last write: etcd refuses a transaction naming a key twice), each
// fenced when a fence is set, and runs each batch's `done` once the transaction holding it committed. A batch
// larger than one transaction is staged (Stage, storage/etcd_stage.h); its `done` runs once it committed.
#include "storage/etcd_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/time.h"
#include "net/etcd_client.h"
#include "storage/etcd_stage.h"

namespace shepherd {
namespace {

using net::EtcdClient;
using net::EtcdCompare;
using net::EtcdOp;

constexpr int64_t kLoadPage = 1000;  // keys per Range call at start-up

std::atomic<uint64_t> staged_batches_total{0};
// What etcd counts against --max-request-bytes is the request's protobuf (raw keys and values; the
// gateway decodes the base64): an op's key and value plus a few bytes of framing, counted generously.
constexpr int64_t kOpOverheadBytes = 32;

std::optional<Collection> ParseCollection(std::string_view s) {
  for (Collection c : {Collection::kNodes, Collection::kJobs, Collection::kAttempts, Collection::kCheckpoints,
                       Collection::kFindings, Collection::kMeta}) {
    if (s == ToString(c)) return c;
  }
  return std::nullopt;
}

int64_t RawSize(size_t n) {
  return static_cast<int64_t>(n);
}

std::string EncodeValue(uint64_t seq, const Record& r) {
  return std::to_string(seq) + "," + std::to_string(r.job.size()) + "," + r.job + r.body;
}

// "<seq>,<job length>,<job><body>".
bool DecodeValue(const std::string& v, uint64_t& seq, std::string& job, std::string& body) {
  const size_t a = v.find(',');
  if (a == std::string::npos || a == 0) return false;
  const size_t b = v.find(',', a + 1);
  if (b == std::string::npos || b == a + 1) return false;
  char* end = nullptr;
  seq = std::strtoull(v.c_str(), &end, 10);
  if (end != v.c_str() + a) return false;
  const unsigned long long job_len = std::strtoull(v.c_str() + a + 1, &end, 10);
  if (end != v.c_str() + b || job_len > v.size() - b - 1) return false;
  job = v.substr(b + 1, job_len);
  body = v.substr(b + 1 + job_len);
  return true;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

class EtcdStore final : public Store {
 public:
  EtcdStore(EtcdStoreOptions options, std::unique_ptr<EtcdClient> reader, std::unique_ptr<EtcdClient> writer,
            int64_t revision)
      : options_(std::move(options)),
        reader_(std::move(reader)),
        client_(std::move(writer)),
        compacted_at_(revision),
        thread_([this] { WriterLoop(); }) {}

  ~EtcdStore() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    thread_.join();
  }

  Result<Snapshot> Load() override { return LoadWith(*reader_); }

  Result<Snapshot> LoadWith(EtcdClient& client) {
    const std::string from = RecordsPrefix();
    const std::string end = net::EtcdPrefixEnd(from);
    struct Loaded {
      uint64_t seq;
      int64_t create_revision;
      Record record;
      bool erased = false;
    };
    std::vector<Loaded> loaded;
    std::unordered_map<std::string, size_t> at;  // etcd key -> index in `loaded`
    auto decode = [&](const std::string& key, const std::string& value, int64_t create_revision) -> Status {
      const std::string rest = key.substr(from.size());
      const size_t slash = rest.find('/');
      std::optional<Collection> c = slash == std::string::npos
                                        ? std::nullopt
                                        : ParseCollection(std::string_view(rest).substr(0, slash));
      if (!c) return Internal(Where() + " holds a record of unknown collection: " + key);
      Loaded l{0, create_revision, Record{*c, rest.substr(slash + 1), {}, {}}};
      if (!DecodeValue(value, l.seq, l.record.job, l.record.body))
        return Internal(Where() + " holds a malformed record value at " + key);
      auto [it, inserted] = at.emplace(key, loaded.size());
      if (inserted) {
        loaded.push_back(std::move(l));
      } else {
        l.create_revision = loaded[it->second].create_revision;
        loaded[it->second] = std::move(l);
      }
      return Status::Ok();
    };
    std::string next = from;
    int64_t revision = 0;  // every page is read at the first page's revision: one consistent view
    for (;;) {
      Result<net::EtcdRangeResult> page = client.RangeBetween(next, end, kLoadPage, revision);
      if (!page.ok()) return Status(page.status().code(), "load " + Where() + ": " + page.status().message());
      if (revision == 0) revision = page->revision;
      for (net::EtcdKeyValue& kv : page->kvs)
        if (Status s = decode(kv.key, kv.value, kv.create_revision); !s.ok()) return s;
      if (!page->more || page->kvs.empty()) break;
      next = page->kvs.back().key + std::string(1, '\0');
    }
    // A committed staged batch not yet fully applied is part of the state: its puts and deletes win.
    Result<etcd_stage::StageArea> area = etcd_stage::ReadArea(client, options_.prefix, revision);
    if (!area.ok()) return Status(area.status().code(), "load " + Where() + ": " + area.status().message());
    Result<std::vector<etcd_stage::StageArea::CommittedStage>> staged = area->Committed(from);
    if (!staged.ok()) return Internal(Where() + ": " + staged.status().message());
    for (const etcd_stage::StageArea::CommittedStage& stage : *staged) {
      for (const EtcdOp& op : stage.ops) {
        if (op.kind == EtcdOp::Kind::kPut) {
          if (Status s = decode(op.key, op.value, std::numeric_limits<int64_t>::max()); !s.ok()) return s;
          loaded[at[op.key]].erased = false;
        } else if (auto it = at.find(op.key); it != at.end()) {
          loaded[it->second].erased = true;
        }
      }
    }
    std::erase_if(loaded, [](const Loaded& l) { return l.erased; });
    // Insertion order of first write: the writer's sequence, then etcd's create revision.
    std::stable_sort(loaded.begin(), loaded.end(), [](const Loaded& a, const Loaded& b) {
      return a.seq != b.seq ? a.seq < b.seq : a.create_revision < b.create_revision;
    });
    Snapshot snapshot;
    snapshot.records.reserve(loaded.size());
    std::unordered_map<std::string, uint64_t> seqs;
    uint64_t next_seq = 0;
    for (Loaded& l : loaded) {
      seqs[RecordKey(l.record.collection, l.record.key)] = l.seq;
      next_seq = std::max(next_seq, l.seq + 1);
      snapshot.records.push_back(std::move(l.record));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      seq_by_key_ = std::move(seqs);
      next_seq_ = next_seq;
      loaded_ = true;
    }
    return snapshot;
  }

  Status Quarantine(const Record& r, const std::string& reason) override {
    nlohmann::json q = {{"job", r.job},
                        {"body", r.body},
                        {"reason", reason},
                        {"at", FormatRfc3339(std::chrono::system_clock::now())}};
    const std::string key = RecordKey(r.collection, r.key);
    std::vector<EtcdOp> ops = {
        EtcdOp{.kind = EtcdOp::Kind::kPut,
               .key = options_.prefix + "/quarantine/" + ToString(r.collection) + "/" + r.key,
               .value = q.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)},
        EtcdOp{.kind = EtcdOp::Kind::kDelete, .key = key}};
    Result<net::EtcdTxnResult> t = reader_->Txn(Fence(), ops);
    if (!t.ok()) return Status(t.status().code(), "quarantine " + key + ": " + t.status().message());
    if (!t->succeeded) return LeadershipLost();
    std::lock_guard<std::mutex> lock(mu_);
    seq_by_key_.erase(key);
    return Status::Ok();
  }

  void Write(WriteBatch batch, std::function<void(Status)> done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Pending{std::move(batch), std::move(done)});
      ++submitted_;
    }
    work_cv_.notify_all();
  }

  void Flush() override {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = submitted_;
    flush_cv_.wait(lock, [&] { return finished_ >= target; });
  }

 private:
  struct Pending {
    WriteBatch batch;
    std::function<void(Status)> done;
  };

  // One transaction being built: its ops (a key at most once), and the batches it completes.
  struct Txn {
    std::vector<EtcdOp> ops;
    std::unordered_map<std::string, size_t> index;  // full key -> position in ops
    int64_t bytes = 0;
    size_t batches = 0;  // how many of the group's batches (from `first`) it holds
    size_t first = 0;
  };

  std::string Where() const { return "etcd " + Join(options_.endpoints) + " prefix " + options_.prefix; }
  std::string RecordsPrefix() const { return options_.prefix + "/r/"; }
  std::string RecordKey(Collection c, const std::string& key) const {
    return RecordsPrefix() + ToString(c) + "/" + key;
  }

  std::vector<EtcdCompare> Fence() const {
    if (!options_.fence) return {};
    return {EtcdCompare{.key = options_.fence->leader_key,
                        .target = EtcdCompare::Target::kCreateRevision,
                        .result = EtcdCompare::Result::kEqual,
                        .number = options_.fence->create_revision}};
  }

  Status LeadershipLost() const {
    return FailedPrecondition(
        "leadership lost: the leader key " + options_.fence->leader_key + " no longer has create_revision " +
        std::to_string(options_.fence->create_revision) +
        " (another replica leads, or this one's lease expired); nothing more is written");
  }

  int64_t OpBytes(const EtcdOp& op) const {
    return RawSize(op.key.size()) + RawSize(op.value.size()) + kOpOverheadBytes;
  }

  // Adds `batch` to `txn`, folding a key written twice into its last write, and assigns sequences: a put
  // of a key the store holds keeps its sequence; a new key (or one erased earlier) gets the next one.
  void Add(Txn& txn, const WriteBatch& batch) {
    for (const WriteBatch::Op& op : batch.ops) {
      std::string key = RecordKey(op.record.collection, op.record.key);
      EtcdOp e;
      if (op.erase) {
        e.kind = EtcdOp::Kind::kDelete;
        seq_by_key_.erase(key);
      } else {
        auto [it, inserted] = seq_by_key_.emplace(key, next_seq_);
        if (inserted) ++next_seq_;
        e.kind = EtcdOp::Kind::kPut;
        e.value = EncodeValue(it->second, op.record);
      }
      e.key = std::move(key);
      auto at = txn.index.find(e.key);
      if (at != txn.index.end()) {
        txn.bytes += OpBytes(e) - OpBytes(txn.ops[at->second]);
        txn.ops[at->second] = std::move(e);
      } else {
        txn.bytes += OpBytes(e);
        txn.index.emplace(e.key, txn.ops.size());
        txn.ops.push_back(std::move(e));
      }
    }
  }

  // What `txn` would hold with `batch` added, without adding it: operations exactly (folded keys count
  // once), bytes as an upper bound (a folded write counts again). Nothing is copied.
  std::pair<int64_t, int64_t> Grown(const Txn& txn, const WriteBatch& batch) const {
    int64_t ops = static_cast<int64_t>(txn.ops.size()), bytes = txn.bytes;
    std::unordered_set<std::string> added;
    for (const WriteBatch::Op& op : batch.ops) {
      std::string key = RecordKey(op.record.collection, op.record.key);
      const int64_t value = op.erase ? 0
                                     : 24 + std::to_string(op.record.job.size()).size() +
                                           op.record.job.size() + op.record.body.size();
      bytes += RawSize(key.size()) + RawSize(static_cast<size_t>(value)) + kOpOverheadBytes;
      if (!txn.index.count(key) && added.insert(std::move(key)).second) ++ops;
    }
    return {ops, bytes};
  }

  bool Fits(std::pair<int64_t, int64_t> size) const {
    return size.first <= options_.max_ops_per_txn && size.second <= options_.max_txn_bytes;
  }

  // Runs one transaction, waiting out an etcd that does not answer for at most unavailable_wait.
  Status Commit(const std::vector<EtcdOp>& ops) {
    Result<net::EtcdTxnResult> r = Patiently([&] { return client_->Txn(Fence(), ops); });
    if (!r.ok()) return r.status();
    if (!r->succeeded) return LeadershipLost();
    last_revision_ = r->revision;
    return Status::Ok();
  }

  // Runs `call` (an etcd call returning a Result) until etcd answers, for at most unavailable_wait.
  template <class Call>
  auto Patiently(Call call) -> decltype(call()) {
    const auto start = std::chrono::steady_clock::now();
    bool waited = false;
    auto delay = std::chrono::milliseconds(100);
    for (;;) {
      auto r = call();
      if (r.ok()) {
        if (waited)
          spdlog::info(
              "storage: etcd answers again after {} ms",
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
                  .count());
        return r;
      }
      // No member answered, or etcd sheds load ("too many requests"): wait. Any other answer is final.
      const bool shed = r.status().code() == Code::kResourceExhausted &&
                        r.status().message().find("too many requests") != std::string::npos;
      if (r.status().code() != Code::kUnavailable && !shed) return r.status();
      const auto waited_for = std::chrono::steady_clock::now() - start;
      if (waited_for >= options_.unavailable_wait)
        return Unavailable(
            "etcd did not answer for " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited_for).count()) +
            " s: " + r.status().message());
      if (!waited)
        spdlog::warn(
            "storage: etcd does not answer ({}): writes wait for it, at most {} s, then the daemon stops",
            r.status().message(),
            std::chrono::duration_cast<std::chrono::seconds>(options_.unavailable_wait).count());
      waited = true;
      std::unique_lock<std::mutex> lock(mu_);
      if (work_cv_.wait_for(lock, delay, [&] { return stopping_; }))
        return Unavailable("storage closed while etcd did not answer: " + r.status().message());
      delay = std::min(delay * 2, std::chrono::milliseconds(1000));
    }
  }

  void MaybeCompact() {
    if (options_.compact_every <= 0 || last_revision_ - compacted_at_ < options_.compact_every) return;
    if (Status s = client_->Compact(last_revision_); !s.ok()) {
      spdlog::warn("storage: etcd compaction to revision {} failed: {}", last_revision_, s.message());
      return;
    }
    compacted_at_ = last_revision_;
  }

  void Finish(std::deque<Pending>& group, size_t from, size_t n, const Status& outcome) {
    for (size_t i = from; i < from + n; ++i)
      if (group[i].done) group[i].done(outcome);
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ += n;
    }
    flush_cv_.notify_all();
  }

  // Leadership lost keeps its code; anything else is kUnavailable (503), as SQLite's: a batch over the
  // limits is the deployment's configuration, never the client's request, so it is no 400.
  void Fail(const Status& s) {
    if (!failure_.ok()) return;
    failure_ = s.code() == Code::kFailedPrecondition ? s : Unavailable("storage failed: " + s.message());
    spdlog::error("storage: {}", failure_.message());
  }

  Status FailedOutcome() const {
    return Status(failure_.code(),
                  "storage is failed since an earlier write error (" + failure_.message() + ")");
  }

  void WriterLoop() {
    for (;;) {
      std::deque<Pending> group;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;
        const size_t n =
            std::min(queue_.size(), static_cast<size_t>(std::max(1, options_.max_batches_per_commit)));
        group.insert(group.end(), std::make_move_iterator(queue_.begin()),
                     std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
      }
      if (!failure_.ok()) {
        Finish(group, 0, group.size(), FailedOutcome());
        continue;
      }
      if (!loaded_) SeedSequences();
      if (!recovered_) {
        if (Status s = Recover(); !s.ok()) {
          Fail(s);
          Finish(group, 0, group.size(), failure_);
          continue;
        }
        recovered_ = true;
      }
      size_t i = 0;
      while (i < group.size() && failure_.ok()) {
        if (!Fits(Grown(Txn{}, group[i].batch))) {  // larger than one transaction alone: staged
          Status s = Stage(group[i].batch);  // ok once committed, even when the store failed applying it
          if (!s.ok()) Fail(s);
          Finish(group, i, 1, s.ok() ? s : failure_);
          ++i;
          MaybeCompact();
          continue;
        }
        Txn txn;
        txn.first = i;
        while (i < group.size()) {
          // Commit what we have when this batch does not fit too; it starts the next transaction (or is
          // staged, when it does not fit one alone).
          if (txn.batches > 0 && !Fits(Grown(txn, group[i].batch))) break;
          Add(txn, group[i].batch);
          ++txn.batches;
          ++i;
        }
        if (txn.batches == 0) continue;
        if (txn.ops.empty()) {  // batches with no operations: nothing to send
          Finish(group, txn.first, txn.batches, Status::Ok());
          continue;
        }
        Status s = Commit(txn.ops);
        if (!s.ok()) {
          Fail(s);
          Finish(group, txn.first, txn.batches, failure_);
          break;
        }
        Finish(group, txn.first, txn.batches, Status::Ok());
        MaybeCompact();
      }
      if (i < group.size()) Finish(group, i, group.size() - i, FailedOutcome());
    }
  }

  etcd_stage::Writer StageWriter() {
    return etcd_stage::Writer{.prefix = options_.prefix,
                              .records_prefix = RecordsPrefix(),
                              .max_ops = options_.max_ops_per_txn,
                              .max_bytes = options_.max_txn_bytes,
                              .op_overhead = kOpOverheadBytes,
                              .commit = [this](const std::vector<EtcdOp>& ops) { return Commit(ops); },
                              .hook = options_.stage_hook};
  }

  // Writes `batch`, larger than one transaction, through the stage area (etcd_stage::WriteStaged).
  Status Stage(const WriteBatch& batch) {
    const auto start = std::chrono::steady_clock::now();
    Txn staged;
    Add(staged, batch);  // folded and sequenced as any transaction
    Result<etcd_stage::StagedWrite> w = etcd_stage::WriteStaged(StageWriter(), staged.ops, last_revision_);
    if (!w.ok()) return w.status();
    staged_batches_total.fetch_add(1, std::memory_order_relaxed);
    if (!w->applied.ok()) {  // committed: durable, and the next writer applies it; this store writes no more
      spdlog::warn("storage: a staged write of {} operations is committed but applying it stopped: {}",
                   staged.ops.size(), w->applied.message());
      Fail(w->applied);
      return Status::Ok();
    }
    spdlog::info(
        "storage: staged a write of {} operations ({} bytes in {} chunks) larger than one etcd "
        "transaction; committed and applied in {} ms",
        staged.ops.size(), w->bytes, w->chunks,
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
            .count());
    return Status::Ok();
  }

  // Before this writer's first write (fenced, as every write): etcd_stage::FinishLeftovers.
  Status Recover() {
    int64_t revision = 0;
    Result<etcd_stage::StageArea> area =
        Patiently([&] { return etcd_stage::ReadArea(*client_, options_.prefix, 0, &revision); });
    if (!area.ok()) return Status(area.status().code(), "read the stage area: " + area.status().message());
    last_revision_ = std::max(last_revision_, revision);
    return etcd_stage::FinishLeftovers(StageWriter(), *area);
  }

  // A store written without Load() first (a tool): the sequences of the records already there, so that an
  // upsert keeps its record's place.
  void SeedSequences() {
    Result<Snapshot> s = LoadWith(*client_);
    if (!s.ok()) spdlog::warn("storage: cannot read the existing records' order: {}", s.status().message());
    std::lock_guard<std::mutex> lock(mu_);
    loaded_ = true;
  }

  const EtcdStoreOptions options_;
  std::unique_ptr<EtcdClient> reader_;  // Load and Quarantine (start-up, caller's thread)
  std::unique_ptr<EtcdClient> client_;  // writer thread only
  int64_t last_revision_ = 0;           // writer thread only
  int64_t compacted_at_ = 0;            // writer thread only
  Status failure_;                      // writer thread only
  bool recovered_ = false;              // writer thread only: Recover ran

  std::mutex mu_;
  std::condition_variable work_cv_, flush_cv_;
  std::deque<Pending> queue_;              // guarded by mu_
  uint64_t submitted_ = 0, finished_ = 0;  // guarded by mu_
  bool stopping_ = false;                  // guarded by mu_
  // The records' sequences (Load's order). Set by Load and Quarantine (start-up, before the first Write:
  // the queue's mutex orders them before the writer's use), then the writer thread's alone. After a failed
  // transaction they may name writes that did not happen: the store is failed then and writes no more.
  std::unordered_map<std::string, uint64_t> seq_by_key_;
  uint64_t next_seq_ = 0;
  std::atomic<bool> loaded_{false};
  std::thread thread_;  // last: starts after everything above is built
};

}  // namespace

uint64_t EtcdStagedBatchesTotal() {
  return staged_batches_total.load(std::memory_order_relaxed);
}

Result<std::unique_ptr<Store>> OpenEtcdStore(const EtcdStoreOptions& options) {
  if (options.prefix.empty() || options.prefix.back() == '/')
    return InvalidArgument("store prefix must be non-empty without a trailing slash: '" + options.prefix +
                           "'");
  if (options.max_ops_per_txn < 1) return InvalidArgument("max_ops_per_txn must be at least 1");
  if (options.max_txn_bytes < 1024) return InvalidArgument("max_txn_bytes must be at least 1024");
  if (options.max_batches_per_commit < 1) return InvalidArgument("max_batches_per_commit must be at least 1");
  const net::EtcdClientOptions client_options{.endpoints = options.endpoints, .timeout = options.timeout};
  Result<std::unique_ptr<EtcdClient>> reader = EtcdClient::Create(client_options);
  if (!reader.ok()) return reader.status();
  Result<std::unique_ptr<EtcdClient>> writer = EtcdClient::Create(client_options);
  if (!writer.ok()) return writer.status();
  EtcdClient& c = **reader;
  const std::string where = "etcd " + Join(options.endpoints) + " prefix " + options.prefix;
  const std::string schema_key = options.prefix + "/schema";

  // Read only until the prefix is known to be Shepherd's (or empty).
  Result<net::EtcdRangeResult> schema = c.Range(schema_key, false);
  if (!schema.ok())
    return Status(schema.status().code(), "cannot open store " + where + ": " + schema.status().message());
  int64_t revision = schema->revision;
  if (schema->kvs.empty()) {
    // Keys under the prefix that are not the leader election's: another application's (or a typo'd prefix).
    const std::string under = options.prefix + "/";
    Result<net::EtcdRangeResult> any = c.Range(under, true, 16, 0, /*keys_only=*/true);
    if (!any.ok())
      return Status(any.status().code(), "cannot open store " + where + ": " + any.status().message());
    for (const net::EtcdKeyValue& kv : any->kvs) {
      const bool election = kv.key.rfind(options.prefix + "/leader", 0) == 0 ||
                            (options.fence && kv.key == options.fence->leader_key);
      if (!election)
        return FailedPrecondition("refusing store " + where +
                                  ": the prefix holds keys that are not Shepherd's (" + kv.key + ") and no " +
                                  schema_key + "; choose another --store-prefix (nothing was written)");
    }
    // Create the schema key only if it is still absent (another replica may be doing the same).
    std::vector<EtcdCompare> compares = {EtcdCompare{
        .key = schema_key, .target = EtcdCompare::Target::kVersion, .result = EtcdCompare::Result::kEqual}};
    if (options.fence)
      compares.push_back(EtcdCompare{.key = options.fence->leader_key,
                                     .target = EtcdCompare::Target::kCreateRevision,
                                     .number = options.fence->create_revision});
    Result<net::EtcdTxnResult> t = c.Txn(
        compares,
        {EtcdOp{.kind = EtcdOp::Kind::kPut, .key = schema_key, .value = std::to_string(kEtcdSchemaVersion)}});
    if (!t.ok()) return Status(t.status().code(), "cannot open store " + where + ": " + t.status().message());
    schema = c.Range(schema_key, false);
    if (!schema.ok())
      return Status(schema.status().code(), "cannot open store " + where + ": " + schema.status().message());
    if (schema->kvs.empty()) return FailedPrecondition("leadership lost while creating " + schema_key);
    revision = schema->revision;
  }
  const std::string& text = schema->kvs[0].value;
  char* end = nullptr;
  const long version = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || version < 1)
    return FailedPrecondition("refusing store " + where + ": " + schema_key + " is '" + text.substr(0, 64) +
                              "', not a Shepherd schema version (nothing was written)");
  if (version > kEtcdSchemaVersion)
    return FailedPrecondition("refusing store " + where + ": written by a newer shepherdd (schema " +
                              std::to_string(version) + ", this binary knows " +
                              std::to_string(kEtcdSchemaVersion) +
                              "); upgrade shepherdd (nothing was written)");
  return std::unique_ptr<Store>(new EtcdStore(options, std::move(*reader), std::move(*writer), revision));
}

}  // namespace shepherd
