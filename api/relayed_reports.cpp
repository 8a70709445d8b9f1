#include "api/relayed_reports.h"

#include <string>

#include "core/node.h"
#include "health/report.h"

namespace shepherd {
namespace {

constexpr int64_t kInt32 = 2147483647;

// The path of entry `i` of the field, built only to name an error: a heartbeat relays thousands of entries a
// second at fleet scale, and none of the valid ones needs it.
std::string EntryPath(std::size_t i) { return "reports[" + std::to_string(i) + "]"; }

// An integer field `key` of `o` in [0, kInt32]; `i` is the entry's index, for the error's path.
template <typename Json>
std::optional<int> Count(const Json& o, std::size_t i, const char* key, std::vector<FieldError>* errs) {
  auto it = o.find(key);
  if (it == o.end()) {
    errs->push_back({EntryPath(i) + "." + key, "is required"});
    return std::nullopt;
  }
  if (!it->is_number_integer() || it->template get<int64_t>() < 0 || it->template get<int64_t>() > kInt32 ||
      (it->is_number_unsigned() && it->template get<uint64_t>() > static_cast<uint64_t>(kInt32))) {
    errs->push_back({EntryPath(i) + "." + key, "must be an integer from 0 to " + std::to_string(kInt32)});
    return std::nullopt;
  }
  return it->template get<int>();
}

// ParseRelayedReports for Json and LiteJson alike (the template parameter shadows shepherd::Json).
template <typename Json>
std::vector<RelayedReports> ParseRelayedReportsOf(const Json& field, Time received_at,
                                                  std::vector<FieldError>* errs) {
  std::vector<RelayedReports> out;
  if (field.is_null()) return out;
  if (!field.is_array()) {
    errs->push_back({"reports", "must be an array"});
    return out;
  }
  if (field.size() > kMaxRelayedEntries) {
    errs->push_back({"reports", "must have at most " + std::to_string(kMaxRelayedEntries) + " entries"});
    return out;
  }
  const std::size_t errors_before = errs->size();
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    const Json& e = field[i];
    if (!e.is_object()) {
      errs->push_back({EntryPath(i), "must be an object"});
      continue;
    }
    RelayedReports entry;
    bool ok = true;
    // Job ids reach logs and URLs: the node-id alphabet (job-000001), never control characters.
    if (auto j = e.find("job"); j == e.end()) {
      errs->push_back({EntryPath(i) + ".job", "is required"});
      ok = false;
    } else if (!j->is_string() || !ValidNodeId(j->template get_ref<const std::string&>())) {
      errs->push_back(
          {EntryPath(i) + ".job", "must be 1-128 characters of A-Z a-z 0-9 . _ - (a letter or digit first)"});
      ok = false;
    } else {
      entry.rank.job = j->template get_ref<const std::string&>();
    }
    std::optional<int> attempt = Count(e, i, "attempt", errs);
    std::optional<int> rank = Count(e, i, "rank", errs);
    ok = ok && attempt && rank;
    const Json* reports = nullptr;
    if (auto r = e.find("reports"); r == e.end()) {
      errs->push_back({EntryPath(i) + ".reports", "is required"});
      ok = false;
    } else if (!r->is_array() || r->size() > kMaxRelayedReportsPerEntry) {
      errs->push_back({EntryPath(i) + ".reports", "must be an array of at most " +
                                              std::to_string(kMaxRelayedReportsPerEntry) + " reports"});
      ok = false;
    } else {
      reports = &*r;
    }
    // Once the heartbeat is refused, its reports are not worth parsing.
    if (!ok || errs->size() > errors_before) continue;
    entry.rank.attempt = *attempt;
    entry.rank.rank = *rank;
    entry.batch.reports.reserve(reports->size());
    for (std::size_t k = 0; k < reports->size(); ++k) {
      Result<Report> r = ParseReport((*reports)[k], received_at);
      if (!r.ok()) {
        entry.batch.rejected.push_back({k, r.status().message()});
      } else if (r->rank != entry.rank.rank || r->attempt != entry.rank.attempt) {
        // An agent relays a rank's own files: a report of another rank or attempt there is forged or stale.
        entry.batch.rejected.push_back({k, "rank " + std::to_string(r->rank) + " attempt " +
                                               std::to_string(r->attempt) + ": the entry relays rank " +
                                               std::to_string(entry.rank.rank) + " attempt " +
                                               std::to_string(entry.rank.attempt) + " only"});
      } else {
        entry.batch.reports.emplace_back(k, std::move(r).value());
      }
    }
    out.push_back(std::move(entry));
  }
  if (errs->size() > errors_before) out.clear();
  return out;
}

}  // namespace

std::vector<RelayedReports> ParseRelayedReports(const Json& field, Time received_at,
                                                std::vector<FieldError>* errs) {
  return ParseRelayedReportsOf(field, received_at, errs);
}
std::vector<RelayedReports> ParseRelayedReports(const LiteJson& field, Time received_at,
                                                std::vector<FieldError>* errs) {
  return ParseRelayedReportsOf(field, received_at, errs);
}

}  // namespace shepherd
