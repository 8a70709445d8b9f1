// Readers for single untrusted JSON values of a report. Internal to health/report.cpp; no allocation.
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"
#include "core/json_lite.h"
#include "core/time.h"

namespace shepherd::report_values {

// Integral JSON number in [min, max]; an integral float (17.0) is accepted.
bool ReadInt(const Json& v, int64_t min, int64_t max, int64_t* out);
// A number, or one of the strings "nan", "inf", "+inf", "-inf" (any case), which JSON cannot spell.
bool ReadMetric(const Json& v, double* out);
// RFC 3339 string or Unix seconds (a finite number >= 0), within what Time holds (up to 2262-04-11).
bool ReadTime(const Json& v, Time* out);
// A string of at most max_len bytes (non-empty unless allow_empty), copied into *out.
bool ReadString(const Json& v, size_t max_len, bool allow_empty, std::string* out);
bool IsHex(const std::string& s);

// The same readers for a value of the heartbeat's fast path (core/json_lite.h).
bool ReadInt(const LiteJson& v, int64_t min, int64_t max, int64_t* out);
bool ReadMetric(const LiteJson& v, double* out);
bool ReadTime(const LiteJson& v, Time* out);
bool ReadString(const LiteJson& v, size_t max_len, bool allow_empty, std::string* out);

}  // namespace shepherd::report_values
