// A read-only JSON value for the hot request bodies (the agent heartbeat and the rank reports it relays),
// parsed in one pass with one allocation per container instead of one per member, and read through the
// same member names as nlohmann::json (is_*, get<T>, get_ref, find, begin/end with key(), value, size,
// operator[]), so the parsers written for Json read it unchanged (health/report.h, api/relayed_reports.h).
//
// ParseLiteJson accepts only a strict subset of JSON: strings of printable ASCII without escapes, integers
// of at most 18 digits, finite numbers, objects of at most 32 distinct keys, within `limits` with room to
// spare. Anything else is "not taken" (nullopt), never an error: the caller then parses the text with
// ParseJsonText (core/json.h), which decides and names what is wrong. A value taken here reads exactly as
// the nlohmann::json that ParseJsonText would build from the same text (tests/core/json_lite_test.cpp).
// Pure; a LiteJson is immutable once parsed and may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/json.h"

namespace shepherd {

class LiteJson {
 public:
  enum class Type : uint8_t { kNull, kBool, kInt, kUInt, kFloat, kString, kArray, kObject };
  struct Member;  // {key, value}; an array's elements have empty keys

  class const_iterator {
   public:
    const_iterator() = default;
    explicit const_iterator(const Member* m) : m_(m) {}
    const LiteJson& operator*() const;
    const LiteJson* operator->() const;
    const std::string& key() const;
    const_iterator& operator++();
    bool operator==(const const_iterator& o) const { return m_ == o.m_; }
    bool operator!=(const const_iterator& o) const { return m_ != o.m_; }

   private:
    const Member* m_ = nullptr;
  };

  bool is_null() const noexcept { return type_ == Type::kNull; }
  bool is_boolean() const noexcept { return type_ == Type::kBool; }
  bool is_number() const noexcept { return type_ == Type::kInt || type_ == Type::kUInt || type_ == Type::kFloat; }
  bool is_number_integer() const noexcept { return type_ == Type::kInt || type_ == Type::kUInt; }
  bool is_number_unsigned() const noexcept { return type_ == Type::kUInt; }
  bool is_number_float() const noexcept { return type_ == Type::kFloat; }
  bool is_string() const noexcept { return type_ == Type::kString; }
  bool is_array() const noexcept { return type_ == Type::kArray; }
  bool is_object() const noexcept { return type_ == Type::kObject; }

  // As nlohmann::json: null 0, a container its members or elements, any other value 1.
  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }
  const LiteJson& operator[](std::size_t i) const;  // REQUIRES: an array, i < size()
  const LiteJson& operator[](std::string_view key) const;  // the member, or a null value when absent
  const_iterator find(std::string_view key) const;  // end() when absent or not an object
  const_iterator begin() const;
  const_iterator end() const;

  // Numbers convert as nlohmann::json's get<T> does (static_cast from what was stored); bool and
  // std::string return what is stored. Readers check the type first, as they do for Json.
  template <typename T>
  T get() const {
    if constexpr (std::is_same_v<T, bool>) {
      return bool_;
    } else if constexpr (std::is_same_v<T, std::string>) {
      return string_;
    } else {
      static_assert(std::is_arithmetic_v<T>);
      switch (type_) {
        case Type::kInt:
          return static_cast<T>(int_);
        case Type::kUInt:
          return static_cast<T>(uint_);
        case Type::kFloat:
          return static_cast<T>(float_);
        default:
          return T{};
      }
    }
  }
  template <typename R>
  const std::string& get_ref() const {
    static_assert(std::is_same_v<R, const std::string&>);
    return string_;
  }
  // The member's get<T>(), or `fallback` when absent (as nlohmann::json::value).
  template <typename T>
  T value(std::string_view key, T fallback) const {
    const_iterator it = find(key);
    return it == end() ? fallback : it->get<T>();
  }
  std::string value(std::string_view key, const char* fallback) const {
    const_iterator it = find(key);
    return it == end() ? std::string(fallback) : it->string_;
  }

 private:
  friend class LiteJsonParser;
  Type type_ = Type::kNull;
  union {  // by type_
    bool bool_;
    int64_t int_;
    uint64_t uint_;
    double float_ = 0;
  };
  std::string string_;
  std::vector<Member> members_;
};

struct LiteJson::Member {
  std::string key;
  LiteJson value;
};

inline const LiteJson& LiteJson::const_iterator::operator*() const { return m_->value; }
inline const LiteJson* LiteJson::const_iterator::operator->() const { return &m_->value; }
inline const std::string& LiteJson::const_iterator::key() const { return m_->key; }
inline LiteJson::const_iterator& LiteJson::const_iterator::operator++() {
  ++m_;
  return *this;
}

// `text` as a LiteJson, or nullopt when it is outside the subset above (or not JSON at all, or near a
// limit of `limits`): then ParseJsonText(text, limits) is the answer.
std::optional<LiteJson> ParseLiteJson(std::string_view text, const JsonLimits& limits = {});

}  // namespace shepherd
