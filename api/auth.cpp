#include "api/auth.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "core/node.h"

namespace shepherd {
namespace {

bool IsTokenChar(char c) {
  return c > 0x20 && c < 0x7f;
}

bool IsPersonRole(Role r) {
  return r == Role::kAdmin || r == Role::kOperator || r == Role::kSubmitter || r == Role::kViewer;
}

}  // namespace

std::string Describe(const std::optional<Principal>& p) {
  if (!p || p->name.empty() || p->name == "anonymous") return "anonymous";
  return p->name + " (" + ToString(p->role) + ")";
}

const char* ToString(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kOperator:
      return "operator";
    case Role::kSubmitter:
      return "submitter";
    case Role::kViewer:
      return "viewer";
    case Role::kAgent:
      return "agent";
    case Role::kRank:
      return "rank";
  }
  return "?";
}

std::optional<Role> RoleFromString(std::string_view s) {
  for (Role r : kAllRoles)
    if (s == ToString(r)) return r;
  return std::nullopt;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walks the longer input entirely; differences accumulate without branches.
  const std::size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

Result<std::vector<TokenEntry>> ParseTokens(std::string_view text) {
  // A key given twice in one object (a second "tokens" array would replace the first) is refused.
  Result<Json> parsed = ParseJsonText(text);
  if (!parsed.ok()) return InvalidArgument("tokens file: " + parsed.status().message());
  const Json& root = *parsed;
  if (!root.is_object()) return InvalidArgument("tokens file: not a JSON object");
  for (const auto& [k, v] : root.items())
    if (k != "tokens") return InvalidArgument("tokens file: unknown field '" + k + "'");
  auto it = root.find("tokens");
  if (it == root.end() || !it->is_array()) return InvalidArgument("tokens file: 'tokens' must be an array");
  std::vector<TokenEntry> out;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& e = (*it)[i];
    const std::string where = "tokens file: tokens[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(where + " must be an object");
    for (const auto& [k, v] : e.items()) {
      if (k != "token" && k != "role" && k != "name" && k != "node")
        return InvalidArgument(where + ": unknown field '" + k + "'");
      if (!v.is_string()) return InvalidArgument(where + "." + k + " must be a string");
    }
    TokenEntry t;
    t.token = e.value("token", "");
    if (t.token.size() < 16 || t.token.size() > 4096 ||
        !std::all_of(t.token.begin(), t.token.end(), IsTokenChar))
      return InvalidArgument(where + ".token must be 16-4096 printable ASCII characters without spaces");
    auto role = RoleFromString(e.value("role", ""));
    if (!role || *role == Role::kRank)
      return InvalidArgument(
          where + ".role must be admin, operator, submitter, viewer or agent (rank tokens are minted)");
    t.principal.role = *role;
    t.principal.name = e.value("name", "");
    if (*role == Role::kAgent) {
      std::string node = e.value("node", "");
      if (node.empty()) return InvalidArgument(where + ".node is required for role agent");
      if (!ValidNodeId(node))  // an id no node can have would name nothing (or, like "../x", a path)
        return InvalidArgument(where +
                               ".node must be a node id (A-Z a-z 0-9 . _ -, a letter or digit first)");
      t.principal.node = node;
      if (t.principal.name.empty()) t.principal.name = "agent:" + node;
    } else {
      if (e.contains("node")) return InvalidArgument(where + ".node is only for role agent");
      if (IsPersonRole(*role) && t.principal.name.empty())
        return InvalidArgument(where + ".name is required for role " + ToString(*role));
    }
    for (const auto& prev : out)
      if (prev.token == t.token) return InvalidArgument(where + ".token repeats an earlier token");
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<TokenEntry>> LoadTokensFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return InvalidArgument("tokens file " + path + ": cannot stat");
  if (!S_ISREG(st.st_mode)) return InvalidArgument("tokens file " + path + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return InvalidArgument("tokens file " + path + ": mode " + mode +
                           " lets others read or write it; chmod 600 it");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("tokens file " + path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = ParseTokens(ss.str());
  if (!r.ok()) return InvalidArgument(path + ": " + r.status().message());
  return r;
}

std::optional<std::string_view> BearerToken(std::string_view a) {
  while (!a.empty() && (a.front() == ' ' || a.front() == '\t')) a.remove_prefix(1);
  constexpr std::string_view kScheme = "bearer";
  if (a.size() <= kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != kScheme[i]) return std::nullopt;
  if (a[kScheme.size()] != ' ') return std::nullopt;
  a.remove_prefix(kScheme.size());
  while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
  while (!a.empty() && (a.back() == ' ' || a.back() == '\t')) a.remove_suffix(1);
  if (a.empty()) return std::nullopt;
  return a;
}

AuthResult Authenticator::Authenticate(std::string_view authorization) const {
  const auto tokens = Static();
  if (tokens->empty()) {
    Principal anon;
    anon.role = Role::kAdmin;
    anon.name = "anonymous";
    return {AuthOutcome::kDisabled, anon};
  }
  auto token = BearerToken(authorization);
  if (!token) return {AuthOutcome::kMissing, std::nullopt};
  // Every static token is compared, so the time does not depend on which one matched.
  const Principal* found = nullptr;
  for (const auto& t : *tokens)
    if (ConstantTimeEquals(t.token, *token)) found = &t.principal;
  if (found) return {AuthOutcome::kOk, *found};
  if (dynamic_) {
    if (auto p = dynamic_(*token)) return {AuthOutcome::kOk, std::move(p)};
  }
  return {AuthOutcome::kInvalid, std::nullopt};
}

std::string IdentityOf(const Principal& principal, std::string_view authorization) {
  const std::string_view token = BearerToken(authorization).value_or(std::string_view());
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string_view>{}(token));
  return std::string(ToString(principal.role)) + ":" + principal.name + ":" + hash;
}

}  // namespace shepherd
