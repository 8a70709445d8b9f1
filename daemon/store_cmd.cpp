// `shepherdd store export` and `shepherdd store import`: every record of a store to a file and back, to move
// from SQLite to etcd (or back) and to back up either (docs/operations.md, "Moving from SQLite to etcd").
//
// The file: one JSON object per line. First {"format":"shepherd-store-export","version":1}, then one
// {"collection","key","job","body"} per record in the store's order (body verbatim, as a string), last
// {"end":true,"records":N,"digest":HEX}: a file cut short, or changed, is refused by import.
#include <fcntl.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <optional>

#include "core/json.h"
#include "core/sha256.h"
#include "daemon/commands.h"
#include "daemon/options.h"
#include "daemon/store_open.h"

namespace po = boost::program_options;

namespace shepherd {
namespace {

constexpr const char* kFormat = "shepherd-store-export";
constexpr int kFormatVersion = 1;
constexpr size_t kImportBatch = 100;  // records per write batch (under etcd's 128 operations per txn)
constexpr size_t kMaxLine = 256u << 20;

std::optional<Collection> ParseCollection(const std::string& s) {
  for (Collection c : {Collection::kNodes, Collection::kJobs, Collection::kAttempts, Collection::kCheckpoints,
                       Collection::kFindings, Collection::kMeta}) {
    if (s == ToString(c)) return c;
  }
  return std::nullopt;
}

// A digest over the records in order: chained so that it is computed record by record.
class Digest {
 public:
  void Add(const Record& r) {
    const std::string c = ToString(r.collection);
    std::string text = HexOf(state_);
    for (const std::string* part : {&c, &r.key, &r.job, &r.body})
      text += std::to_string(part->size()) + ":" + *part;
    state_ = Sha256(text);
  }
  std::string hex() const { return HexOf(state_); }

