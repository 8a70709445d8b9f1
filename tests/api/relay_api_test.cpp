// Relayed reports (docs/agent-protocol.md, "Relayed reports"): an agent's heartbeat carries its ranks'
// reports; the daemon ingests them as POST /v1/jobs/{id}/reports would, for the node's own ranks of the
// current attempt only, and a refused report never changes the heartbeat's own effect.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "api/relayed_reports.h"
#include "tests/api/agent_api_fixture.h"

namespace shepherd::testing {
namespace {

class RelayApiTest : public AgentApiTest {
 protected:
  // The job's ranks on `node` in attempt 1, as placed.
  std::vector<int> RanksOn(const std::string& node) {
    std::vector<int> out;
    const Json assigned = Assignments(node);  // not a range-for over a temporary's member
    for (const Json& r : assigned["ranks"]) out.push_back(r["rank"].get<int>());
    return out;
  }
  static Json Entry(const std::string& job, int attempt, int rank, Json reports) {
    return {{"job", job}, {"attempt", attempt}, {"rank", rank}, {"reports", std::move(reports)}};
  }
  static Json Checkpoint(int rank, int attempt, int step) {
    return {{"rank", rank},
            {"attempt", attempt},
            {"kind", "checkpoint"},
            {"step", step},
            {"path", "/c/" + std::to_string(step)},
            {"scope", "replicated"}};
  }
  ApiReply HeartbeatWith(const std::string& node, const Json& processes, const Json& entries) {
    return api_.Post("/v1/nodes/" + node + "/heartbeat",
                     {{"processes", processes}, {"gpu_faults", Json::array()}, {"reports", entries}});
  }
  double Metric(const std::string& series) {
    std::istringstream text(api_.Get("/metrics").body.get<std::string>());
    for (std::string line; std::getline(text, line);)
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    return -1;
  }
  size_t Checkpoints() { return api_.Get("/v1/jobs/" + job_ + "/checkpoints").body["checkpoints"].size(); }
};

TEST_F(RelayApiTest, ReportsOfTheNodesOwnRanksAreIngestedAsIfPosted) {
  const int rank = RanksOn("n0").at(0);
  ASSERT_EQ(Heartbeat("n0", Running("n0", 1)).status, 200);
  ASSERT_EQ(Heartbeat("n1", Running("n1", 1)).status, 200);
  const double before =
      std::max(0.0, Metric("shepherd_reports_total{outcome=\"accepted\"}"));  // -1: none yet
  Json reports = Json::array({{{"rank", rank}, {"attempt", 1}, {"kind", "step"}, {"step", 5}, {"loss", 1.5}},
                              Checkpoint(rank, 1, 5)});
  ApiReply r = HeartbeatWith("n0", Running("n0", 1), Json::array({Entry(job_, 1, rank, reports)}));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["reports_accepted"], 2);
  EXPECT_EQ(r.body["reports_rejected"], 0);
  EXPECT_GT(r.body["lease_s"].get<double>(), 0);
  EXPECT_EQ(Metric("shepherd_reports_total{outcome=\"accepted\"}"), before + 2);
  Json ckpts = api_.Get("/v1/jobs/" + job_ + "/checkpoints").body["checkpoints"];
  ASSERT_EQ(ckpts.size(), 1u) << ckpts.dump();
  EXPECT_EQ(ckpts[0]["step"], 5);
  EXPECT_EQ(Metric("shepherd_reports_ignored_total{reason=\"relay_foreign\"}"), 0);
}

TEST_F(RelayApiTest, AnotherNodesRankOrAnOldAttemptIsIgnoredAndCounted) {
  const int theirs = RanksOn("n1").at(0);
  const int ours = RanksOn("n0").at(0);
  ASSERT_EQ(Heartbeat("n0", Running("n0", 1)).status, 200);
  ASSERT_EQ(Heartbeat("n1", Running("n1", 1)).status, 200);
  Json entries =
      Json::array({Entry(job_, 1, theirs, Json::array({Checkpoint(theirs, 1, 7)})),
                   Entry(job_, 0, ours, Json::array({Checkpoint(ours, 0, 7), Checkpoint(ours, 0, 8)})),
                   Entry("job-999999", 1, ours, Json::array({Checkpoint(ours, 1, 7)}))});
  ApiReply r = HeartbeatWith("n0", Running("n0", 1), entries);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["reports_accepted"], 0);
  EXPECT_EQ(r.body["reports_rejected"], 4);
  EXPECT_EQ(Checkpoints(), 0u);
  EXPECT_EQ(Metric("shepherd_reports_ignored_total{reason=\"relay_foreign\"}"), 4);
  EXPECT_EQ(Metric("shepherd_heartbeat_ignored_total{what=\"reports\"}"), 3);
  EXPECT_EQ(api_.Get("/v1/failures").body["failures"].size(), 0u);  // no finding from any of it
}

