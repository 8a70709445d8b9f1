#include "storage/etcd_stage.h"

#include <spdlog/spdlog.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace shepherd::etcd_stage {
namespace {

constexpr int kIdDigits = 20;
constexpr int kChunkDigits = 6;

std::string Pad(uint64_t n, int width) {
  std::string s = std::to_string(n);
  return s.size() < static_cast<size_t>(width) ? std::string(width - s.size(), '0') + s : s;
}

bool AllDigits(const std::string& s, size_t width) {
  return s.size() == width && s.find_first_not_of("0123456789") == std::string::npos;
}

// Reads "<decimal>," at `at` (advancing past the comma); false when malformed or larger than `limit`.
bool ReadLength(const std::string& s, size_t& at, uint64_t limit, uint64_t& out) {
  const size_t comma = s.find(',', at);
  if (comma == std::string::npos || comma == at || comma - at > 19) return false;
  uint64_t v = 0;
  for (size_t i = at; i < comma; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (v > limit) return false;
  out = v;
  at = comma + 1;
  return true;
}

std::string EncodeOp(const net::EtcdOp& op, const std::string& records_prefix) {
  const std::string key = op.key.substr(records_prefix.size());
  if (op.kind == net::EtcdOp::Kind::kDelete) return "d" + std::to_string(key.size()) + "," + key;
  return "p" + std::to_string(key.size()) + "," + std::to_string(op.value.size()) + "," + key + op.value;
}

}  // namespace

std::string AreaPrefix(const std::string& prefix) {
  return prefix + "/stage/";
}

std::string StageDir(const std::string& prefix, int64_t id) {
  return AreaPrefix(prefix) + Pad(static_cast<uint64_t>(id < 0 ? 0 : id), kIdDigits) + "/";
}

std::string ChunkKey(const std::string& stage_dir, size_t n) {
  return stage_dir + Pad(n, kChunkDigits);
}

std::string CommitKey(const std::string& stage_dir) {
  return stage_dir + "commit";
}

size_t MaxChunkKeySize(const std::string& prefix) {
  return AreaPrefix(prefix).size() + kIdDigits + 1 + kChunkDigits + 2;  // room for a 7-8 digit chunk number
}

Result<std::vector<std::string>> EncodeChunks(const std::vector<net::EtcdOp>& ops,
                                              const std::string& records_prefix, int64_t max_chunk_bytes) {
  std::vector<std::string> chunks;
  std::string current;
  for (const net::EtcdOp& op : ops) {
    if (op.prefix || op.key.compare(0, records_prefix.size(), records_prefix) != 0)
      return InvalidArgument("a staged operation must name one record key, not " + op.key);
    std::string e = EncodeOp(op, records_prefix);
    if (static_cast<int64_t>(e.size()) > max_chunk_bytes)
      return InvalidArgument("the record " + op.key + " (" + std::to_string(op.value.size()) +
                             " bytes) is larger than one etcd request allows (" +
                             std::to_string(max_chunk_bytes) + " bytes for one key and value)");
    if (!current.empty() && static_cast<int64_t>(current.size() + e.size()) > max_chunk_bytes) {
      chunks.push_back(std::move(current));
      current.clear();
    }
    current += e;
  }
  if (!current.empty()) chunks.push_back(std::move(current));
  return chunks;
}

Result<std::vector<net::EtcdOp>> DecodeChunk(const std::string& chunk, const std::string& records_prefix) {
  std::vector<net::EtcdOp> ops;
  size_t at = 0;
  while (at < chunk.size()) {
    const char kind = chunk[at++];
    uint64_t key_len = 0, value_len = 0;
    if ((kind != 'p' && kind != 'd') || !ReadLength(chunk, at, chunk.size() - at, key_len))
      return Internal("malformed staged chunk at byte " + std::to_string(at));
    if (kind == 'p' && !ReadLength(chunk, at, chunk.size() - at, value_len))
      return Internal("malformed staged chunk at byte " + std::to_string(at));
    if (key_len == 0 || key_len + value_len > chunk.size() - at)
      return Internal("malformed staged chunk at byte " + std::to_string(at));
    net::EtcdOp op;
    op.kind = kind == 'p' ? net::EtcdOp::Kind::kPut : net::EtcdOp::Kind::kDelete;
    op.key = records_prefix + chunk.substr(at, key_len);
    if (kind == 'p') op.value = chunk.substr(at + key_len, value_len);
    at += key_len + value_len;
    ops.push_back(std::move(op));
  }
  return ops;
}

uint64_t Digest(const std::vector<std::string>& chunks) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a 64
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ULL;
  };
  for (const std::string& c : chunks) {
    for (char ch : std::to_string(c.size()) + ":") mix(static_cast<unsigned char>(ch));
    for (char ch : c) mix(static_cast<unsigned char>(ch));
  }
  return h;
}

