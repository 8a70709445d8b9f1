#include "control/finding_log.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

Finding At(const std::string& job, FindingKind kind, double unix_s) {
  Finding f;
  f.job = job;
  f.kind = kind;
  f.detected_at = FromUnixSeconds(unix_s);
  return f;
}

TEST(FindingLogTest, IdsIncreaseAndContinueAfterRestoredOnes) {
  FindingLog log;
  EXPECT_EQ(log.NextId(), "f-000001");
  Finding restored = At("job-1", FindingKind::kHang, 10);
  restored.id = "f-000041";
  log.Add(restored);
  EXPECT_EQ(log.NextId(), "f-000042");
  Finding f = At("job-1", FindingKind::kHang, 11);
  f.id = log.NextId();
  log.Add(f);
  EXPECT_EQ(log.NextId(), "f-000043");
  EXPECT_EQ(log.counts().at(FindingKind::kHang), 2u);
}

TEST(FindingLogTest, LatestOfAKindForAnAttemptIsTheNewestAndCanBeAmended) {
  FindingLog log;
  for (int attempt : {1, 1, 2}) {
    Finding f = At("job-1", FindingKind::kHang, 10 + log.size());
    f.attempt = attempt;
    f.id = log.NextId();
    log.Add(f);
  }
  Finding* hang = log.Latest("job-1", 1, FindingKind::kHang);
  ASSERT_NE(hang, nullptr);
  EXPECT_EQ(hang->id, "f-000002");
  EXPECT_EQ(log.Latest("job-1", 1, FindingKind::kNodeLost), nullptr);
  EXPECT_EQ(log.Latest("job-1", 3, FindingKind::kHang), nullptr);
  EXPECT_EQ(log.Latest("job-2", 1, FindingKind::kHang), nullptr);
  hang->flight_recorder.push_back({"/fr/dump", 5});
  EXPECT_EQ(log.Query({.job = "job-1"})[1].flight_recorder.size(), 1u);
}

TEST(FindingLogTest, QueriesByJobKindAndSince) {
  FindingLog log;
  const FindingKind kinds[] = {FindingKind::kHang, FindingKind::kNodeLost, FindingKind::kHang};
  for (int i = 0; i < 30; ++i) {
    Finding f = At(i % 3 == 0 ? "job-a" : "job-b", kinds[i % 3], 100 + i);
    f.id = log.NextId();
    log.Add(f);
  }
  // job-a holds i = 0, 3, ..., 27 (all hangs); job-b the rest.
  EXPECT_EQ(log.Query({.job = "job-a"}).size(), 10u);
  EXPECT_EQ(log.Query({.job = "job-b", .kind = FindingKind::kNodeLost}).size(), 10u);
  EXPECT_TRUE(log.Query({.job = "job-a", .kind = FindingKind::kNodeLost}).empty());
  EXPECT_TRUE(log.Query({.job = "job-none"}).empty());
  // since = 120 keeps i = 20..29: 10 findings, 7 of which are hangs (i % 3 != 1: 21, 23, 24, 26, 27, 29, 20).
  auto recent = log.Query({.since = FromUnixSeconds(120)});
  ASSERT_EQ(recent.size(), 10u);
  EXPECT_EQ(recent.front().detected_at, FromUnixSeconds(120));
  EXPECT_EQ(log.Query({.kind = FindingKind::kHang, .since = FromUnixSeconds(120)}).size(), 7u);
}

TEST(FindingLogTest, SinceStillCorrectWhenRestoredTimesAreOutOfOrder) {
  FindingLog log;
  for (double t : {50.0, 10.0, 70.0}) {
    Finding f = At("job-a", FindingKind::kHang, t);
    f.id = log.NextId();
    log.Add(f);
  }
  auto later = log.Query({.since = FromUnixSeconds(40)});
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[0].detected_at, FromUnixSeconds(50));
  EXPECT_EQ(later[1].detected_at, FromUnixSeconds(70));
}

TEST(FindingLogTest, RecentIsTheJobsNewestWindowOldestFirst) {
  FindingLog log;
  for (int i = 0; i < 5; ++i) {
    Finding f = At("job-a", FindingKind::kProcessExit, i);
    f.id = log.NextId();
    log.Add(f);
    Finding g = At("job-b", FindingKind::kHang, i);
    g.id = log.NextId();
    log.Add(g);
  }
  auto last3 = log.Recent("job-a", 3);
  ASSERT_EQ(last3.size(), 3u);
  EXPECT_EQ(last3[0].id, "f-000005");  // job-a's findings are f-1, f-3, f-5, f-7, f-9
  EXPECT_EQ(last3[2].id, "f-000009");
  EXPECT_EQ(log.Recent("job-a", 100).size(), 5u);
  EXPECT_TRUE(log.Recent("job-c", 3).empty());
}

}  // namespace
}  // namespace shepherd
