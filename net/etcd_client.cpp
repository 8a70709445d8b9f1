// EtcdClient over etcd's v3 JSON gateway: one keep-alive net::HttpClient per endpoint, a current endpoint
// that moves on transport failures and "no leader" answers. Keys and values travel base64-encoded, int64
// fields as decimal strings (the gateway also accepts and may send plain numbers; both are read).
#include "net/etcd_client.h"

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

#include "net/http_client.h"

namespace shepherd::net {
namespace {

using Json = nlohmann::json;

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v =
        (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

int B64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

Result<std::string> Base64Decode(const std::string& in) {
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = B64Value(c);
    if (v < 0) return Unavailable("etcd answered a malformed base64 string");
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xff);
    }
  }
  return out;
}

// The gateway sends int64 as a decimal string; absent means 0.
int64_t Int(const Json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) return std::strtoll(it->get_ref<const std::string&>().c_str(), nullptr, 10);
  return 0;
}

std::string Str(const Json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

// The last byte that is not 0xff, plus one, with what follows dropped; "\0" (every key) when there is none.
std::string EtcdPrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (uint8_t(end.back()) < 0xff) {
      end.back() = char(uint8_t(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

namespace {

const char* TargetName(EtcdCompare::Target t) {
  switch (t) {
    case EtcdCompare::Target::kCreateRevision:
      return "CREATE";
    case EtcdCompare::Target::kModRevision:
      return "MOD";
    case EtcdCompare::Target::kVersion:
      return "VERSION";
    case EtcdCompare::Target::kValue:
      return "VALUE";
  }
  return "CREATE";
}

const char* ResultName(EtcdCompare::Result r) {
  switch (r) {
    case EtcdCompare::Result::kEqual:
      return "EQUAL";
    case EtcdCompare::Result::kNotEqual:
      return "NOT_EQUAL";
    case EtcdCompare::Result::kGreater:
      return "GREATER";
    case EtcdCompare::Result::kLess:
      return "LESS";
  }
  return "EQUAL";
}

Json CompareJson(const EtcdCompare& c) {
  Json j = {{"key", Base64Encode(c.key)}, {"target", TargetName(c.target)}, {"result", ResultName(c.result)}};
  switch (c.target) {
    case EtcdCompare::Target::kCreateRevision:
      j["create_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kModRevision:
      j["mod_revision"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kVersion:
      j["version"] = std::to_string(c.number);
      break;
    case EtcdCompare::Target::kValue:
      j["value"] = Base64Encode(c.value);
      break;
  }
  return j;
}

Json OpJson(const EtcdOp& op) {
  if (op.kind == EtcdOp::Kind::kPut) {
    Json put = {{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
    if (op.lease != 0) put["lease"] = std::to_string(op.lease);
    return Json{{"request_put", std::move(put)}};
  }
  Json del = {{"key", Base64Encode(op.key)}};
  if (op.prefix) del["range_end"] = Base64Encode(EtcdPrefixEnd(op.key));
  return Json{{"request_delete_range", std::move(del)}};
}

// An error etcd answered: {"error": "...", "message": "...", "code": <gRPC code>}.
struct GatewayError {
  int code = 0;
  std::string message;
};

class GatewayEtcdClient final : public EtcdClient {
 public:
  GatewayEtcdClient(EtcdClientOptions options, std::vector<std::unique_ptr<HttpClient>> clients)
      : options_(std::move(options)), clients_(std::move(clients)) {}

  Result<EtcdRangeResult> Range(const std::string& key, bool prefix, int64_t limit, int64_t revision,
                                bool keys_only) override {
    return DoRange(key, prefix ? EtcdPrefixEnd(key) : std::string(), limit, revision, keys_only);
  }

  Result<EtcdRangeResult> RangeBetween(const std::string& from, const std::string& end, int64_t limit,
                                       int64_t revision, bool keys_only) override {
    if (end.empty()) return InvalidArgument("etcd range: empty range end");
    return DoRange(from, end, limit, revision, keys_only);
  }

  Result<EtcdRangeResult> DoRange(const std::string& key, const std::string& end, int64_t limit,
                                  int64_t revision, bool keys_only) {
    Json req = {{"key", Base64Encode(key)}};
    if (!end.empty()) req["range_end"] = Base64Encode(end);
    if (limit > 0) req["limit"] = std::to_string(limit);
    if (revision > 0) req["revision"] = std::to_string(revision);
    if (keys_only) req["keys_only"] = true;
    Result<Json> r = Call("/v3/kv/range", req);
    if (!r.ok()) return r.status();
    EtcdRangeResult out;
    out.revision = Int(r->value("header", Json::object()), "revision");
    out.more = r->value("more", false);
    auto kvs = r->find("kvs");
    if (kvs != r->end() && kvs->is_array()) {
      out.kvs.reserve(kvs->size());
      for (const Json& kv : *kvs) {
        Result<std::string> k = Base64Decode(Str(kv, "key"));
        Result<std::string> v = Base64Decode(Str(kv, "value"));
        if (!k.ok()) return k.status();
        if (!v.ok()) return v.status();
        out.kvs.push_back(EtcdKeyValue{.key = std::move(*k),
                                       .value = std::move(*v),
                                       .create_revision = Int(kv, "create_revision"),
                                       .mod_revision = Int(kv, "mod_revision"),
                                       .lease = Int(kv, "lease")});
      }
    }
    return out;
  }

  Result<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares, const std::vector<EtcdOp>& success,
                            const std::vector<EtcdOp>& failure) override {
    Json req = Json::object();
    Json cmp = Json::array();
    for (const EtcdCompare& c : compares) cmp.push_back(CompareJson(c));
    Json ok = Json::array();
    for (const EtcdOp& op : success) ok.push_back(OpJson(op));
    Json fail = Json::array();
    for (const EtcdOp& op : failure) fail.push_back(OpJson(op));
    if (!cmp.empty()) req["compare"] = std::move(cmp);
    if (!ok.empty()) req["success"] = std::move(ok);
    if (!fail.empty()) req["failure"] = std::move(fail);
    Result<Json> r = Call("/v3/kv/txn", req);
    if (!r.ok()) return r.status();
    // A txn whose compares failed answers without "succeeded".
    return EtcdTxnResult{.succeeded = r->value("succeeded", false),
                         .revision = Int(r->value("header", Json::object()), "revision")};
  }

  Result<int64_t> LeaseGrant(int64_t ttl_s) override {
    Result<Json> r = Call("/v3/lease/grant", Json{{"TTL", std::to_string(ttl_s)}, {"ID", "0"}});
    if (!r.ok()) return r.status();
    if (!Str(*r, "error").empty()) return Unavailable("etcd lease grant: " + Str(*r, "error"));
    const int64_t id = Int(*r, "ID");
    if (id == 0) return Unavailable("etcd lease grant answered no lease id");
    return id;
  }

  Result<int64_t> LeaseKeepAlive(int64_t id) override {
    // A streaming call through the gateway: one request in, one {"result": {...}} out. An expired lease
    // answers without "TTL".
    Result<Json> r = Call("/v3/lease/keepalive", Json{{"ID", std::to_string(id)}});
    if (!r.ok()) return r.status();
    const Json result = r->contains("result") ? r->at("result") : *r;
    const int64_t ttl = Int(result, "TTL");
    return ttl > 0 ? ttl : 0;
  }

  shepherd::Status LeaseRevoke(int64_t id) override {
    Result<Json> r = Call("/v3/lease/revoke", Json{{"ID", std::to_string(id)}});
    if (!r.ok() && r.status().message().find("lease not found") != std::string::npos) return Status::Ok();
    return r.status();
  }

  shepherd::Status Compact(int64_t revision) override {
    Result<Json> r =
        Call("/v3/kv/compaction", Json{{"revision", std::to_string(revision)}, {"physical", true}});
    // Compacting to a revision already compacted reaches the goal all the same.
    if (!r.ok() && r.status().message().find("compacted") != std::string::npos) return Status::Ok();
    return r.status();
  }

  Result<MemberStatus> MemberHealth() override {
    Result<Json> r = Call("/v3/maintenance/status", Json::object());
    if (!r.ok()) return r.status();
    const std::string& endpoint = options_.endpoints[current_];
    if (Int(*r, "leader") == 0) return Unavailable("etcd member " + endpoint + " sees no leader (no quorum)");
    MemberStatus s;
    s.db_size = r->contains("dbSize") ? Int(*r, "dbSize") : Int(*r, "db_size");
    s.revision = Int(r->value("header", Json::object()), "revision");
    s.endpoint = endpoint;
    return s;
  }

  void Cancel() override {
    cancelled_ = true;
    for (auto& c : clients_) c->Cancel();
  }

 private:
  // POSTs `req` to `path` on the current endpoint, moving on (and retrying) on transport failures and on
  // answers that the member has no leader, until every endpoint was tried once.
  Result<Json> Call(const char* path, const Json& req) {
    const std::string body = req.dump();
    std::string last_error;
    for (size_t tried = 0; tried < clients_.size(); ++tried) {
      if (cancelled_) return Unavailable("etcd client cancelled");
      const size_t at = current_;
      const std::string& endpoint = options_.endpoints[at];
      Result<HttpResult> r = clients_[at]->Request("POST", path, body, options_.timeout);
      if (cancelled_) return Unavailable("etcd client cancelled");
      if (!r.ok()) {
        last_error = endpoint + ": " + r.status().message();
        current_ = (at + 1) % clients_.size();
        continue;
      }
      Json j = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      if (r->status == 200 && j.is_object()) return j;
      GatewayError err;
      if (j.is_object()) {
        err.code = static_cast<int>(Int(j, "code"));
        err.message = Str(j, "error");
        if (err.message.empty()) err.message = Str(j, "message");
      }
      if (err.message.empty())
        err.message = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200);
      // gRPC code 14 (Unavailable): no leader, leader changed, request timed out; another member may do.
      const bool member_problem = err.code == 14 || err.message.find("no leader") != std::string::npos ||
                                  r->status == 502 || r->status == 503;
      if (member_problem) {
        last_error = endpoint + ": " + err.message;
        current_ = (at + 1) % clients_.size();
        continue;
      }
      // An answer etcd gave: not a reason to wait for another member.
      Code code = Code::kInternal;
      if (err.code == 3 || err.code == 11) code = Code::kInvalidArgument;  // InvalidArgument, OutOfRange
      if (err.code == 8) code = Code::kResourceExhausted;                  // NOSPACE, too many requests
      if (err.code == 5) code = Code::kNotFound;
      return Status(code, std::string("etcd ") + path + " on " + endpoint + ": " + err.message);
    }
    std::string names;
    for (const std::string& e : options_.endpoints) names += (names.empty() ? "" : ",") + e;
    return Unavailable("no etcd endpoint answered (" + names + "); last error: " + last_error);
  }

  EtcdClientOptions options_;
  std::vector<std::unique_ptr<HttpClient>> clients_;  // one per endpoint; the vector never changes
  size_t current_ = 0;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::Create(const EtcdClientOptions& options) {
  if (options.endpoints.empty()) return InvalidArgument("etcd: no endpoint given");
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (const std::string& e : options.endpoints) {
    const std::string scheme = "http://";
    const std::string rest = e.rfind(scheme, 0) == 0 ? e.substr(scheme.size()) : std::string();
    const size_t colon = rest.rfind(':');
    if (rest.empty() || colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
        rest.find('/') != std::string::npos ||
        rest.find_first_not_of("0123456789", colon + 1) != std::string::npos)
      return InvalidArgument("etcd endpoint must be http://host:port: " + e);
    Result<std::unique_ptr<HttpClient>> c = HttpClient::Create(HttpClientOptions{.base_url = e});
    if (!c.ok()) return InvalidArgument("etcd endpoint " + e + ": " + c.status().message());
    clients.push_back(std::move(*c));
  }
  return std::unique_ptr<EtcdClient>(new GatewayEtcdClient(options, std::move(clients)));
}

}  // namespace shepherd::net
