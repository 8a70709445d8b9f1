#include "core/fields.h"

#include <cmath>
#include <cstring>

namespace shepherd {

std::size_t Utf8Length(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count every byte that is not a continuation byte
  return n;
}

std::string Utf8Prefix(std::string_view s, std::size_t chars) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && n++ == chars) return std::string(s.substr(0, i));
  return std::string(s);
}

bool HasControlCharacter(std::string_view s, bool allow_whitespace) {
  for (unsigned char c : s)
    if ((c < 0x20 || c == 0x7f) && !(allow_whitespace && (c == '\t' || c == '\n' || c == '\r'))) return true;
  return false;
}

FieldReader::FieldReader(const Json& obj, std::string prefix, std::vector<FieldError>* errors)
    : object_(obj.is_object() ? &obj : nullptr), prefix_(std::move(prefix)), errors_(errors) {
  if (!object_) Error(prefix_.empty() ? "$" : prefix_, "must be an object");
}

const Json* FieldReader::Find(const char* key) const {
  if (!object_) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<long long> FieldReader::Int(const char* key, bool required, long long min, long long max) {
  const Json* v = Find(key);
  if (!v) {
    if (required && object_) Error(Path(key), "is required");
    return std::nullopt;
  }
  long long out;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<unsigned long long>() > static_cast<unsigned long long>(max)) {
      Error(Path(key), "must be at most " + std::to_string(max));
      return std::nullopt;
    }
    out = v->get<long long>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             v->get<double>() == std::floor(v->get<double>()) && std::fabs(v->get<double>()) < 9e18) {
    out = static_cast<long long>(v->get<double>());
  } else {
    Error(Path(key), "must be an integer");
    return std::nullopt;
  }
  if (out < min || out > max) {
    Error(Path(key), "must be between " + std::to_string(min) + " and " + std::to_string(max));
    return std::nullopt;
  }
  return out;
}

std::optional<double> FieldReader::Number(const char* key, bool required, double min, double max) {
  const Json* v = Find(key);
  if (!v) {
    if (required && object_) Error(Path(key), "is required");
    return std::nullopt;
  }
  if (!v->is_number()) {
    Error(Path(key), "must be a number");
    return std::nullopt;
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    Error(Path(key), "must be between " + Json(min).dump() + " and " + Json(max).dump());
    return std::nullopt;
  }
  return d;
}

std::optional<std::string> FieldReader::String(const char* key, bool required, size_t max_len) {
  const Json* v = Find(key);
  if (!v) {
    if (required && object_) Error(Path(key), "is required");
    return std::nullopt;
  }
  if (!v->is_string()) {
    Error(Path(key), "must be a string");
    return std::nullopt;
  }
  const auto& s = v->get_ref<const std::string&>();
  // Names, ids, paths and labels. The JSON parser already refused invalid UTF-8.
  if (HasControlCharacter(s)) {
    Error(Path(key), "must not contain control characters");
    return std::nullopt;
  }
  if (Utf8Length(s) > max_len) {
    Error(Path(key), "must be at most " + std::to_string(max_len) + " characters");
    return std::nullopt;
  }
  if (required && s.empty()) {
    Error(Path(key), "must not be empty");
    return std::nullopt;
  }
  return s;
}

std::optional<bool> FieldReader::Bool(const char* key) {
  const Json* v = Find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    Error(Path(key), "must be true or false");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> FieldReader::Enum(const char* key, std::initializer_list<const char*> allowed) {
  auto s = String(key, false);
  if (!s) return std::nullopt;
  for (const char* a : allowed)
    if (*s == a) return s;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  Error(Path(key), "must be one of: " + list);
  return std::nullopt;
}

void FieldReader::OnlyKnown(std::initializer_list<const char*> known) {
  if (!object_) return;
  for (const auto& [k, v] : object_->items()) {
    bool found = false;
    for (const char* n : known) found = found || k == n;
    if (!found) Error(Path(k.c_str()), "unknown field");
  }
}

}  // namespace shepherd
