// LiteJson (core/json_lite.h): what it takes reads exactly as the nlohmann::json that ParseJsonText builds
// from the same text (the reference here: an independent parser), and what it does not take is left to
// ParseJsonText (nullopt), never answered differently.
#include "core/json_lite.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>

namespace shepherd {
namespace {

// Every reading the parsers use, compared recursively; a difference is described by its path.
void ExpectSame(const LiteJson& l, const Json& j, const std::string& path = "$") {
  ASSERT_EQ(l.is_null(), j.is_null()) << path;
  ASSERT_EQ(l.is_boolean(), j.is_boolean()) << path;
  ASSERT_EQ(l.is_number(), j.is_number()) << path;
  ASSERT_EQ(l.is_number_integer(), j.is_number_integer()) << path;
  ASSERT_EQ(l.is_number_unsigned(), j.is_number_unsigned()) << path;
  ASSERT_EQ(l.is_number_float(), j.is_number_float()) << path;
  ASSERT_EQ(l.is_string(), j.is_string()) << path;
  ASSERT_EQ(l.is_array(), j.is_array()) << path;
  ASSERT_EQ(l.is_object(), j.is_object()) << path;
  ASSERT_EQ(l.size(), j.size()) << path;
  ASSERT_EQ(l.empty(), j.empty()) << path;
  if (j.is_boolean()) EXPECT_EQ(l.get<bool>(), j.get<bool>()) << path;
  if (j.is_number()) {
    EXPECT_EQ(l.get<int64_t>(), j.get<int64_t>()) << path;
    EXPECT_EQ(l.get<uint64_t>(), j.get<uint64_t>()) << path;
    EXPECT_EQ(l.get<int>(), j.get<int>()) << path;
    const double a = l.get<double>(), b = j.get<double>();
    EXPECT_EQ(0, std::memcmp(&a, &b, sizeof a)) << path << ": " << a << " vs " << b;
  }
  if (j.is_string()) EXPECT_EQ(l.get_ref<const std::string&>(), j.get_ref<const std::string&>()) << path;
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i) ExpectSame(l[i], j[i], path + "[" + std::to_string(i) + "]");
  if (j.is_object()) {
    std::set<std::string> keys;
    for (auto it = l.begin(); it != l.end(); ++it) {
      keys.insert(it.key());
      ASSERT_TRUE(j.contains(it.key())) << path << "." << it.key();
      ExpectSame(*it, j.at(it.key()), path + "." + it.key());
      EXPECT_EQ(&*l.find(it.key()), &*it) << path;
      EXPECT_EQ(&l[it.key()], &*it) << path;
    }
    EXPECT_EQ(keys.size(), j.size()) << path;
    EXPECT_TRUE(l.find("no such key") == l.end()) << path;
    EXPECT_TRUE(l["no such key"].is_null()) << path;
  }
}

void ExpectTakenAsTree(const std::string& text) {
  SCOPED_TRACE(text);
  Result<Json> tree = ParseJsonText(text);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  std::optional<LiteJson> lite = ParseLiteJson(text);
  ASSERT_TRUE(lite.has_value());
  ExpectSame(*lite, *tree);
}

TEST(LiteJsonTest, ReadsAsTheTreeDoes) {
  for (const char* text : {
           "null", "true", "false", "0", "-0", "7", "-7", "123456789012345678", "-123456789012345678",
           "0.5", "-0.0", "1e3", "1E-3", "2.5e+10", "1796040000.125", "0.1234", "3.0", "\"\"", "\"tp\"",
           "[]", "{}", " [ 1 , 2 ,3 ] ", "\t{\n\"a\" :\r1}\n", "[[[]]]", "{\"a\":{\"b\":[{\"c\":null}]}}",
           R"({"rank":3,"attempt":1,"time":1796040000.125,"kind":"summary","step":412,"phase":"train",)"
           R"("groups":[{"group":"tp","completed":1643,"count":1,"wait_s":0.0123},)"
           R"({"group":"dp","completed":1643,"open":{"seq":1644,"op":"allreduce","since":1796039990.5},"count":0}]})",
           R"({"job":"job-000001","attempt":1,"rank":800,"pid":40000,"state":"running","fenced":false,"x":[true,null]})",
       })
    ExpectTakenAsTree(text);
}

// Random documents of the subset (numbers of every form, nesting, whitespace) against the tree.
TEST(LiteJsonTest, RandomDocumentsReadAsTheTreeDoes) {
  std::mt19937 rng(42);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    switch (depth > 3 ? pick(4) : pick(6)) {
      case 0: {
        std::string s = pick(2) ? "-" : "";
        s += pick(3) == 0 ? "0" : std::to_string(1 + rng() % 999999999) + std::string(pick(3), '7');
        if (pick(2)) s += "." + std::to_string(rng() % 100000);
        if (pick(3) == 0) s += std::string(pick(2) ? "e" : "E") + (pick(2) ? "-" : "+") + std::to_string(pick(200));
        return s;
      }
      case 1:
        return pick(3) == 0 ? "null" : pick(2) ? "true" : "false";
      case 2: {
        std::string s = "\"";
        for (int n = pick(20); n > 0; --n) {
          char c = static_cast<char>(' ' + pick(95));  // printable ASCII
          s += c == '"' || c == '\\' ? 'q' : c;
        }
        return s + "\"";
      }
      case 3:
        return std::to_string(rng());
      case 4: {
        std::string s = "[";
        for (int n = pick(5); n > 0; --n) s += value(depth + 1) + (n > 1 ? " ," : "");
        return s + "]";
      }
      default: {
        std::string s = "{";
        for (int n = pick(6); n > 0; --n)
          s += "\"k" + std::to_string(n) + "\" : " + value(depth + 1) + (n > 1 ? ",\n" : "");
        return s + "}";
      }
    }
  };
  for (int i = 0; i < 500; ++i) {
    const std::string text = value(0);
    ExpectTakenAsTree(text);
  }
}

