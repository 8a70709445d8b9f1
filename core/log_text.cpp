#include "core/log_text.h"

namespace shepherd {
namespace {

// The escape of the code point starting at text[i] and its length in bytes; empty when kept as it is.
std::string_view EscapeAt(std::string_view text, std::size_t i, std::size_t* len, char (&buf)[5]) {
  *len = 1;
  const auto c = static_cast<unsigned char>(text[i]);
  switch (c) {
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (c < 0x20 || c == 0x7f) {
    static constexpr char kHex[] = "0123456789abcdef";
    buf[0] = '\\', buf[1] = 'x', buf[2] = kHex[c >> 4], buf[3] = kHex[c & 15], buf[4] = '\0';
    return std::string_view(buf, 4);
  }
  if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x85) {
    *len = 2;
    return "\\u0085";
  }
  if (c == 0xe2 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80) {
    const auto last = static_cast<unsigned char>(text[i + 2]);
    if (last == 0xa8 || last == 0xa9) {
      *len = 3;
      return last == 0xa8 ? "\\u2028" : "\\u2029";
    }
  }
  return {};
}

}  // namespace

bool NeedsLogEscape(std::string_view text) {
  char buf[5];
  for (std::size_t i = 0, len = 1; i < text.size(); i += len)
    if (!EscapeAt(text, i, &len, buf).empty()) return true;
  return false;
}

std::string EscapeLogText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char buf[5];
  for (std::size_t i = 0, len = 1; i < text.size(); i += len) {
    std::string_view e = EscapeAt(text, i, &len, buf);
    if (e.empty())
      out += text[i];
    else
      out += e;
  }
  return out;
}

}  // namespace shepherd
