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
  restored.Restore(decoded->first, decoded->second);
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
  EXPECT_EQ(decoded->first, t);
  EXPECT_EQ(decoded->second, (RankGrant{"j", std::nullopt}));
  EXPECT_FALSE(RankTokens::Decode(Record{Collection::kMeta, "other", "", "{}"}));
  EXPECT_FALSE(RankTokens::Decode(Record{Collection::kMeta, rec.key, "j", "not json"}));
  WriteBatch revoked;
  r.Revoke("j", std::nullopt, &revoked);
  ASSERT_EQ(revoked.ops.size(), 1u);
  EXPECT_TRUE(revoked.ops[0].erase);
  EXPECT_EQ(revoked.ops[0].record.key, rec.key);
}

}  // namespace
}  // namespace shepherd
