#include "core/time.h"

#include <gtest/gtest.h>

namespace shepherd {

TEST(Time, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(FormatRfc3339(FromUnixSeconds(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(FromUnixSeconds(1700000000.25)), "2023-11-14T22:13:20.250Z");
}

TEST(Time, ParsesZuluOffsetsAndFractions) {
  auto t = ParseRfc3339("2023-11-14T22:13:20.250Z");
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(ToUnixSeconds(*t), 1700000000.25);
  auto off = ParseRfc3339("2023-11-15T00:13:20+02:00");
  ASSERT_TRUE(off);
  EXPECT_DOUBLE_EQ(ToUnixSeconds(*off), 1700000000);
}

TEST(Time, RejectsMalformed) {
  for (const char* bad : {"", "2023-11-14", "2023-13-14T00:00:00Z", "2023-11-14T22:13:20",
                          "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20Zjunk", "abcd-11-14T22:13:20Z"})
    EXPECT_FALSE(ParseRfc3339(bad)) << bad;
}

}  // namespace shepherd
