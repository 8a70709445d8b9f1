#include "slurm/hostlist.h"

#include <gtest/gtest.h>

#include "tests/slurm/testdata.h"

namespace shepherd::slurm {
namespace {

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t c = s.find(',', pos);
    out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) return out;
    pos = c + 1;
  }
}

TEST(Hostlist, ExpandsLikeScontrolShowHostnames) {
  auto cases = testing::ReadPairs("hostnames.tsv");
  ASSERT_EQ(cases.size(), 9u);
  for (const auto& [expr, expected] : cases) {
    auto hosts = ExpandHostlist(expr);
    ASSERT_TRUE(hosts.ok()) << expr << ": " << hosts.status().message();
    EXPECT_EQ(*hosts, Split(expected)) << expr;
  }
}

TEST(Hostlist, CompressesLikeScontrolShowHostlist) {
  auto cases = testing::ReadPairs("hostlists.tsv");
  ASSERT_EQ(cases.size(), 6u);
  for (const auto& [hosts, expected] : cases) EXPECT_EQ(CompressHostlist(Split(hosts)), expected) << hosts;
}

TEST(Hostlist, CompressKeepsOrderSoExpansionRoundTrips) {
  std::vector<std::string> hosts{"n3", "n1", "n2", "gpu-09", "gpu-10", "x", "n1"};
  EXPECT_EQ(CompressHostlist(hosts), "n[3,1-2],gpu-[09-10],x,n1");
  auto back = ExpandHostlist(CompressHostlist(hosts));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, hosts);
}

TEST(Hostlist, EmptyInputs) {
  auto none = ExpandHostlist("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(CompressHostlist({}), "");
}

TEST(Hostlist, RejectsMalformedExpressions) {
  for (const char* bad : {"n[0-3", "n0-3]", "n[3-1]", "n[a-b]", "n[]", "n[1-2", "n[0-99999999]"})
    EXPECT_EQ(ExpandHostlist(bad).status().code(), Code::kInvalidArgument) << bad;
}

}  // namespace
}  // namespace shepherd::slurm