TEST_F(RelayApiTest, AReportNamingAnotherRankInsideAnEntryIsRejectedAlone) {
  const std::vector<int> on_n0 = RanksOn("n0");
  ASSERT_GE(on_n0.size(), 2u);
  ASSERT_EQ(Heartbeat("n0", Running("n0", 1)).status, 200);
  Json reports = Json::array({{{"rank", on_n0[0]}, {"attempt", 1}, {"kind", "heartbeat"}},
                              Checkpoint(on_n0[1], 1, 9),  // another rank, even of the same node
                              Checkpoint(on_n0[0], 2, 9),  // another attempt
                              {{"rank", on_n0[0]}, {"attempt", 1}, {"kind", "bogus"}}});
  ApiReply r = HeartbeatWith("n0", Running("n0", 1), Json::array({Entry(job_, 1, on_n0[0], reports)}));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["reports_accepted"], 1);
  EXPECT_EQ(r.body["reports_rejected"], 3);
  EXPECT_EQ(Checkpoints(), 0u);
}

TEST_F(RelayApiTest, RefusedRelayedReportsNeverHoldUpTheHeartbeatsExitsAndLease) {
  const std::vector<int> on_n0 = RanksOn("n0");
  ASSERT_EQ(Heartbeat("n0", Running("n0", 1)).status, 200);
  ASSERT_EQ(Heartbeat("n1", Running("n1", 1)).status, 200);
  Json steps = Json::array();
  for (int r = 0; r < 8; ++r) steps.push_back({{"rank", r}, {"attempt", 1}, {"kind", "step"}, {"step", 1}});
  ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", steps}}).status, 202);
  Json procs = Running("n0", 1);
  procs[0]["state"] = "exited";
  procs[0]["exit_code"] = 3;
  // A far-future step refuses its whole entry (as it refuses a POSTed batch).
  Json far =
      Json::array({{{"rank", on_n0[0]}, {"attempt", 1}, {"kind", "step"}, {"step", int64_t{1} << 50}}});
  ApiReply r = HeartbeatWith("n0", procs, Json::array({Entry(job_, 1, on_n0[0], far)}));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["reports_rejected"], 1);
  ASSERT_EQ(r.body["ack_exits"].size(), 1u);
  EXPECT_GT(r.body["lease_s"].get<double>(), 0);
  Json f = api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"];
  ASSERT_EQ(f.size(), 1u) << f.dump();
  EXPECT_EQ(f[0]["kind"], "process_exit");
}

