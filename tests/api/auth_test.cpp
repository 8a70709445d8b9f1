// Principals, the tokens file, bearer parsing, constant-time comparison, rank tokens and the route
// table's ownership rules, as plain values.
#include "api/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "api/route_table.h"

namespace shepherd {
namespace {

constexpr const char* kTokens = R"({"tokens": [
  {"token": "admin-token-0123456789", "role": "admin", "name": "ops"},
  {"token": "agent-n0-token-0123456789", "role": "agent", "node": "n0"}]})";

std::string TempFile(const std::string& text, mode_t mode) {
  char path[] = "/tmp/shepherd-tokens-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  chmod(path, mode);
  return path;
}

TEST(Tokens, ParsesRolesNamesAndNodes) {
  auto t = ParseTokens(kTokens);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].principal.role, Role::kAdmin);
  EXPECT_EQ((*t)[0].principal.name, "ops");
  EXPECT_EQ((*t)[1].principal.role, Role::kAgent);
  EXPECT_EQ((*t)[1].principal.node, "n0");
}

TEST(Tokens, RefusesBadEntries) {
  EXPECT_FALSE(ParseTokens(R"({"tokens": [{"token": "short", "role": "admin", "name": "a"}]})").ok());
  EXPECT_FALSE(ParseTokens(R"({"tokens": [{"token": "agent-token-0123456789", "role": "agent"}]})").ok());
  EXPECT_FALSE(ParseTokens(R"({"tokens": [{"token": "rank-token-0123456789", "role": "rank"}]})").ok());
  EXPECT_FALSE(
      ParseTokens(R"({"tokens": [{"token": "admin-token-0123456789", "role": "root", "name": "a"}]})").ok());
  EXPECT_FALSE(ParseTokens(R"({"tokens": [{"token": "admin-token-0123456789", "role": "admin", "name": "a"},
                                          {"token": "admin-token-0123456789", "role": "viewer", "name": "b"}]})")
                   .ok());
  EXPECT_FALSE(ParseTokens("not json").ok());
  // A key given twice: the second "tokens" array used to replace the first without a word.
  EXPECT_FALSE(
      ParseTokens(R"({"tokens": [{"token": "viewer-token-0123456789", "role": "viewer", "name": "v"}],
                               "tokens": [{"token": "admin-token-0123456789", "role": "admin", "name": "a"}]})")
          .ok());
  EXPECT_FALSE(
      ParseTokens(R"({"tokens": [{"token": "admin-token-0123456789", "role": "viewer", "role": "admin",
                               "name": "a"}]})")
          .ok());
  // An agent bound to an id no node can have.
  EXPECT_FALSE(
      ParseTokens(R"({"tokens": [{"token": "agent-token-0123456789", "role": "agent", "node": "../x"}]})")
          .ok());
}

TEST(Tokens, FileMustBeMode0600OrStricter) {
  std::string open_file = TempFile(kTokens, 0644);
  auto r = LoadTokensFile(open_file);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("0644"), std::string::npos) << r.status().message();
  std::string closed = TempFile(kTokens, 0600);
  EXPECT_TRUE(LoadTokensFile(closed).ok());
  std::string stricter = TempFile(kTokens, 0400);
  EXPECT_TRUE(LoadTokensFile(stricter).ok());
  unlink(open_file.c_str());
  unlink(closed.c_str());
  unlink(stricter.c_str());
}

TEST(Bearer, SchemeIsCaseInsensitive) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER  abc "), "abc");
  EXPECT_FALSE(BearerToken("Basic abc"));
  EXPECT_FALSE(BearerToken("Bearer"));
  EXPECT_FALSE(BearerToken("Bearerabc"));
  EXPECT_FALSE(BearerToken(""));
}

