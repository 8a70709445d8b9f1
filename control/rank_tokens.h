// RankTokens: the live `rank` credentials (docs/security.md, "Rank credentials" and "Scopes").
//
// Owns one secret per attempt of a job Shepherd's agents launch (minted when the attempt starts, revoked
// when it ends, so an old attempt's ranks can no longer report) and one token per job another launcher
// starts (attempts follow that launcher, so the token names no attempt; revoked when the job ends).
// Secrets are 256 random bits as 64 hex digits. The Controller persists each one as a kMeta record (so
// ranks keep reporting across a daemon restart) and hands `Lookup` to the HTTP layer's authenticator.
//
// An attempt's secret is never a credential itself: each rank of the attempt gets its own token,
// "<grant id>.<rank>.<mac>", where the grant id is derived from the secret (16 hex digits) and the mac is
// HMAC-SHA256 under the secret of (job, attempt, rank). Nothing is stored per rank; Lookup recomputes the
// mac and compares in constant time, so a token names exactly one rank of one attempt. Steps Shepherd
// starts through Slurm hand every task the same environment, so their ranks share "<grant id>.any.<mac>",
// valid for any rank of the attempt.
//
// Upgrade: a daemon before per-rank tokens handed each rank its attempt's bare secret. Its records carry no
// "scheme" field; Decode marks them attempt-wide, and Restore lets such a secret speak for any rank of its
// attempt until the attempt ends (Revoke), so ranks running across an upgrade keep reporting. Attempts
// minted after the upgrade never accept their bare secret.
//
// Threading: Mint, Restore and Revoke run on the control thread; Lookup is called by the authenticator,
// which may run on I/O threads, so every method takes the mutex.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "storage/store.h"

namespace shepherd {

struct RankGrant {
  std::string job;
  std::optional<int> attempt;  // nullopt: any attempt (a job another launcher starts)
  std::optional<int> rank;     // Lookup: the one rank a per-rank token speaks for; nullopt: any rank
  bool operator==(const RankGrant&) const = default;
};

class RankTokens {
 public:
  // The grant's secret, minted (and persisted in `batch`) if it has none yet. REQUIRES: grant.rank unset.
  std::string Mint(const RankGrant& grant, WriteBatch* batch);
  // The secret of a grant, if minted. For a job another launcher starts this is its ranks' token.
  std::optional<std::string> TokenFor(const RankGrant& grant) const;
  // The token of one rank of an attempt whose secret is minted (what that rank gets as SHEPHERD_TOKEN);
  // rank nullopt: the attempt's token for any rank.
  std::optional<std::string> RankTokenFor(const std::string& job, int attempt, std::optional<int> rank) const;
  // Revokes the job's token for `attempt`, or every token of the job when nullopt.
  void Revoke(const std::string& job, std::optional<int> attempt, WriteBatch* batch);
  // The grant a token speaks for: a per-rank token's attempt and rank, or a job token's job. An attempt's
  // bare secret is no credential (nullopt).
  std::optional<RankGrant> Lookup(std::string_view token) const;

  // A grant as persisted. attempt_wide: a record of an attempt written before per-rank tokens, whose bare
  // secret is its ranks' credential for any rank.
  struct Stored {
    std::string secret;
    RankGrant grant;
    bool attempt_wide = false;
  };
  // Durable form: kMeta, key "rank_token/<job>/<attempt or any>". Decode returns nullopt for any other
  // record or an undecodable one.
  static std::optional<Stored> Decode(const Record& r);
  void Restore(Stored stored);

 private:
  void Insert(std::string token, RankGrant grant);  // REQUIRES: mu_ held

  mutable std::mutex mu_;
  std::map<std::string, RankGrant, std::less<>> by_token_;
  std::map<std::string, std::string>
      by_key_;  // the grant's record key -> its token (assignments ask per job)
  std::map<std::string, std::string, std::less<>> by_id_;  // an attempt grant's id -> its secret
  std::set<std::string, std::less<>> attempt_wide_;        // attempt secrets that are credentials (upgrade)
};

}  // namespace shepherd
