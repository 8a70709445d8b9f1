#include "core/time.h"

#include <gtest/gtest.h>

#include <limits>

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

TEST(Time, RejectsWhatRfc3339DoesNotAllow) {
  for (const char* bad : {"2026-02-30T00:00:00Z", "2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z",
                          "2026-04-31T00:00:00Z", "2026-11-26T03:20:60Z", "2026-11-26T03:20:00+99:00",
                          "2026-11-26T03:20:00+24:00", "2026-11-26T03:20:00-05:60", "2026-11-26 03:20:00Z"})
    EXPECT_FALSE(ParseRfc3339(bad)) << bad;
  for (const char* good :
       {"2024-02-29T00:00:00Z", "2000-02-29T12:00:00Z", "2026-11-26T03:20:59.999+23:59",
        "2026-11-26t03:20:00z", "2026-12-31T23:59:59-23:59", "2026-11-26T03:20:00.123456789Z"})
    EXPECT_TRUE(ParseRfc3339(good)) << good;
  EXPECT_DOUBLE_EQ(ToUnixSeconds(*ParseRfc3339("2023-11-14T16:43:20-05:30")), 1700000000);
}

// Time is int64 nanoseconds: a time it cannot hold is refused instead of wrapping around to 1677.
TEST(Time, RefusesTimesTheClockCannotHold) {
  EXPECT_TRUE(ParseRfc3339("2262-04-11T23:47:15Z"));
  EXPECT_TRUE(ParseRfc3339("1677-09-22T00:00:00Z"));
  for (const char* bad :
       {"2262-04-12T00:00:00Z", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "1677-09-21T00:00:00Z"})
    EXPECT_FALSE(ParseRfc3339(bad)) << bad;
  ASSERT_TRUE(TimeFromUnixSeconds(1700000000.25));
  EXPECT_DOUBLE_EQ(ToUnixSeconds(*TimeFromUnixSeconds(1700000000.25)), 1700000000.25);
  EXPECT_TRUE(TimeFromUnixSeconds(-1e9));
  EXPECT_TRUE(TimeFromUnixSeconds(9223372035.5));
  for (double bad : {9223372036.0, 9.3e18, -1e308, 1e308, std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    EXPECT_FALSE(TimeFromUnixSeconds(bad)) << bad;
}

}  // namespace shepherd
