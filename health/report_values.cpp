#include "health/report_values.h"

#include <cmath>
#include <limits>

namespace shepherd::report_values {
namespace {

// Each reader once, for Json and LiteJson alike.

// Integral JSON number in [min, max]; an integral float (17.0) is accepted.
template <typename Json>
bool ReadIntOf(const Json& v, int64_t min, int64_t max, int64_t* out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned()) {
      uint64_t u = v.template get<uint64_t>();
      if (u > static_cast<uint64_t>(max)) return false;
      *out = static_cast<int64_t>(u);
    } else {
      *out = v.template get<int64_t>();
    }
  } else if (v.is_number_float()) {
    double d = v.template get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < -9.0e15 || d > 9.0e15) return false;
    *out = static_cast<int64_t>(d);
  } else {
    return false;
  }
  return *out >= min && *out <= max;
}

// A number, or one of the strings "nan", "inf", "+inf", "-inf" (any case), which JSON cannot spell.
template <typename Json>
bool ReadMetricOf(const Json& v, double* out) {
  if (v.is_number()) {
    *out = v.template get<double>();
    return true;
  }
  if (!v.is_string()) return false;
  const std::string& s = v.template get_ref<const std::string&>();
  auto eq = [&s](const char* lit) {
    size_t i = 0;
    for (; lit[i] != '\0'; ++i)
      if (i >= s.size() || (s[i] | 0x20) != lit[i]) return false;
    return i == s.size();
  };
  if (eq("nan"))
    *out = std::numeric_limits<double>::quiet_NaN();
  else if (eq("inf") || eq("+inf"))
    *out = std::numeric_limits<double>::infinity();
  else if (eq("-inf"))
    *out = -std::numeric_limits<double>::infinity();
  else
    return false;
  return true;
}

// RFC 3339 string or Unix seconds (float).
template <typename Json>
bool ReadTimeOf(const Json& v, Time* out) {
  if (v.is_number()) {
    double s = v.template get<double>();
    std::optional<Time> t = s >= 0 ? TimeFromUnixSeconds(s) : std::nullopt;  // not beyond 2262
    if (!t) return false;
    *out = *t;
    return true;
  }
  if (!v.is_string()) return false;
  auto t = ParseRfc3339(v.template get_ref<const std::string&>());
  if (!t) return false;
  *out = *t;
  return true;
}

template <typename Json>
bool ReadStringOf(const Json& v, size_t max_len, bool allow_empty, std::string* out) {
  if (!v.is_string()) return false;
  const std::string& s = v.template get_ref<const std::string&>();
  if (s.size() > max_len || (!allow_empty && s.empty())) return false;
  *out = s;
  return true;
}

}  // namespace

bool ReadInt(const Json& v, int64_t min, int64_t max, int64_t* out) { return ReadIntOf(v, min, max, out); }
bool ReadInt(const LiteJson& v, int64_t min, int64_t max, int64_t* out) { return ReadIntOf(v, min, max, out); }
bool ReadMetric(const Json& v, double* out) { return ReadMetricOf(v, out); }
bool ReadMetric(const LiteJson& v, double* out) { return ReadMetricOf(v, out); }
bool ReadTime(const Json& v, Time* out) { return ReadTimeOf(v, out); }
bool ReadTime(const LiteJson& v, Time* out) { return ReadTimeOf(v, out); }
bool ReadString(const Json& v, size_t max_len, bool allow_empty, std::string* out) {
  return ReadStringOf(v, max_len, allow_empty, out);
}
bool ReadString(const LiteJson& v, size_t max_len, bool allow_empty, std::string* out) {
  return ReadStringOf(v, max_len, allow_empty, out);
}

bool IsHex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  return true;
}

}  // namespace shepherd::report_values
