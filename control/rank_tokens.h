// RankTokens: the live `rank` credentials (docs/security.md, "Rank credentials").
//
// Owns one token per attempt of a job Shepherd's agents launch (minted when the attempt starts, revoked when
// it ends, so an old attempt's ranks can no longer report) and one token per job another launcher starts
// (attempts follow that launcher, so the token names no attempt; revoked when the job ends). Tokens are 256
// random bits as 64 hex digits. The Controller persists each one as a kMeta record (so ranks keep reporting
// across a daemon restart) and hands `Lookup` to the HTTP layer's authenticator.
//
// Threading: Mint, Restore and Revoke run on the control thread; Lookup is called by the authenticator,
// which may run on I/O threads, so every method takes the mutex.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/store.h"

namespace shepherd {

struct RankGrant {
  std::string job;
  std::optional<int> attempt;  // nullopt: any attempt (a job another launcher starts)
  bool operator==(const RankGrant&) const = default;
};

class RankTokens {
 public:
  // The grant's token, minted (and persisted in `batch`) if it has none yet.
  std::string Mint(const RankGrant& grant, WriteBatch* batch);
  // The token of a grant, if minted.
  std::optional<std::string> TokenFor(const RankGrant& grant) const;
  // Revokes the job's token for `attempt`, or every token of the job when nullopt.
  void Revoke(const std::string& job, std::optional<int> attempt, WriteBatch* batch);
  std::optional<RankGrant> Lookup(std::string_view token) const;

  // Durable form: kMeta, key "rank_token/<job>/<attempt or any>". Decode returns nullopt for any other
  // record or an undecodable one.
  static std::optional<std::pair<std::string, RankGrant>> Decode(const Record& r);
  void Restore(std::string token, RankGrant grant);

 private:
  mutable std::mutex mu_;
  std::map<std::string, RankGrant, std::less<>> by_token_;
  std::map<std::string, std::string>
      by_key_;  // the grant's record key -> its token (assignments ask per job)
};

}  // namespace shepherd
