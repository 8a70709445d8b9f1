#include "control/rank_tokens.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

TEST(RankTokens, OnePerAttemptRevokedAlone) {
  RankTokens r;
  WriteBatch b;
  std::string a1 = r.Mint({"j", 1}, &b), a2 = r.Mint({"j", 2}, &b), other = r.Mint({"k", 1}, &b);
  EXPECT_EQ(a1.size(), 64u);
  EXPECT_EQ(a1.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a1, a2);
  EXPECT_EQ(r.Mint({"j", 1}, &b), a1) << "minting twice keeps the first";
  const std::string j1r0 = *r.RankTokenFor("j", 1, 0), j2r0 = *r.RankTokenFor("j", 2, 0);
  r.Revoke("j", 1, &b);
  EXPECT_FALSE(r.Lookup(j1r0));
  EXPECT_FALSE(r.RankTokenFor("j", 1, 0));
  EXPECT_EQ(r.Lookup(j2r0), (RankGrant{"j", 2, 0}));
  r.Revoke("j", std::nullopt, &b);
  EXPECT_FALSE(r.Lookup(j2r0));
  EXPECT_EQ(r.Lookup(*r.RankTokenFor("k", 1, 3)), (RankGrant{"k", 1, 3}));
  EXPECT_FALSE(r.Lookup(""));
}

// An attempt's secret is never handed out: each rank gets a token that speaks for it alone, derived from
// the secret, and a token edited to name another rank (or with its mac changed) is no credential.
TEST(RankTokens, EachRankOfAnAttemptHasItsOwnToken) {
  RankTokens r;
  WriteBatch b;
  const std::string secret = r.Mint({"j", 1}, &b);
  EXPECT_FALSE(r.Lookup(secret)) << "the attempt's secret is not a credential";
  const std::string t0 = *r.RankTokenFor("j", 1, 0), t1 = *r.RankTokenFor("j", 1, 1);
  EXPECT_NE(t0, t1);
  EXPECT_EQ(t0, *r.RankTokenFor("j", 1, 0)) << "derived, the same every time";
  EXPECT_EQ(t0.find(secret), std::string::npos);
  EXPECT_EQ(r.Lookup(t0), (RankGrant{"j", 1, 0}));
  EXPECT_EQ(r.Lookup(t1), (RankGrant{"j", 1, 1}));
  const std::size_t dot = t0.find('.'), dot2 = t0.find('.', dot + 1);
  ASSERT_NE(dot2, std::string::npos);
  // Rank 0's mac with rank 1's number: refused.
  EXPECT_FALSE(r.Lookup(t0.substr(0, dot) + ".1" + t0.substr(dot2)));
  std::string flipped = t0;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(r.Lookup(flipped));
  EXPECT_FALSE(r.Lookup(t0.substr(0, dot) + ".00" + t0.substr(dot2)));
  EXPECT_FALSE(r.Lookup(t0.substr(0, dot) + ".-1" + t0.substr(dot2)));
  EXPECT_FALSE(r.Lookup(t0.substr(0, dot) + "." + t0.substr(dot2)));
  // A Slurm step's ranks share the attempt's token for any rank.
  EXPECT_EQ(r.Lookup(*r.RankTokenFor("j", 1, std::nullopt)), (RankGrant{"j", 1, std::nullopt}));
  // Restored from its record (a daemon restart), the secret derives the same tokens.
  RankTokens restored;
  auto decoded = RankTokens::Decode(b.ops.at(0).record);
  ASSERT_TRUE(decoded);
  EXPECT_FALSE(decoded->attempt_wide);
  restored.Restore(*decoded);
  EXPECT_FALSE(restored.Lookup(secret)) << "a restored secret of a per-rank attempt is still no credential";
  EXPECT_EQ(restored.Lookup(t1), (RankGrant{"j", 1, 1}));
}

// Another launcher's job: one token for the job (that launcher hands it to every rank), any rank.
TEST(RankTokens, AJobTokenSpeaksForAnyRankOfItsJob) {
  RankTokens r;
  WriteBatch b;
  const std::string t = r.Mint({"w", std::nullopt}, &b);
  EXPECT_EQ(r.Lookup(t), (RankGrant{"w", std::nullopt, std::nullopt}));
}

TEST(RankTokens, PersistedAndErasedInTheBatch) {
  RankTokens r;
  WriteBatch minted;
  std::string t = r.Mint({"j", std::nullopt}, &minted);
  ASSERT_EQ(minted.ops.size(), 1u);
  const Record& rec = minted.ops[0].record;
  EXPECT_EQ(rec.collection, Collection::kMeta);
  EXPECT_EQ(rec.job, "j");  // deleted with its job
  auto decoded = RankTokens::Decode(rec);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->secret, t);
  EXPECT_EQ(decoded->grant, (RankGrant{"j", std::nullopt}));
  EXPECT_FALSE(decoded->attempt_wide);
  EXPECT_FALSE(RankTokens::Decode(Record{Collection::kMeta, "other", "", "{}"}));
  EXPECT_FALSE(RankTokens::Decode(Record{Collection::kMeta, rec.key, "j", "not json"}));
  WriteBatch revoked;
  r.Revoke("j", std::nullopt, &revoked);
  ASSERT_EQ(revoked.ops.size(), 1u);
  EXPECT_TRUE(revoked.ops[0].erase);
  EXPECT_EQ(revoked.ops[0].record.key, rec.key);
}

// A daemon before per-rank tokens persisted each attempt's secret with no "scheme" and handed that secret to
// the attempt's ranks. After an upgrade those ranks keep reporting with it, as any rank of that attempt,
// until the attempt ends; the attempt's per-rank tokens work too.
TEST(RankTokens, ALegacyAttemptRecordSpeaksForAnyRankOfItsAttemptUntilRevoked) {
  const std::string legacy(64, 'a');
  const Record rec{Collection::kMeta, "rank_token/j/3", "j",
                   R"({"token":")" + legacy + R"(","job":"j","attempt":3})"};
  auto decoded = RankTokens::Decode(rec);
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->attempt_wide);
  RankTokens r;
  r.Restore(*decoded);
  EXPECT_EQ(r.Lookup(legacy), (RankGrant{"j", 3, std::nullopt}));
  EXPECT_EQ(r.TokenFor({"j", 3}), legacy);
  EXPECT_EQ(r.Lookup(*r.RankTokenFor("j", 3, 1)), (RankGrant{"j", 3, 1}));
  WriteBatch b;
  const std::string next = r.Mint({"j", 4}, &b);
  EXPECT_FALSE(r.Lookup(next)) << "a new attempt's secret is no credential";
  auto redecoded = RankTokens::Decode(b.ops.at(0).record);
  ASSERT_TRUE(redecoded);
  EXPECT_FALSE(redecoded->attempt_wide) << "what this daemon mints is marked per-rank";
  r.Revoke("j", 3, &b);
  EXPECT_FALSE(r.Lookup(legacy)) << "the attempt ended";
}

}  // namespace
}  // namespace shepherd
