// Who is calling: principals, roles, bearer tokens. Plain C++ (no Beast, no Asio), so it is unit-tested with
// values and the server, router and control layer share it.
//
// - Tokens come from a file (`--tokens-file`, mode 0600 or stricter), never from argv; LoadTokensFile checks
//   the mode and parses {"tokens": [{"token", "role", "name"?, "node"?}]}.
// - `rank` tokens are minted per rank of an attempt (or per job another launcher starts) by the control layer
// (control/rank_tokens.h); InstallAuth hands
//   their lookup to the Authenticator as the dynamic hook.
// - Authenticator resolves an Authorization header value to a Principal: the `Bearer` scheme is matched
//   case-insensitively (RFC 7235 §2.1) and static tokens are compared in constant time.
//
// Threading: none of these types lock. The daemon calls them on its single control/io thread; reloading
// (SIGHUP) also happens there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace shepherd {

enum class Role { kAdmin, kOperator, kSubmitter, kViewer, kAgent, kRank };
inline constexpr Role kAllRoles[] = {Role::kAdmin,  Role::kOperator, Role::kSubmitter,
                                     Role::kViewer, Role::kAgent,    Role::kRank};
const char* ToString(Role r);
std::optional<Role> RoleFromString(std::string_view s);

struct Principal {
  Role role = Role::kViewer;
  std::string name;  // people: from the tokens file; agents: "agent:<node>"; ranks: "rank:<job>"
  std::optional<std::string> node;  // agent: the one node it may speak for
  std::optional<std::string> job;   // rank: the one job it may report for
  std::optional<int> attempt;       // rank: the attempt its token was minted for
  std::optional<int> rank;          // rank: the one rank it may report for (nullopt: a job token, any rank)
};

// Who a request came from, for the records of people's actions: "alice (operator)"; "anonymous" without
// a principal or for the anonymous admin of a daemon without tokens.
std::string Describe(const std::optional<Principal>& p);

struct TokenEntry {
  std::string token;
  Principal principal;
};

// Parses the tokens file's text. Every entry needs a token (16-4096 printable ASCII characters, no spaces),
// a role among admin/operator/submitter/viewer/agent (rank tokens are never static: they are minted per
// attempt), a name for people's roles, and a node for agent. Tokens must be unique. Errors name the entry.
Result<std::vector<TokenEntry>> ParseTokens(std::string_view text);
// Reads `path`: refused unless it is a regular file no one but its owner can read or write (mode & 077 == 0).
Result<std::vector<TokenEntry>> LoadTokensFile(const std::string& path);

// Constant-time comparison: the time depends on the lengths only, not on where the bytes differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Dynamic credentials (rank tokens): returns the principal for a token it knows.
using TokenLookup = std::function<std::optional<Principal>(std::string_view token)>;

enum class AuthOutcome {
  kDisabled,  // no tokens configured: auth is off (development); principal is an anonymous admin
  kMissing,   // no Authorization header, or not the Bearer scheme -> 401
  kInvalid,   // a bearer token nobody issued -> 401
  kOk,
};
struct AuthResult {
  AuthOutcome outcome;
  std::optional<Principal> principal;  // set for kOk and kDisabled
};

class Authenticator {
 public:
  // Replaces the static set (start-up, SIGHUP). An empty set with no dynamic hook turns auth off.
  // Thread-safe (the I/O thread authenticates heads while SIGHUP reloads on the control thread).
  void SetStatic(std::vector<TokenEntry> tokens) {
    auto next = std::make_shared<const std::vector<TokenEntry>>(std::move(tokens));
    std::lock_guard lock(mu_);
    static_ = std::move(next);
  }
  // REQUIRES: called before the first Authenticate (start-up).
  void SetDynamic(TokenLookup lookup) { dynamic_ = std::move(lookup); }
  bool enabled() const { return !Static()->empty(); }
  std::size_t static_count() const { return Static()->size(); }

  // `authorization`: the Authorization header's value ("" when absent).
  AuthResult Authenticate(std::string_view authorization) const;

 private:
  std::shared_ptr<const std::vector<TokenEntry>> Static() const {
    std::lock_guard lock(mu_);
    return static_;
  }

  mutable std::mutex mu_;  // guards the static_ pointer only; the vector it points to is immutable
  std::shared_ptr<const std::vector<TokenEntry>> static_ = std::make_shared<const std::vector<TokenEntry>>();
  TokenLookup dynamic_;
};

// Extracts the token of "Bearer <token>" (scheme case-insensitive, spaces around the token ignored).
std::optional<std::string_view> BearerToken(std::string_view authorization);

// The key the HTTP server counts an authenticated caller's connections and body bytes against: one per
// token (role, name and a hash of the token; never the token itself), so two tokens of one person or one
// attempt's rank token and another attempt's are distinct identities.
std::string IdentityOf(const Principal& principal, std::string_view authorization);

}  // namespace shepherd