TEST_F(RelayApiTest, MalformedEntriesAre422NamingEachFieldAndChangeNothing) {
  const int rank = RanksOn("n0").at(0);
  ASSERT_EQ(Heartbeat("n0", Running("n0", 1)).status, 200);
  Json entries = Json::array(
      {{{"job", "evil\n[info] forged"}, {"attempt", 1}, {"rank", rank}, {"reports", Json::array()}},
       {{"job", job_}, {"attempt", 1}, {"rank", -1}, {"reports", Json::array()}},
       {{"job", job_}, {"attempt", "1"}, {"rank", rank}, {"reports", "none"}},
       {{"job", job_}, {"rank", rank}, {"reports", Json::array({Checkpoint(rank, 1, 4)})}},
       5});
  Json procs = Running("n0", 1);
  procs[0]["state"] = "exited";
  procs[0]["exit_code"] = 3;
  ApiReply r = HeartbeatWith("n0", procs, entries);
  ASSERT_EQ(r.status, 422) << r.body.dump();
  std::set<std::string> fields;
  for (const Json& e : r.body["errors"]) fields.insert(e["field"]);
  EXPECT_EQ(fields, (std::set<std::string>{"reports[0].job", "reports[1].rank", "reports[2].attempt",
                                           "reports[2].reports", "reports[3].attempt", "reports[4]"}));
  EXPECT_EQ(Checkpoints(), 0u);
  EXPECT_EQ(api_.Get("/v1/failures").body["failures"].size(), 0u);  // the exit was not taken either
  EXPECT_EQ(HeartbeatWith("n0", Running("n0", 1), "none").status, 422);
  // Bounded: at most 64 entries of at most 256 reports each.
  Json many = Json::array();
  for (int i = 0; i < 65; ++i) many.push_back(Entry(job_, 1, rank, Json::array()));
  ApiReply too_many = HeartbeatWith("n0", Running("n0", 1), many);
  ASSERT_EQ(too_many.status, 422);
  EXPECT_EQ(too_many.body["errors"][0]["field"], "reports");
  Json long_entry = Json::array();
  for (int i = 0; i < 257; ++i) long_entry.push_back({{"rank", rank}, {"attempt", 1}, {"kind", "heartbeat"}});
  ApiReply too_long = HeartbeatWith("n0", Running("n0", 1), Json::array({Entry(job_, 1, rank, long_entry)}));
  ASSERT_EQ(too_long.status, 422);
  EXPECT_EQ(too_long.body["errors"][0]["field"], "reports[0].reports");
  EXPECT_EQ(HeartbeatWith("n0", Running("n0", 1), Json::array({Entry(job_, 1, rank, Json::array())})).status,
            200);
}

TEST(ParseRelayedReports, TypedEntriesWithPerReportRejections) {
  std::vector<FieldError> errs;
  Json field = Json::parse(R"([{"job": "job-000001", "attempt": 2, "rank": 5, "extra": 1, "reports": [
      {"rank": 5, "attempt": 2, "kind": "step", "step": 3},
      {"rank": 5, "attempt": 2, "kind": "heartbeat", "time": 1764410000.5},
      {"rank": 6, "attempt": 2, "kind": "step", "step": 3},
      {"rank": 5, "attempt": 2, "kind": "step"}]}])");
  std::vector<RelayedReports> out = ParseRelayedReports(field, *TimeFromUnixSeconds(1764410001), &errs);
  ASSERT_TRUE(errs.empty());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rank, (RankRef{"job-000001", 2, 5}));
  ASSERT_EQ(out[0].batch.reports.size(), 2u);
  EXPECT_EQ(out[0].batch.reports[0].first, 0u);
  EXPECT_EQ(out[0].batch.reports[0].second.step, 3);
  EXPECT_EQ(out[0].batch.reports[1].first, 1u);
  ASSERT_EQ(out[0].batch.rejected.size(), 2u);
  EXPECT_EQ(out[0].batch.rejected[0].index, 2u);
  EXPECT_NE(out[0].batch.rejected[0].error.find("rank 6"), std::string::npos);
  EXPECT_EQ(out[0].batch.rejected[1].index, 3u);  // a step report without its step
  EXPECT_TRUE(ParseRelayedReports(Json(nullptr), Time{}, &errs).empty());
  EXPECT_TRUE(errs.empty());
}

}  // namespace
}  // namespace shepherd::testing
