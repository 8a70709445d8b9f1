// Field-by-field reading of untrusted JSON objects. Each getter records a FieldError (by JSON path) instead
// of failing fast, so one response can list every invalid field. For core/ codecs and api/ handlers.
#pragma once

#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace shepherd {

// Characters (Unicode code points) of valid UTF-8 `s`.
std::size_t Utf8Length(std::string_view s);
// The first `chars` characters of valid UTF-8 `s` (whole code points).
std::string Utf8Prefix(std::string_view s, std::size_t chars);
// True when `s` holds a control character: C0 (NUL above all) or DEL. Names, ids, labels, paths and reasons
// refuse them: they end up in logs, file names and other programs' argv. `allow_whitespace` lets tab, line
// feed and carriage return through, for program text (argv elements and environment values: a script given
// to `sh -c` has lines); NUL is refused either way (execve would cut the string there).
bool HasControlCharacter(std::string_view s, bool allow_whitespace = false);

class FieldReader {
 public:
  // `obj` must outlive the reader. `prefix` is the JSON path of obj ("" at the root).
  FieldReader(const Json& obj, std::string prefix, std::vector<FieldError>* errors);

  bool ok() const { return object_ != nullptr; }
  const Json* Find(const char* key) const;  // null when absent or when obj is not an object
  std::string Path(const char* key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  void Error(const std::string& path, std::string message) { errors_->push_back({path, std::move(message)}); }

  std::optional<long long> Int(const char* key, bool required, long long min, long long max);
  std::optional<double> Number(const char* key, bool required, double min, double max);
  // A string of at most `max_len` characters (code points, not bytes) and no control characters or NUL.
  std::optional<std::string> String(const char* key, bool required, size_t max_len = 256);
  std::optional<bool> Bool(const char* key);
  // One of `allowed`; reports the allowed values otherwise.
  std::optional<std::string> Enum(const char* key, std::initializer_list<const char*> allowed);
  // Rejects keys not in `known` (typos must not silently fall back to defaults).
  void OnlyKnown(std::initializer_list<const char*> known);

 private:
  const Json* object_;
  std::string prefix_;
  std::vector<FieldError>* errors_;
};

}  // namespace shepherd