// Outside the subset, or not JSON, or near a limit: left to ParseJsonText, whichever way it decides.
TEST(LiteJsonTest, LeavesEverythingElseToTheTree) {
  for (const char* text : {
           "", " ", "{", "[1,]", "{\"a\":}", "{\"a\" 1}", "{,}", "01", "1.", "-", ".5", "+1", "1e", "tru",
           "nul", "[1] x", "{\"a\":1}}", "\"open", "{\"a\":1,\"a\":2}", "\"\\n\"", "\"caf\xc3\xa9\"",
           "\"tab\there\"", "1234567890123456789", "-1234567890123456789", "1e400", "-1e400", "{\"a\":1,}",
           "[1 2]", "{1:2}", "NaN", "Infinity",
       }) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(ParseLiteJson(text).has_value());
  }
  // More than 32 keys in one object.
  std::string wide = "{";
  for (int i = 0; i < 33; ++i) wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  EXPECT_TRUE(ParseJsonText(wide + "}").ok());
  EXPECT_FALSE(ParseLiteJson(wide + "}").has_value());
  // Limits: nesting and values at the limit are the tree's to refuse (or take).
  JsonLimits tight;
  tight.max_depth = 3;
  EXPECT_TRUE(ParseLiteJson("[[1]]", tight).has_value());
  EXPECT_FALSE(ParseLiteJson("[[[1]]]", tight).has_value());
  tight.max_values = 4;
  EXPECT_TRUE(ParseLiteJson("[1,2,3]", tight).has_value());
  EXPECT_FALSE(ParseLiteJson("[1,2,3,4]", tight).has_value());
  EXPECT_FALSE(ParseJsonText("[1,2,3,4,5]", tight).ok());
}

}  // namespace
}  // namespace shepherd
