// Summaries through the API (simulated time): counted, validated, refused by reason, and enough for the hang
// watchdog on their own.
#include <gtest/gtest.h>

#include "tests/api/health_api_fixture.h"

namespace shepherd::testing {
namespace {

namespace summary_api {

Json Summary(int rank, int64_t step, const Json& groups) {
  return {{"rank", rank}, {"attempt", 1}, {"kind", "summary"}, {"step", step}, {"phase", "train"},
          {"groups", groups}};
}

}  // namespace summary_api

// Summaries through the API: one report each in shepherd_reports_total; a bad field is named by its path; a
// completed seq going backwards and a named group claimed without the sender are ignored with their reason
// counted in /metrics, and never become a finding.
TEST_F(HealthApiTest, SummariesAreCountedValidatedAndRefusedByReason) {
  using summary_api::Summary;
  Json batch = Json::array();
  for (int r = 0; r < 8; ++r) batch.push_back(Summary(r, 3, Json::parse(R"([{"group": "dp", "completed": 40}])")));
  batch.push_back(Summary(0, 3, Json::parse(R"([{"group": "dp", "completed": 4, "open": {"seq": 4}}])")));
  batch.push_back(Summary(1, 3, Json::parse(R"([{"group": "dp", "completed": 39}])")));  // backwards
  batch.push_back(Summary(2, 3, Json::parse(R"([{"group": "ep", "completed": 1, "members": [0, 1]}])")));
  ApiReply r = Report(batch);
  ASSERT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(r.body["accepted"], 10) << r.body.dump();
  EXPECT_EQ(r.body["ignored"], 2) << r.body.dump();
  ASSERT_EQ(r.body["rejected"].size(), 1u) << r.body.dump();
  EXPECT_EQ(r.body["rejected"][0]["index"], 8);
  EXPECT_EQ(r.body["rejected"][0]["error"].get<std::string>().rfind("groups[0].open.seq: ", 0), 0u)
      << r.body.dump();
  const std::string metrics = api_.Get("/metrics").body.get<std::string>();
  EXPECT_NE(metrics.find("shepherd_reports_total{outcome=\"accepted\"} 8\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("shepherd_reports_total{outcome=\"ignored\"} 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("shepherd_reports_ignored_total{reason=\"seq_backwards\"} 1\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("shepherd_reports_ignored_total{reason=\"group_membership\"} 1\n"), std::string::npos)
      << metrics;
  // Every rank keeps sending summaries for two minutes: no finding of any kind.
  for (int s = 0; s < 120; ++s) {
    Json beat = Json::array();
    for (int rank = 0; rank < 8; ++rank)
      beat.push_back(Summary(rank, 3 + s, {{{"group", "dp"}, {"completed", 41 + s}, {"count", 1}}}));
    ASSERT_EQ(Second(beat), 202);
  }
  EXPECT_TRUE(api_.Get("/v1/failures?job=" + job_).body["failures"].empty())
      << api_.Get("/v1/failures?job=" + job_).body.dump();
}

// The hang watchdog from summaries alone: rank 6 heartbeats (summaries) inside no collective while its dp
// peers wait in dp#10 and its tp peer in tp#10: rank 6 is named, on n0.
TEST_F(HealthApiTest, AHangFromSummariesNamesTheRankOutsideCollectives) {
  using summary_api::Summary;
  const Json waiting = Json::parse(R"([{"group": "tp", "completed": 9}, {"group": "dp", "completed": 9,
                                       "open": {"seq": 10, "op": "allreduce"}}])");
  const Json tp_wait = Json::parse(R"([{"group": "tp", "completed": 9, "open": {"seq": 10, "op": "allreduce"}},
                                       {"group": "dp", "completed": 9}])");
  const Json idle = Json::parse(R"([{"group": "tp", "completed": 9}, {"group": "dp", "completed": 9}])");
  for (int s = 0; s < 200 && OfKind("hang").empty(); ++s) {
    Json beat = Json::array();
    for (int rank = 0; rank < 8; ++rank) {
      Json g = rank == 6 ? idle : rank == 7 ? tp_wait : waiting;
      if (s > 0 && rank != 6)  // keep each open collective's entry time (it is open since the start)
        for (Json& x : g)
          if (x.contains("open")) x["open"]["since"] = ToUnixSeconds(api_.clock_.Now()) - s;
      beat.push_back(Summary(rank, 5, g));
    }
    ASSERT_EQ(Second(beat), 202);
  }
  auto hangs = OfKind("hang");
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0]["ranks"], Json::array({6})) << hangs[0].dump();
  EXPECT_EQ(hangs[0]["nodes"], Json::array({"n0"}));
  EXPECT_TRUE(OfKind("heartbeat_lost").empty());
}

}  // namespace
}  // namespace shepherd::testing
