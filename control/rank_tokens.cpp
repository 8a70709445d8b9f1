#include "control/rank_tokens.h"

#include "core/json.h"
#include "core/random_hex.h"

namespace shepherd {
namespace {

constexpr std::string_view kPrefix = "rank_token/";

std::string KeyOf(const RankGrant& g) {
  return std::string(kPrefix) + g.job + "/" + (g.attempt ? std::to_string(*g.attempt) : "any");
}

}  // namespace

std::string RankTokens::Mint(const RankGrant& grant, WriteBatch* batch) {
  if (auto t = TokenFor(grant)) return *t;
  std::string token = RandomHex(32);
  Json body = {
      {"token", token}, {"job", grant.job}, {"attempt", grant.attempt ? Json(*grant.attempt) : Json()}};
  batch->Put(Record{Collection::kMeta, KeyOf(grant), grant.job, body.dump()});
  std::lock_guard lock(mu_);
  by_key_[KeyOf(grant)] = token;
  by_token_[token] = grant;
  return token;
}

std::optional<std::string> RankTokens::TokenFor(const RankGrant& grant) const {
  std::lock_guard lock(mu_);
  auto it = by_key_.find(KeyOf(grant));
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

void RankTokens::Revoke(const std::string& job, std::optional<int> attempt, WriteBatch* batch) {
  std::lock_guard lock(mu_);
  // The job's grants are one range of by_key_ ("rank_token/<job>/..."; job ids hold no '/'), so a revoke
  // costs O(log tokens), not a walk over every token.
  const std::string first = attempt ? KeyOf({job, attempt}) : std::string(kPrefix) + job + "/";
  for (auto it = by_key_.lower_bound(first); it != by_key_.end() && it->first.starts_with(first);) {
    if (attempt && it->first != first) break;
    batch->Erase(Collection::kMeta, it->first);
    by_token_.erase(it->second);
    it = by_key_.erase(it);
  }
}

std::optional<RankGrant> RankTokens::Lookup(std::string_view token) const {
  // A map lookup is not constant-time, but the tokens are 256 random bits: timing reveals at most an
  // ordering of prefixes, which does not help guess one.
  std::lock_guard lock(mu_);
  auto it = by_token_.find(token);
  if (it == by_token_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::pair<std::string, RankGrant>> RankTokens::Decode(const Record& r) {
  if (r.collection != Collection::kMeta || r.key.rfind(kPrefix, 0) != 0) return std::nullopt;
  auto j = ParseJsonText(r.body, 8);
  if (!j.ok() || !j->is_object()) return std::nullopt;
  auto token = j->find("token"), job = j->find("job"), attempt = j->find("attempt");
  if (token == j->end() || !token->is_string() || job == j->end() || !job->is_string()) return std::nullopt;
  RankGrant g{job->get<std::string>(), std::nullopt};
  if (attempt != j->end() && attempt->is_number_integer()) g.attempt = attempt->get<int>();
  return std::make_pair(token->get<std::string>(), std::move(g));
}

void RankTokens::Restore(std::string token, RankGrant grant) {
  std::lock_guard lock(mu_);
  by_key_[KeyOf(grant)] = token;
  by_token_[std::move(token)] = std::move(grant);
}

}  // namespace shepherd