std::string EncodeCommit(const CommitRecord& c) {
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016" PRIx64, c.digest);
  return std::to_string(c.chunks) + "," + std::to_string(c.ops) + "," + digest;
}

std::optional<CommitRecord> DecodeCommit(const std::string& value) {
  size_t at = 0;
  uint64_t chunks = 0, ops = 0;
  if (!ReadLength(value, at, 1u << 30, chunks) || !ReadLength(value, at, 1ULL << 40, ops))
    return std::nullopt;
  const std::string hex = value.substr(at);
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
  return CommitRecord{.chunks = static_cast<int64_t>(chunks),
                      .ops = static_cast<int64_t>(ops),
                      .digest = std::strtoull(hex.c_str(), nullptr, 16)};
}

void StageArea::Add(const std::string& area_prefix, const std::string& key, std::string value) {
  const std::string rest = key.substr(area_prefix.size());
  const size_t slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  const std::string leaf = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
  if (!AllDigits(id, kIdDigits) || leaf.empty()) {
    ++debris_;
    return;
  }
  Stage& stage = stages_[id];
  if (leaf == "commit") {
    stage.commit = std::move(value);
  } else if (leaf.size() >= kChunkDigits && leaf.size() <= kChunkDigits + 2 &&
             leaf.find_first_not_of("0123456789") == std::string::npos) {
    stage.chunks[static_cast<size_t>(std::strtoull(leaf.c_str(), nullptr, 10))] = std::move(value);
  } else {
    ++debris_;
  }
}

size_t StageArea::uncommitted() const {
  size_t n = debris_;
  for (const auto& [id, stage] : stages_)
    if (!stage.commit) ++n;
  return n;
}

Result<std::vector<StageArea::CommittedStage>> StageArea::Committed(const std::string& records_prefix) const {
  std::vector<CommittedStage> out;
  for (const auto& [id, stage] : stages_) {
    if (!stage.commit) continue;
    const std::string where = "the committed staged write " + id;
    std::optional<CommitRecord> commit = DecodeCommit(*stage.commit);
    if (!commit)
      return Internal(where + " has a malformed commit record '" + stage.commit->substr(0, 64) + "'");
    if (static_cast<int64_t>(stage.chunks.size()) != commit->chunks ||
        (!stage.chunks.empty() && stage.chunks.rbegin()->first + 1 != stage.chunks.size()))
      return Internal(where + " should have " + std::to_string(commit->chunks) + " chunks numbered from 0; " +
                      std::to_string(stage.chunks.size()) + " are there");
    std::vector<std::string> chunks;
    chunks.reserve(stage.chunks.size());
    for (const auto& [n, c] : stage.chunks) chunks.push_back(c);
    if (Digest(chunks) != commit->digest) return Internal(where + ": its chunks do not match its digest");
    std::vector<net::EtcdOp> ops;
    for (const std::string& c : chunks) {
      Result<std::vector<net::EtcdOp>> decoded = DecodeChunk(c, records_prefix);
      if (!decoded.ok()) return Internal(where + ": " + decoded.status().message());
      for (net::EtcdOp& op : *decoded) ops.push_back(std::move(op));
    }
    if (static_cast<int64_t>(ops.size()) != commit->ops)
      return Internal(where + " holds " + std::to_string(ops.size()) +
                      " operations, its commit record says " + std::to_string(commit->ops));
    out.push_back(CommittedStage{id, std::move(ops)});
  }
  return out;
}

Result<StageArea> ReadArea(net::EtcdClient& client, const std::string& prefix, int64_t revision,
                           int64_t* read_at) {
  constexpr int64_t kPage = 8;  // chunks run up to a request's size each
  const std::string from = AreaPrefix(prefix);
  const std::string end = net::EtcdPrefixEnd(from);
  StageArea area;
  std::string next = from;
  for (;;) {
    Result<net::EtcdRangeResult> page = client.RangeBetween(next, end, kPage, revision);
    if (!page.ok()) return page.status();
    if (revision == 0) revision = page->revision;
    for (net::EtcdKeyValue& kv : page->kvs) area.Add(from, kv.key, std::move(kv.value));
    if (!page->more || page->kvs.empty()) break;
    next = page->kvs.back().key + std::string(1, '\0');
  }
  if (read_at) *read_at = revision;
  return area;
}

