#include "core/redact.h"

#include <algorithm>
#include <cctype>

namespace shepherd {
namespace {

bool IsHex(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}
bool IsWord(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
bool IsTokenChar(char c) {
  return IsWord(c) || std::string_view("._~+/=:-").find(c) != std::string_view::npos;
}

bool StartsWithIgnoringCase(std::string_view text, std::size_t at, std::string_view prefix) {
  if (text.size() - at < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[at + i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

std::string ReplaceExact(std::string text, const std::string& secret) {
  for (std::size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), kRedacted);
    at += kRedacted.size();
  }
  return text;
}

}  // namespace

std::string RedactSecrets(std::string_view input, const std::vector<std::string>& secrets) {
  std::string text(input);
  std::vector<std::string> known;
  for (const std::string& s : secrets)
    if (s.size() >= kMinSecretLength) known.push_back(s);
  std::sort(known.begin(), known.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const std::string& s : known) text = ReplaceExact(std::move(text), s);

  static constexpr std::string_view kPrefixes[] = {"SHEPHERD_TOKEN=", "Bearer "};
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t value = std::string::npos;
    for (std::string_view p : kPrefixes)
      if (StartsWithIgnoringCase(text, i, p)) {
        out.append(text, i, p.size());
        value = i + p.size();
        if (value < text.size() && (text[value] == '"' || text[value] == '\'')) out += text[value++];
        break;
      }
    if (value != std::string::npos) {
      std::size_t end = value;
      while (end < text.size() && IsTokenChar(text[end])) ++end;
      if (end - value >= kMinSecretLength && text.compare(value, end - value, kRedacted) != 0) {
        out += kRedacted;
      } else {
        out.append(text, value, end - value);
      }
      i = end;
      continue;
    }
    if (IsHex(text[i]) && (i == 0 || !IsWord(text[i - 1]))) {
      std::size_t end = i;
      while (end < text.size() && IsHex(text[end])) ++end;
      if (end - i >= kMinHexSecret && (end == text.size() || !IsWord(text[end]))) {
        out += kRedacted;
        i = end;
        continue;
      }
      out.append(text, i, end - i);
      i = end;
      continue;
    }
    out += text[i++];
  }
  return out;
}

}  // namespace shepherd
