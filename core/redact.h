// Secret redaction for text that leaves a rank's node or lands in a viewer-readable record (log tails, exit
// errors, flight-recorder paths, findings). Pure and thread-safe.
//
// Replaced by kRedacted, whatever the credential format:
//   - every occurrence of each value in `secrets` of at least kMinSecretLength characters (the exact
//     credentials the caller knows, e.g. a rank's SHEPHERD_TOKEN and the agent's own token);
//   - the value after `SHEPHERD_TOKEN=` or `Bearer ` (case-insensitive, optionally quoted): a run of at least
//     kMinSecretLength characters of [A-Za-z0-9._~+/=:-];
//   - any run of at least kMinHexSecret hexadecimal digits not inside a longer word (the shape of a
//     Shepherd token's random part).
// Text without a match is returned unchanged; redacting twice changes nothing more.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shepherd {

inline constexpr std::string_view kRedacted = "[redacted]";
inline constexpr std::size_t kMinSecretLength = 8;
inline constexpr std::size_t kMinHexSecret = 64;

std::string RedactSecrets(std::string_view text, const std::vector<std::string>& secrets = {});

}  // namespace shepherd