namespace {

bool Reached(const Writer& w, EtcdStoreOptions::StagePoint point) {
  return !w.hook || w.hook(point);
}

Status Stopped() {
  return Unavailable("the writer was stopped by the store's test seam");
}

int64_t OpBytes(const Writer& w, const net::EtcdOp& op) {
  return static_cast<int64_t>(op.key.size() + op.value.size()) + w.op_overhead;
}

}  // namespace

Result<StagedWrite> WriteStaged(const Writer& w, const std::vector<net::EtcdOp>& ops, int64_t id) {
  for (const net::EtcdOp& op : ops)
    if (OpBytes(w, op) > w.max_bytes)
      return InvalidArgument(
          "the record " + op.key + " (" + std::to_string(op.value.size()) +
          " bytes) exceeds etcd's limit for one request (" + std::to_string(w.max_bytes) +
          " bytes; raise etcd's --max-request-bytes and the daemon's etcd_max_request_bytes "
          "together)");
  const std::string dir = StageDir(w.prefix, id);
  const int64_t budget = w.max_bytes - w.op_overhead - static_cast<int64_t>(MaxChunkKeySize(w.prefix));
  Result<std::vector<std::string>> chunks = EncodeChunks(ops, w.records_prefix, budget);
  if (!chunks.ok()) return chunks.status();
  StagedWrite out{.chunks = chunks->size()};
  for (size_t n = 0; n < chunks->size(); ++n) {
    out.bytes += static_cast<int64_t>((*chunks)[n].size());
    if (Status s = w.commit({net::EtcdOp{.key = ChunkKey(dir, n), .value = (*chunks)[n]}}); !s.ok()) return s;
  }
  if (!Reached(w, EtcdStoreOptions::StagePoint::kChunksWritten)) return Stopped();
  const CommitRecord commit{.chunks = static_cast<int64_t>(chunks->size()),
                            .ops = static_cast<int64_t>(ops.size()),
                            .digest = Digest(*chunks)};
  if (Status s = w.commit({net::EtcdOp{.key = CommitKey(dir), .value = EncodeCommit(commit)}}); !s.ok())
    return s;
  out.applied = Reached(w, EtcdStoreOptions::StagePoint::kCommitted) ? Apply(w, ops, dir) : Stopped();
  return out;
}

Status Apply(const Writer& w, const std::vector<net::EtcdOp>& ops, const std::string& cleanup) {
  std::vector<net::EtcdOp> txn;
  int64_t bytes = 0;
  bool first = true;
  auto flush = [&]() -> Status {
    if (Status s = w.commit(txn); !s.ok()) return s;
    txn.clear();
    bytes = 0;
    if (first && !Reached(w, EtcdStoreOptions::StagePoint::kPartlyApplied)) return Stopped();
    first = false;
    return Status::Ok();
  };
  for (const net::EtcdOp& op : ops) {
    if (!txn.empty() &&
        (static_cast<int64_t>(txn.size()) + 1 > w.max_ops || bytes + OpBytes(w, op) > w.max_bytes))
      if (Status s = flush(); !s.ok()) return s;
    txn.push_back(op);
    bytes += OpBytes(w, op);
  }
  if (!txn.empty())
    if (Status s = flush(); !s.ok()) return s;
  return w.commit({net::EtcdOp{.kind = net::EtcdOp::Kind::kDelete, .key = cleanup, .prefix = true}});
}

Status FinishLeftovers(const Writer& w, const StageArea& area) {
  if (area.empty()) return Status::Ok();
  Result<std::vector<StageArea::CommittedStage>> committed = area.Committed(w.records_prefix);
  if (!committed.ok()) return committed.status();
  size_t ops = 0;
  for (const StageArea::CommittedStage& stage : *committed) {
    ops += stage.ops.size();
    if (Status s = Apply(w, stage.ops, AreaPrefix(w.prefix) + stage.id + "/"); !s.ok()) return s;
  }
  // What is left: stages never committed (and stray keys).
  if (Status s = w.commit(
          {net::EtcdOp{.kind = net::EtcdOp::Kind::kDelete, .key = AreaPrefix(w.prefix), .prefix = true}});
      !s.ok())
    return s;
  spdlog::info(
      "storage: finished {} staged write(s) an earlier writer left committed ({} operations) and "
      "deleted {} it left uncommitted",
      committed->size(), ops, area.uncommitted());
  return Status::Ok();
}

}  // namespace shepherd::etcd_stage
