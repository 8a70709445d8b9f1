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
  r.Revoke("j", 1, &b);
  EXPECT_FALSE(r.Lookup(a1));
  EXPECT_EQ(r.Lookup(a2), (RankGrant{"j", 2}));
  r.Revoke("j", std::nullopt, &b);
  EXPECT_FALSE(r.Lookup(a2));
  EXPECT_EQ(r.Lookup(other), (RankGrant{"k", 1}));
  EXPECT_FALSE(r.Lookup(""));
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
