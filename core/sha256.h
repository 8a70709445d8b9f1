// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for credentials derived from a stored secret
// (control/rank_tokens.h). Small inputs only: everything is hashed in one call, no streaming interface.
// Pure functions, thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace shepherd {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(std::string_view data);
Sha256Digest HmacSha256(std::string_view key, std::string_view message);
// The digest as 64 lowercase hex digits.
std::string HexOf(const Sha256Digest& d);

}  // namespace shepherd