 private:
  Sha256Digest state_ = Sha256("");
};

Json RecordJson(const Record& r) {
  return Json{{"collection", ToString(r.collection)}, {"key", r.key}, {"job", r.job}, {"body", r.body}};
}

int Fail(const std::string& what) {
  std::cerr << "shepherdd store: " << what << "\n";
  return 1;
}

struct Target {
  StoreLocation location;
  std::string prefix;
  std::string text;
};

Result<std::unique_ptr<Store>> OpenTarget(const Target& t) {
  Result<std::unique_ptr<Store>> store = OpenStoreAt(t.location, t.prefix);
  if (!store.ok() && store.status().code() == Code::kConflict)
    return Status(Code::kConflict,
                  store.status().message() +
                      ": stop that daemon first, or export an online copy (sqlite3 DB \".backup COPY\", then "
                      "--store sqlite://COPY; docs/operations.md, \"Backup and restore\")");
  return store;
}

int Export(const Target& from, const std::string& out_path) {
  // Opening a missing SQLite path would create an empty database: a typo must not export nothing.
  if (std::error_code ec;
      from.location.kind == StoreLocation::Kind::kSqlite && !std::filesystem::exists(from.location.path, ec))
    return Fail("no database at " + from.location.path);
  auto store = OpenTarget(from);
  if (!store.ok()) return Fail("cannot open " + from.text + ": " + store.status().message());
  Result<Snapshot> snapshot = (*store)->Load();
  if (!snapshot.ok()) return Fail("cannot read " + from.text + ": " + snapshot.status().message());
  // Never over an existing file: an export is somebody's backup.
  const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return Fail("cannot create " + out_path + ": " + std::strerror(errno) +
                (errno == EEXIST ? " (an export never replaces a file)" : ""));
  std::string text = Json{{"format", kFormat}, {"version", kFormatVersion}}.dump() + "\n";
  Digest digest;
  for (const Record& r : snapshot->records) {
    digest.Add(r);
    text += RecordJson(r).dump(-1, ' ', false, Json::error_handler_t::strict) + "\n";
  }
  text += Json{{"end", true}, {"records", snapshot->records.size()}, {"digest", digest.hex()}}.dump() + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      ::unlink(out_path.c_str());
      return Fail("cannot write " + out_path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    return Fail("cannot write " + out_path + ": " + std::strerror(errno));
  std::cout << "exported " << snapshot->records.size() << " records from " << from.text << " to " << out_path
            << "\n";
  return 0;
}

int Import(const Target& to, const std::string& in_path) {
  std::ifstream in(in_path);
  if (!in) return Fail("cannot read " + in_path);
  // The whole file is checked before anything is written: a file cut short writes nothing.
  std::vector<Record> records;
  Digest digest;
  std::string line;
  size_t line_no = 0;
  bool header = false, end = false;
  auto bad = [&](const std::string& why) {
    return Fail(in_path + " line " + std::to_string(line_no) + ": " + why + " (nothing was written)");
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.size() > kMaxLine) return bad("line too long");
    if (end) return bad("text after the end line");
    Result<Json> j = ParseJsonText(line, kLargeJsonLimits);
    if (!j.ok() || !j->is_object()) return bad("not a JSON object");
    if (!header) {
      if (j->value("format", "") != kFormat) return bad("not a shepherdd store export");
      if (!(*j)["version"].is_number_integer() || (*j)["version"].get<int>() != kFormatVersion)
        return bad("export format version " + j->value("version", Json()).dump() + " is not " +
                   std::to_string(kFormatVersion));
      header = true;
      continue;
    }
    if (j->contains("end")) {
      if (!(*j)["records"].is_number_unsigned() || (*j)["records"].get<size_t>() != records.size())
        return bad("the end line counts " + j->value("records", Json()).dump() + " records, the file holds " +
                   std::to_string(records.size()));
      if (j->value("digest", "") != digest.hex())
        return bad("the records do not match the end line's digest");
      end = true;
      continue;
    }
    auto text = [&](const char* f) -> const std::string* {
      auto it = j->find(f);
      return it != j->end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
    };
    const std::string *c = text("collection"), *k = text("key"), *job = text("job"), *body = text("body");
    if (!c || !k || !job || !body) return bad("a record needs the strings collection, key, job and body");
    std::optional<Collection> collection = ParseCollection(*c);
    if (!collection) return bad("unknown collection '" + *c + "'");
    if (k->empty()) return bad("empty key");
    records.push_back(Record{*collection, *k, *job, *body});
    digest.Add(records.back());
  }
  if (!header) return Fail(in_path + ": empty, not a store export (nothing was written)");
  if (!end) return Fail(in_path + ": no end line: the file was cut short (nothing was written)");

  auto store = OpenTarget(to);
  if (!store.ok()) return Fail("cannot open " + to.text + ": " + store.status().message());
  Result<Snapshot> existing = (*store)->Load();
  if (!existing.ok()) return Fail("cannot read " + to.text + ": " + existing.status().message());
  if (!existing->records.empty())
    return Fail(to.text + " already holds " + std::to_string(existing->records.size()) +
                " records: import writes only into an empty store (nothing was written)");

  std::vector<std::future<Status>> results;
  for (size_t i = 0; i < records.size(); i += kImportBatch) {
    WriteBatch batch;
    for (size_t k = i; k < std::min(records.size(), i + kImportBatch); ++k) batch.Put(records[k]);
    auto done = std::make_shared<std::promise<Status>>();
    results.push_back(done->get_future());
    (*store)->Write(std::move(batch), [done](Status s) { done->set_value(std::move(s)); });
  }
  (*store)->Flush();
  for (auto& r : results) {
    Status s = r.get();
    if (!s.ok()) return Fail("writing " + to.text + " failed: " + s.message());
  }
  // Read back: the same records, in the same order.
  Result<Snapshot> back = (*store)->Load();
  if (!back.ok()) return Fail("cannot read back " + to.text + ": " + back.status().message());
  Digest written;
  for (const Record& r : back->records) written.Add(r);
  if (back->records.size() != records.size() || written.hex() != digest.hex())
    return Fail(to.text + " holds " + std::to_string(back->records.size()) + " records after the import of " +
                std::to_string(records.size()) + ", not the same: check it before using it");
  std::cout << "imported " << records.size() << " records from " << in_path << " into " << to.text << "\n";
  return 0;
}

}  // namespace

int RunStore(int argc, char** argv) {
  const std::string verb = argc > 1 ? argv[1] : "";
  po::options_description opts(
      "Usage: shepherdd store export --store URL [--store-prefix P] --out FILE\n"
      "       shepherdd store import --store URL [--store-prefix P] --in FILE\n\n"
      "Every record of a store to a file (export) and into an empty store (import): moving from SQLite to\n"
      "etcd, and backups. URL: sqlite://PATH or etcd://HOST:PORT[,HOST:PORT...]. Options");
  opts.add_options()("help,h", "show this help")("store", po::value<std::string>(), "the store")(
      "store-prefix", po::value<std::string>()->default_value("/shepherd"), "key prefix in etcd")(
      "out", po::value<std::string>(), "export: the file to create (never replaced)")(
      "in", po::value<std::string>(), "import: the file to read");
  if (verb == "--help" || verb == "-h") {
    std::cout << opts << "\n";
    return 0;
  }
  if (verb != "export" && verb != "import") {
    std::cerr << "shepherdd store: " << (verb.empty() ? "no command" : "unknown command '" + verb + "'")
              << " (export or import)\n"
              << opts << "\n";
    return 2;
  }
  po::variables_map vm;
  if (!ParseOnlyOptions(argc - 1, argv + 1, opts, &vm, "shepherdd store")) return 2;
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  auto usage = [&](const std::string& why) {
    std::cerr << "shepherdd store " << verb << ": " << why << "\n";
    return 2;
  };
  if (!vm.count("store")) return usage("--store is required");
  const char* file_flag = verb == "export" ? "out" : "in";
  if (!vm.count(file_flag)) return usage(std::string("--") + file_flag + " is required");
  if (vm.count(verb == "export" ? "in" : "out"))
    return usage(verb == "export" ? "--in is for import" : "--out is for export");
  DaemonConfig config;
  config.store = vm["store"].as<std::string>();
  config.store_prefix = vm["store-prefix"].as<std::string>();
  Result<StoreLocation> location = ConfiguredStore(config);
  if (!location.ok()) return usage(location.status().message());
  const Target target{*location, config.store_prefix,
                      location->kind == StoreLocation::Kind::kSqlite
                          ? "sqlite://" + location->path
                          : config.store + " prefix " + config.store_prefix};
  const std::string file = vm[file_flag].as<std::string>();
  return verb == "export" ? Export(target, file) : Import(target, file);
}

}  // namespace shepherd
