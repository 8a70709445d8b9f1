#include "core/json_lite.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace shepherd {
namespace {

constexpr std::size_t kMaxKeys = 32;         // per object: a repeated key is looked for among them
constexpr std::size_t kMaxNumberChars = 64;  // a number's text
constexpr int kMaxIntegerDigits = 18;        // fits int64 and uint64: no range error to imitate

const LiteJson& Null() {
  static const LiteJson null{};
  return null;
}

}  // namespace

// Recursive descent over the subset described in the header; every method returns false for "not taken".
class LiteJsonParser {
 public:
  LiteJsonParser(std::string_view text, const JsonLimits& limits) : t_(text), limits_(limits) {}

  bool Document(LiteJson* out) {
    if (!Value(out, 0)) return false;
    Skip();
    return i_ == t_.size();
  }

 private:
  void Skip() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t' || t_[i_] == '\r')) ++i_;
  }
  bool Literal(const char* word) {
    const std::size_t n = std::strlen(word);
    if (t_.substr(i_, n) != word) return false;
    i_ += n;
    return true;
  }
  // One value more in the document (a member or an element), as ParseJsonText counts them.
  bool Count() { return ++values_ < limits_.max_values; }

  bool String(std::string* out) {
    ++i_;  // the opening quote
    const std::size_t start = i_;
    for (; i_ < t_.size(); ++i_) {
      const unsigned char c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        out->assign(t_.data() + start, i_ - start);
        ++i_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;  // escapes and UTF-8: ParseJsonText's
    }
    return false;
  }

  bool Number(LiteJson* out) {
    const std::size_t start = i_;
    auto digits = [&] {
      const std::size_t from = i_;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
      return i_ - from;
    };
    const bool negative = t_[i_] == '-';
    if (negative) ++i_;
    if (i_ >= t_.size()) return false;
    std::size_t int_digits = 0;
    if (t_[i_] == '0') {
      ++i_;
      int_digits = 1;
    } else if ((int_digits = digits()) == 0) {
      return false;
    }
    bool integer = true;
    if (i_ < t_.size() && t_[i_] == '.') {
      ++i_;
      if (digits() == 0) return false;
      integer = false;
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
      if (digits() == 0) return false;
      integer = false;
    }
    const std::size_t len = i_ - start;
    if (len >= kMaxNumberChars) return false;
    char buf[kMaxNumberChars];
    std::memcpy(buf, t_.data() + start, len);
    buf[len] = '\0';
    if (integer) {
      if (int_digits > kMaxIntegerDigits) return false;
      // As nlohmann::json: a negative integer is signed, any other unsigned.
      if (negative) {
        out->type_ = LiteJson::Type::kInt;
        out->int_ = std::strtoll(buf, nullptr, 10);
      } else {
        out->type_ = LiteJson::Type::kUInt;
        out->uint_ = std::strtoull(buf, nullptr, 10);
      }
      return true;
    }
    errno = 0;
    const double d = std::strtod(buf, nullptr);
    if (errno != 0 || !std::isfinite(d)) return false;
    out->type_ = LiteJson::Type::kFloat;
    out->float_ = d;
    return true;
  }

  bool Value(LiteJson* out, int depth) {
    Skip();
    if (i_ >= t_.size()) return false;
    switch (t_[i_]) {
      case '{':
        return Object(out, depth + 1);
      case '[':
        return Array(out, depth + 1);
      case '"':
        out->type_ = LiteJson::Type::kString;
        return String(&out->string_);
      case 't':
        out->type_ = LiteJson::Type::kBool;
        out->bool_ = true;
        return Literal("true");
      case 'f':
        out->type_ = LiteJson::Type::kBool;
        out->bool_ = false;
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number(out);
    }
  }

  bool Object(LiteJson* out, int depth) {
    if (depth >= limits_.max_depth) return false;
    ++i_;
    out->type_ = LiteJson::Type::kObject;
    Skip();
    if (i_ < t_.size() && t_[i_] == '}') {
      ++i_;
      return true;
    }
    out->members_.reserve(8);
    while (true) {
      Skip();
      if (i_ >= t_.size() || t_[i_] != '"' || out->members_.size() >= kMaxKeys ||
          out->members_.size() >= limits_.max_members || !Count())
        return false;
      LiteJson::Member& m = out->members_.emplace_back();
      if (!String(&m.key)) return false;
      for (std::size_t k = 0; k + 1 < out->members_.size(); ++k)
        if (out->members_[k].key == m.key) return false;  // repeated: ParseJsonText names it
      Skip();
      if (i_ >= t_.size() || t_[i_] != ':') return false;
      ++i_;
      if (!Value(&m.value, depth)) return false;
      Skip();
      if (i_ >= t_.size()) return false;
      if (t_[i_] == '}') {
        ++i_;
        return true;
      }
      if (t_[i_] != ',') return false;
      ++i_;
    }
  }

  bool Array(LiteJson* out, int depth) {
    if (depth >= limits_.max_depth) return false;
    ++i_;
    out->type_ = LiteJson::Type::kArray;
    Skip();
    if (i_ < t_.size() && t_[i_] == ']') {
      ++i_;
      return true;
    }
    while (true) {
      if (out->members_.size() >= limits_.max_elements || !Count()) return false;
      if (!Value(&out->members_.emplace_back().value, depth)) return false;
      Skip();
      if (i_ >= t_.size()) return false;
      if (t_[i_] == ']') {
        ++i_;
        return true;
      }
      if (t_[i_] != ',') return false;
      ++i_;
    }
  }

  std::string_view t_;
  const JsonLimits& limits_;
  std::size_t i_ = 0;
  std::size_t values_ = 0;
};

std::size_t LiteJson::size() const noexcept {
  switch (type_) {
    case Type::kNull:
      return 0;
    case Type::kArray:
    case Type::kObject:
      return members_.size();
    default:
      return 1;
  }
}

const LiteJson& LiteJson::operator[](std::size_t i) const { return members_[i].value; }

const LiteJson& LiteJson::operator[](std::string_view key) const {
  const_iterator it = find(key);
  return it == end() ? Null() : *it;
}

LiteJson::const_iterator LiteJson::find(std::string_view key) const {
  if (type_ == Type::kObject)
    for (const Member& m : members_)
      if (m.key == key) return const_iterator(&m);
  return end();
}

LiteJson::const_iterator LiteJson::begin() const { return const_iterator(members_.data()); }
LiteJson::const_iterator LiteJson::end() const { return const_iterator(members_.data() + members_.size()); }

std::optional<LiteJson> ParseLiteJson(std::string_view text, const JsonLimits& limits) {
  LiteJson out;
  LiteJsonParser p(text, limits);
  if (!p.Document(&out)) return std::nullopt;
  return out;
}

}  // namespace shepherd
