#include "control/rank_tokens.h"

#include <charconv>

#include "core/json.h"
#include "core/random_hex.h"
#include "core/sha256.h"

namespace shepherd {
namespace {

constexpr std::string_view kPrefix = "rank_token/";
constexpr std::size_t kGrantIdChars = 16;
// Marks an attempt's record as minted for per-rank tokens; records without it predate them.
constexpr std::string_view kScheme = "scheme";
constexpr std::string_view kPerRank = "per-rank";

std::string KeyOf(const RankGrant& g) {
  return std::string(kPrefix) + g.job + "/" + (g.attempt ? std::to_string(*g.attempt) : "any");
}

std::string GrantId(std::string_view secret) {
  return HexOf(HmacSha256(secret, "grant-id")).substr(0, kGrantIdChars);
}

constexpr std::string_view kAnyRank = "any";

std::string RankPart(std::optional<int> rank) {
  return rank ? std::to_string(*rank) : std::string(kAnyRank);
}

std::string RankMac(std::string_view secret, const std::string& job, int attempt, std::optional<int> rank) {
  return HexOf(HmacSha256(secret, job + "\n" + std::to_string(attempt) + "\n" + RankPart(rank)));
}

// Constant-time comparison of equal-length strings (the lengths are public).
bool SameBytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string RankTokens::Mint(const RankGrant& grant, WriteBatch* batch) {
  if (auto t = TokenFor(grant)) return *t;
  std::string token = RandomHex(32);
  Json body = {
      {"token", token}, {"job", grant.job}, {"attempt", grant.attempt ? Json(*grant.attempt) : Json()}};
  if (grant.attempt) body[std::string(kScheme)] = std::string(kPerRank);
  batch->Put(Record{Collection::kMeta, KeyOf(grant), grant.job, body.dump()});
  std::lock_guard lock(mu_);
  Insert(token, grant);
  return token;
}

void RankTokens::Insert(std::string token, RankGrant grant) {
  grant.rank.reset();
  by_key_[KeyOf(grant)] = token;
  if (grant.attempt) by_id_[GrantId(token)] = token;
  by_token_[std::move(token)] = std::move(grant);
}

std::optional<std::string> RankTokens::TokenFor(const RankGrant& grant) const {
  std::lock_guard lock(mu_);
  auto it = by_key_.find(KeyOf(grant));
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> RankTokens::RankTokenFor(const std::string& job, int attempt,
                                                    std::optional<int> rank) const {
  auto secret = TokenFor({job, attempt});
  if (!secret) return std::nullopt;
  return GrantId(*secret) + "." + RankPart(rank) + "." + RankMac(*secret, job, attempt, rank);
}

void RankTokens::Revoke(const std::string& job, std::optional<int> attempt, WriteBatch* batch) {
  std::lock_guard lock(mu_);
  // The job's grants are one range of by_key_ ("rank_token/<job>/..."; job ids hold no '/'), so a revoke
  // costs O(log tokens), not a walk over every token.
  const std::string first = attempt ? KeyOf({job, attempt}) : std::string(kPrefix) + job + "/";
  for (auto it = by_key_.lower_bound(first); it != by_key_.end() && it->first.starts_with(first);) {
    if (attempt && it->first != first) break;
    batch->Erase(Collection::kMeta, it->first);
    by_id_.erase(GrantId(it->second));
    attempt_wide_.erase(it->second);
    by_token_.erase(it->second);
    it = by_key_.erase(it);
  }
}

std::optional<RankGrant> RankTokens::Lookup(std::string_view token) const {
  // Map lookups are not constant-time, but secrets are 256 random bits and grant ids are public parts of
  // a token: timing reveals at most an ordering of prefixes, which does not help guess one. The mac, the
  // part that proves the token, is compared in constant time.
  const std::size_t dot = token.find('.');
  std::lock_guard lock(mu_);
  if (dot == std::string_view::npos) {
    auto it = by_token_.find(token);
    if (it == by_token_.end()) return std::nullopt;
    // An attempt's secret is no token, unless a daemon before per-rank tokens handed it to the ranks.
    if (it->second.attempt && !attempt_wide_.contains(token)) return std::nullopt;
    return it->second;
  }
  const std::size_t dot2 = token.find('.', dot + 1);
  if (dot != kGrantIdChars || dot2 == std::string_view::npos) return std::nullopt;
  auto id = by_id_.find(token.substr(0, dot));
  if (id == by_id_.end()) return std::nullopt;
  const std::string_view digits = token.substr(dot + 1, dot2 - dot - 1);
  std::optional<int> rank;
  if (digits != kAnyRank) {
    int n = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || n < 0 ||
        (digits.size() > 1 && digits[0] == '0'))
      return std::nullopt;
    rank = n;
  }
  const RankGrant& grant = by_token_.at(id->second);
  if (!SameBytes(token.substr(dot2 + 1), RankMac(id->second, grant.job, *grant.attempt, rank)))
    return std::nullopt;
  RankGrant out = grant;
  out.rank = rank;
  return out;
}

std::optional<RankTokens::Stored> RankTokens::Decode(const Record& r) {
  if (r.collection != Collection::kMeta || r.key.rfind(kPrefix, 0) != 0) return std::nullopt;
  auto j = ParseJsonText(r.body, 8);
  if (!j.ok() || !j->is_object()) return std::nullopt;
  auto token = j->find("token"), job = j->find("job"), attempt = j->find("attempt"),
       scheme = j->find(std::string(kScheme));
  if (token == j->end() || !token->is_string() || job == j->end() || !job->is_string()) return std::nullopt;
  RankGrant g{job->get<std::string>(), std::nullopt};
  if (attempt != j->end() && attempt->is_number_integer()) g.attempt = attempt->get<int>();
  const bool attempt_wide = g.attempt && scheme == j->end();
  return Stored{token->get<std::string>(), std::move(g), attempt_wide};
}

void RankTokens::Restore(Stored stored) {
  std::lock_guard lock(mu_);
  if (stored.attempt_wide) attempt_wide_.insert(stored.secret);
  Insert(std::move(stored.secret), std::move(stored.grant));
}

}  // namespace shepherd