TEST(Bearer, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(Authenticator, StaticAndDynamicTokens) {
  Authenticator a;
  EXPECT_EQ(a.Authenticate("").outcome, AuthOutcome::kDisabled);
  a.SetStatic(ParseTokens(kTokens).value());
  const std::string t(64, 'a');  // a rank token the control layer minted for job-1 attempt 2
  bool revoked = false;
  a.SetDynamic([&](std::string_view token) -> std::optional<Principal> {
    if (revoked || token != t) return std::nullopt;
    return Principal{Role::kRank, "rank:job-1", std::nullopt, "job-1", 2};
  });
  EXPECT_EQ(a.Authenticate("").outcome, AuthOutcome::kMissing);
  EXPECT_EQ(a.Authenticate("Basic admin-token-0123456789").outcome, AuthOutcome::kMissing);
  EXPECT_EQ(a.Authenticate("Bearer nope-nope-nope-nope").outcome, AuthOutcome::kInvalid);
  auto ok = a.Authenticate("bearer admin-token-0123456789");
  ASSERT_EQ(ok.outcome, AuthOutcome::kOk);
  EXPECT_EQ(ok.principal->name, "ops");
  auto rank = a.Authenticate("Bearer " + t);
  ASSERT_EQ(rank.outcome, AuthOutcome::kOk);
  EXPECT_EQ(rank.principal->role, Role::kRank);
  EXPECT_EQ(rank.principal->job, "job-1");
  EXPECT_EQ(rank.principal->attempt, 2);
  revoked = true;
  EXPECT_EQ(a.Authenticate("Bearer " + t).outcome, AuthOutcome::kInvalid);
}

const RouteRule& Rule(const std::string& method, const std::string& path) {
  std::map<std::string, std::string> p;
  bool known = false;
  const RouteRule* r = FindRouteRule(method, path, &p, &known);
  EXPECT_NE(r, nullptr) << method << " " << path;
  return *r;
}

TEST(RouteTable, OwnershipRules) {
  Principal agent_n1{Role::kAgent, "agent:n1", "n1", {}, {}};
  EXPECT_EQ(Authorize(agent_n1, Rule("POST", "/v1/nodes/n0/heartbeat"), {{"id", "n0"}}, {}),
            Access::kForbidden);
  EXPECT_EQ(Authorize(agent_n1, Rule("POST", "/v1/nodes/n1/heartbeat"), {{"id", "n1"}}, {}),
            Access::kAllowed);
  Principal rank{Role::kRank, "rank:job-1", {}, "job-1", 1};
  EXPECT_EQ(Authorize(rank, Rule("POST", "/v1/jobs/job-2/reports"), {{"id", "job-2"}}, {}),
            Access::kForbidden);
  EXPECT_EQ(Authorize(rank, Rule("POST", "/v1/jobs/job-1/reports"), {{"id", "job-1"}}, {}), Access::kAllowed);
  EXPECT_EQ(Authorize(rank, Rule("POST", "/v1/jobs/job-1/cancel"), {{"id", "job-1"}}, {}),
            Access::kForbidden);
  Principal sam{Role::kSubmitter, "sam", {}, {}, {}};
  JobOwnerLookup owners = [](const std::string& job) -> std::optional<std::string> {
    if (job == "mine") return "sam";
    if (job == "theirs") return "kim";
    return std::nullopt;
  };
  EXPECT_EQ(Authorize(sam, Rule("POST", "/v1/jobs/mine/cancel"), {{"id", "mine"}}, owners), Access::kAllowed);
  EXPECT_EQ(Authorize(sam, Rule("POST", "/v1/jobs/theirs/cancel"), {{"id", "theirs"}}, owners),
            Access::kForbidden);
  Principal viewer{Role::kViewer, "v", {}, {}, {}};
  EXPECT_EQ(Authorize(viewer, Rule("POST", "/v1/jobs/mine/cancel"), {{"id", "mine"}}, owners),
            Access::kForbidden);
}

TEST(RouteTable, PercentEncodedIdsAreComparedDecoded) {
  std::map<std::string, std::string> p;
  bool known = false;
  const RouteRule* r = FindRouteRule("POST", "/v1/nodes/n%30/heartbeat", &p, &known);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(p["id"], "n0");
}

// The transport counts connections and body bytes per token: one key per token, never the token itself.
TEST(IdentityOf, OneKeyPerTokenWithoutTheToken) {
  const Principal viewer{Role::kViewer, "v", {}, {}, {}};
  const std::string a = IdentityOf(viewer, "Bearer token-aaaaaaaaaaaaaaaa");
  EXPECT_EQ(a, IdentityOf(viewer, "bearer   token-aaaaaaaaaaaaaaaa"));
  EXPECT_NE(a, IdentityOf(viewer, "Bearer token-bbbbbbbbbbbbbbbb"));
  EXPECT_EQ(a.find("token-aaaa"), std::string::npos);
  EXPECT_EQ(a.rfind("viewer:v:", 0), 0u) << a;
}

}  // namespace
}  // namespace shepherd
