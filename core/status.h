// Errors as values. A Status is ok or carries a code, a message and, for validation failures, the list of
// invalid fields by JSON path. Result<T> is a T or a non-ok Status. Neither throws.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace shepherd {

enum class Code {
  kOk,
  kInvalidArgument,     // malformed input (HTTP 400)
  kInvalidContent,      // well-formed but invalid values (HTTP 422), see fields()
  kNotFound,            // 404
  kConflict,            // 409
  kResourceExhausted,   // 429
  kUnavailable,         // 503: not ready, storage failed
  kFailedPrecondition,  // 503: this replica may no longer act (leadership lost); another one may
  kInternal,            // 500
};

struct FieldError {
  std::string field;  // JSON path, e.g. "parallelism.tp"
  std::string message;
  bool operator==(const FieldError&) const = default;
};

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message, std::vector<FieldError> fields = {})
      : code_(code), message_(std::move(message)), fields_(std::move(fields)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::vector<FieldError>& fields() const { return fields_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::vector<FieldError> fields_;
};

inline Status InvalidArgument(std::string m) {
  return {Code::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {Code::kNotFound, std::move(m)};
}
inline Status Conflict(std::string m) {
  return {Code::kConflict, std::move(m)};
}
inline Status Unavailable(std::string m) {
  return {Code::kUnavailable, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}
inline Status Internal(std::string m) {
  return {Code::kInternal, std::move(m)};
}
inline Status InvalidContent(std::string m, std::vector<FieldError> fields) {
  return {Code::kInvalidContent, std::move(m), std::move(fields)};
}

// REQUIRES: a Result built from a Status holds a non-ok Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace shepherd
