// Every health finding through the API (router + controller + detectors) with simulated time: reports in,
// findings and grades out via /health, /failures, /checkpoints and /metrics.
#include <gtest/gtest.h>

#include <random>

#include "tests/api/api_harness.h"
#include "tests/api/health_api_fixture.h"

namespace shepherd::testing {
namespace {

TEST_F(HealthApiTest, StepsListFinalStepsOldestFirstWithinTheLimit) {
  Json empty = api_.Get("/v1/jobs/" + job_ + "/steps").body;
  EXPECT_EQ(empty["attempt"], 1);
  EXPECT_TRUE(empty["steps"].empty());
  for (int s = 1; s <= 5; ++s) AllStep(s, 2.0 + s);
  ApiReply r = api_.Get("/v1/jobs/" + job_ + "/steps");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["steps"].size(), 4u);  // step 5 is not final yet
  EXPECT_EQ(r.body["steps"][0]["step"], 1);
  EXPECT_DOUBLE_EQ(r.body["steps"][0]["loss"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(r.body["steps"][0]["step_time_s"].get<double>(), 1.0);
  EXPECT_TRUE(r.body["steps"][0]["time"].is_string());
  Json two = api_.Get("/v1/jobs/" + job_ + "/steps?limit=2").body["steps"];
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0]["step"], 3);
  EXPECT_EQ(two[1]["step"], 4);
  for (const char* bad : {"0", "2001", "x", "-1", "99999"}) {
    ApiReply b = api_.Get("/v1/jobs/" + job_ + "/steps?limit=" + bad);
    EXPECT_EQ(b.status, 422) << bad;
    EXPECT_NE(b.body.dump().find("limit"), std::string::npos) << b.body.dump();
  }
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/steps?limit=2000").status, 200);
  EXPECT_EQ(api_.Get("/v1/jobs/job-404/steps").status, 404);
}

TEST_F(HealthApiTest, BatchAnswersAcceptedRejectedAndIgnoresOldAttempts) {
  Json batch = Json::array({Heartbeat(0, 1), Json{{"rank", 1}, {"kind", "step"}},  // no attempt, no step
                            Heartbeat(99, 1),                                      // no such rank
                            Json{{"rank", 2}, {"attempt", 0}, {"kind", "heartbeat"}}});  // old attempt
  ApiReply r = Report(batch);
  ASSERT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(r.body["accepted"], 2);
  EXPECT_EQ(r.body["ignored"], 1);
  ASSERT_EQ(r.body["rejected"].size(), 2u);
  EXPECT_EQ(r.body["rejected"][0]["index"], 1);
  EXPECT_EQ(r.body["rejected"][1]["index"], 2);
  EXPECT_EQ(api_.Post("/v1/jobs/job-404/reports", {{"reports", Json::array()}}).status, 404);
  EXPECT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"nope", 1}}).status, 422);
}

TEST_F(HealthApiTest, HeartbeatLostNamesTheRankAndNodeOnce) {
  AllStep(1);
  for (int s = 0; s < 12; ++s) {  // rank 5 goes silent
    Json batch = Json::array();
    for (int r = 0; r < 8; ++r)
      if (r != 5) batch.push_back(Heartbeat(r, 1));
    Second(batch);
  }
  auto lost = OfKind("heartbeat_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["ranks"], Json::array({5}));
  EXPECT_EQ(lost[0]["nodes"], Json::array({"n0"}));
  // Recovery acted on it: a first loss restarts on the same node (no blame), recorded with the finding.
  std::string actions = lost[0]["actions"].dump();
  EXPECT_NE(actions.find("restart"), std::string::npos) << actions;
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/health").body["attempt"], 2);
  EXPECT_NE(
      api_.Get("/metrics").body.get<std::string>().find("shepherd_findings_total{kind=\"heartbeat_lost\"} 1"),
      std::string::npos);
}

TEST_F(HealthApiTest, LongCheckpointSaveIsNotADeath) {
  AllStep(1);
  Json batch = Json::array();
  for (int r = 0; r < 8; ++r) batch.push_back(Heartbeat(r, 1, {{"phase", "checkpoint_save"}}));
  Report(batch);
  for (int s = 0; s < 50; ++s) {  // 50 s of silence while saving (timeout 10 s, allowance 10×)
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
  }
  EXPECT_TRUE(OfKind("heartbeat_lost").empty());
  EXPECT_TRUE(OfKind("hang").empty());
}

TEST_F(HealthApiTest, HangNamesTheRootCulpritOnly) {
  AllStep(1);
  // Rank 6 is stuck in CPU code; 0, 2, 4 wait for it in DP (tp 0); 7 waits for it in TP; 1, 3, 5 wait
  // for 7 in DP (tp 1).
  Json since = ToUnixSeconds(api_.clock_.Now());
  auto in = [&](int rank, const char* group, int seq) {
    return Heartbeat(
        rank, 1, {{"collective", {{"seq", seq}, {"op", "all_reduce"}, {"group", group}, {"since", since}}}});
  };
  for (int s = 0; s < 70; ++s) {
    Json batch = Json::array({in(0, "dp", 5), in(2, "dp", 5), in(4, "dp", 5), in(7, "tp", 3), in(1, "dp", 5),
                              in(3, "dp", 5), in(5, "dp", 5), Heartbeat(6, 1)});
    Second(batch);
  }
  auto hangs = OfKind("hang");
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0]["ranks"], Json::array({6}));
  // Rank 6 heartbeats (busy in its own code, not stopped): the job restarts on the same node, unblamed.
  EXPECT_FALSE(hangs[0].contains("silent_ranks")) << hangs[0].dump();
  EXPECT_EQ(hangs[0]["actions"].dump().find("cordon"), std::string::npos) << hangs[0].dump();
  EXPECT_NE(hangs[0]["actions"].dump().find("stop attempt 1"), std::string::npos) << hangs[0].dump();
  EXPECT_EQ(api_.Get("/v1/nodes/n0").body["state"], "allocated");
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_).body["attempt"], 2);
}

// A group that is no axis line ("g-035": ranks 0, 3, 5, as torch's new_group makes): its first collective
// reports carry its members, and the wait is followed to rank 5, which never entered.
TEST_F(HealthApiTest, AHangInANamedGroupNamesTheMemberThatNeverEntered) {
  AllStep(1);
  Json collective = {{"kind", "collective"}, {"seq", 0},           {"op", "all_reduce"},
                     {"group", "g-035"},     {"state", "started"}, {"members", {0, 3, 5}}};
  Json first = Json::array();
  for (int rank : {0, 3}) {
    Json r = collective;
    r.update({{"rank", rank}, {"attempt", 1}});
    first.push_back(r);
  }
  ApiReply accepted = Report(first);
  ASSERT_EQ(accepted.status, 202);
  EXPECT_EQ(accepted.body["accepted"], 2) << accepted.body.dump();
  Json outside = collective;
  outside.update({{"rank", 1}, {"attempt", 1}, {"group", "g-19"}, {"members", {1, 9}}});
  ApiReply rejected = Report(Json::array({outside}));
  ASSERT_EQ(rejected.body["rejected"].size(), 1u) << rejected.body.dump();
  EXPECT_EQ(rejected.body["rejected"][0]["error"].get<std::string>().rfind("members: rank 9", 0), 0u)
      << rejected.body.dump();

  Json since = ToUnixSeconds(api_.clock_.Now());
  auto in = [&](int rank) {
    return Heartbeat(
        rank, 1, {{"collective", {{"seq", 0}, {"op", "all_reduce"}, {"group", "g-035"}, {"since", since}}}});
  };
  for (int s = 0; s < 70; ++s) {
    Json batch = Json::array({in(0), in(3), Heartbeat(5, 1)});
    for (int r : {1, 2, 4, 6, 7}) batch.push_back(Heartbeat(r, 1));
    Second(batch);
  }
  auto hangs = OfKind("hang");
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0]["ranks"], Json::array({5})) << hangs[0].dump();
  EXPECT_NE(hangs[0]["detail"].get<std::string>().find("collective g-035#0 open"), std::string::npos)
      << hangs[0].dump();
}

TEST_F(HealthApiTest, SdcMinorityIsNamedAndLaterCheckpointsAreBad) {
  for (int s = 1; s <= 10; ++s) AllStep(s);
  auto hashes = [&](int64_t step, int odd_rank) {
    Json batch = Json::array();
    for (int r = 0; r < 8; ++r)
      batch.push_back({{"rank", r},
                       {"attempt", 1},
                       {"kind", "param_hash"},
                       {"step", step},
                       {"hash", r == odd_rank ? "bad0" : (r % 2 ? "aaaa" : "bbbb")}});
    Report(batch);
  };
  hashes(10, -1);  // all replica sets agree at step 10
  for (int s = 11; s <= 16; ++s) AllStep(s);
  Json ckpt = Json::array();
  for (int r = 0; r < 8; ++r)
    ckpt.push_back({{"rank", r}, {"attempt", 1}, {"kind", "checkpoint"}, {"step", 16}, {"path", "/ckpt/16"}});
  ASSERT_EQ(Report(ckpt).status, 202);
  for (int s = 17; s <= 20; ++s) AllStep(s);
  hashes(20, 5);  // rank 5 (tp 1, dp 2) disagrees with ranks 1, 3, 7
  api_.clock_.AdvanceSeconds(1);
  api_.Tick();
  auto sdc = OfKind("sdc_suspected");
  ASSERT_EQ(sdc.size(), 1u);
  EXPECT_EQ(sdc[0]["ranks"], Json::array({5}));
  Json cps = api_.Get("/v1/jobs/" + job_ + "/checkpoints").body["checkpoints"];
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_EQ(cps[0]["step"], 16);
  EXPECT_EQ(cps[0]["status"], "bad");  // after the last agreeing check (10), before the mismatch (20)
  // Its node never returns by passing a health check (which says nothing of silent corruption; a prober's
  // SDC cordon was lifted at once and the next job placed there corrupted too): an operator returns it.
  const std::string node = sdc[0]["nodes"][0];
  ASSERT_EQ(api_.Get("/v1/nodes/" + node).body["state"], "cordoned");
  for (int seq = 1; seq <= 5; ++seq)
    ASSERT_EQ(api_.Post("/v1/nodes/" + node + "/heartbeat",
                        {{"processes", Json::array()},
                         {"health_check", {{"seq", seq}, {"ok", true}, {"output", ""}}}})
                  .status,
              200);
  EXPECT_EQ(api_.Get("/v1/nodes/" + node).body["state"], "cordoned");
}

TEST_F(HealthApiTest, TwoTwoSplitAtDpFourIsReplayedNotCordoned) {
  for (int s = 1; s <= 10; ++s) AllStep(s);
  // An earlier check agreed: the hashes are comparable (without one, a split is recorded only).
  Json agreed = Json::array();
  for (int r = 0; r < 8; ++r)
    agreed.push_back({{"rank", r}, {"attempt", 1}, {"kind", "param_hash"}, {"step", 5}, {"hash", "aaaa"}});
  ASSERT_EQ(Report(agreed).status, 202);
  // Replica set tp = 0 is ranks 0, 2, 4, 6: two hold one hash, two another. No majority says which is
  // corrupt, so a replay must decide; the node is not blamed (it was, when DP = 2 was the only replay case).
  Json batch = Json::array();
  for (int r = 0; r < 8; ++r)
    batch.push_back({{"rank", r},
                     {"attempt", 1},
                     {"kind", "param_hash"},
                     {"step", 10},
                     {"hash", r % 2 ? "bbbb" : (r < 4 ? "aaaa" : "cccc")}});
  ASSERT_EQ(Report(batch).status, 202);
  api_.clock_.AdvanceSeconds(1);
  api_.Tick();
  auto sdc = OfKind("sdc_suspected");
  ASSERT_EQ(sdc.size(), 1u);
  EXPECT_EQ(sdc[0]["ranks"], Json::array({0, 2, 4, 6}));
  EXPECT_EQ(sdc[0]["sdc_verdict"], "needs_replay");
  bool replay = false;
  for (const Json& a : sdc[0]["actions"]) {
    EXPECT_EQ(a.get<std::string>().find("cordon"), std::string::npos) << a;
    replay = replay || a.get<std::string>().find("replay on the same nodes") != std::string::npos;
  }
  EXPECT_TRUE(replay) << sdc[0]["actions"].dump();
  Json node = api_.Get("/v1/nodes/n0").body;
  EXPECT_EQ(node["state"], "allocated");
  EXPECT_TRUE(node["schedulable"].get<bool>());
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_).body["attempt"], 2);
}

TEST_F(HealthApiTest, UnknownFindingKindFilterIs422NamingKind) {
  ApiReply r = api_.Get("/v1/failures?kind=hnag");
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "kind");
  EXPECT_EQ(api_.Get("/v1/failures?kind=hang").status, 200);
  ApiReply empty_job = api_.Get("/v1/failures?job=");  // was a 404 "no job "
  ASSERT_EQ(empty_job.status, 422) << empty_job.body.dump();
  EXPECT_EQ(empty_job.body["errors"][0]["field"], "job");
}

// Time holds int64 nanoseconds (to 2262-04-11): `since` beyond it, or not finite, is refused rather than
// wrapped around to "everything" or "nothing".
TEST_F(HealthApiTest, SinceTheClockCannotHoldIs422NamingSince) {
  for (int s = 1; s <= 6; ++s) AllStep(s);
  Json batch = Json::array();
  for (int r = 0; r < 8; ++r) batch.push_back(Step(r, 7, "nan"));
  Report(batch);
  api_.Tick();
  const size_t all = api_.Get("/v1/failures").body["failures"].size();
  ASSERT_GT(all, 0u);
  for (const char* since :
       {"2262-04-12T00:00:00Z", "9999-01-01T00:00:00Z", "9.3e18", "inf", "nan", "-inf", "-1e308", "1e400",
        "2026-02-30T00:00:00Z", "0x10", "0x1p3", " 5", "+5", "5.", ".5", "1e3", "5 ", ""}) {
    ApiReply r = api_.Get(std::string("/v1/failures?since=") + since);
    EXPECT_EQ(r.status, 422) << since << ": " << r.body.dump();
    EXPECT_EQ(r.body["errors"][0]["field"], "since") << since;
    EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/failures?since=" + since).status, 422) << since;
  }
  EXPECT_EQ(api_.Get("/v1/failures?since=1970-01-01T00:00:00Z").body["failures"].size(), all);
  EXPECT_EQ(api_.Get("/v1/failures?since=-9000000000").body["failures"].size(), all);
  EXPECT_TRUE(api_.Get("/v1/failures?since=2262-04-11T00:00:00Z").body["failures"].empty());
  EXPECT_TRUE(api_.Get("/v1/failures?since=9000000000").body["failures"].empty());
  EXPECT_EQ(api_.Get("/v1/failures?since=1.5").body["failures"].size(), all);
}

// Each report is checked alone (one bad report never refuses the batch): a bad `time` rejects its report
// with an error naming `time`.
TEST_F(HealthApiTest, ReportTimesMustBeValidRfc3339) {
  Json batch = Json::array();
  for (const char* t : {"2026-02-30T00:00:00Z", "2026-11-26T03:20:60Z", "2026-11-26T03:20:00+99:00",
                        "2026-11-26 03:20:00Z", "2262-04-12T00:00:00Z"})
    batch.push_back(Heartbeat(0, 1, {{"time", t}}));
  batch.push_back(Heartbeat(0, 1, {{"time", 1e11}}));
  batch.push_back(Heartbeat(0, 1, {{"time", "2027-01-15T08:00:00.5+05:30"}}));
  ApiReply r = Report(batch);
  ASSERT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(r.body["accepted"], 1) << r.body.dump();
  ASSERT_EQ(r.body["rejected"].size(), 6u) << r.body.dump();
  for (const Json& x : r.body["rejected"])
    EXPECT_EQ(x["error"].get<std::string>().rfind("time: ", 0), 0u) << x.dump();
}

TEST_F(HealthApiTest, ReportsBodyRefusesUnknownFieldsAndIngestsNothing) {
  ApiReply r =
      api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", Json::array({Step(0, 1, 2.0)})}, {"extra", 1}});
  ASSERT_EQ(r.status, 422) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "extra");
  const std::string metrics = api_.Get("/metrics").body.get<std::string>();
  EXPECT_EQ(metrics.find("shepherd_reports_total{outcome=\"accepted\"}"), std::string::npos) << metrics;
  EXPECT_EQ(Report(Json::array({Step(0, 1, 2.0)})).body["accepted"], 1);
}

TEST_F(HealthApiTest, CheckpointPathWithControlCharactersIsRejected) {
  Json batch = Json::array();
  for (int r = 0; r < 8; ++r)
    batch.push_back({{"rank", r},
                     {"attempt", 1},
                     {"kind", "checkpoint"},
                     {"step", 4},
                     {"path", r == 3 ? std::string("/ckpt/4\0/r3", 11) : "/ckpt/4"}});
  ApiReply r = Report(batch);
  ASSERT_EQ(r.status, 202) << r.body.dump();
  ASSERT_EQ(r.body["rejected"].size(), 1u) << r.body.dump();
  EXPECT_EQ(r.body["rejected"][0]["index"], 3);
  EXPECT_EQ(r.body["rejected"][0]["error"], "path: must not contain control characters");
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/checkpoints").body["checkpoints"][0]["status"], "pending");
}

// Every list route refuses a query parameter it does not know (a typo must not list everything).
TEST_F(HealthApiTest, ListRoutesRefuseUnknownQueryParameters) {
  for (const std::string& target : std::vector<std::string>{
           "/v1/jobs?stat=running", "/v1/jobs/" + job_ + "/checkpoints?limt=5", "/v1/nodes?colour=red",
           "/v1/failures?knd=hang", "/v1/jobs/" + job_ + "/failures?job=job-000009"}) {
    ApiReply r = api_.Get(target);
    EXPECT_EQ(r.status, 422) << target << ": " << r.body.dump();
    const std::string param = target.substr(target.find('?') + 1, target.find('=') - target.find('?') - 1);
    EXPECT_EQ(r.body["errors"][0]["field"], param) << target;
  }
  EXPECT_EQ(api_.Get("/v1/jobs?state=running&limit=5").status, 200);
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/checkpoints?limit=5").status, 200);
}

TEST_F(HealthApiTest, AJobNotMonitoredShowsEveryCheckAndWhy) {
  // Before, "checks" was {} for a queued or ended job: a client reading checks.heartbeat broke.
  auto checks_say = [&](const std::string& id, const std::string& reason) {
    Json h = api_.Get("/v1/jobs/" + id + "/health").body;
    for (const char* check : {"heartbeat", "hang", "straggler", "sdc", "loss"}) {
      EXPECT_EQ(h["checks"][check]["status"], "not_monitored") << id << " " << check << ": " << h.dump();
      EXPECT_EQ(h["checks"][check]["reason"], reason) << id << " " << check;
    }
    EXPECT_EQ(h["suspects"]["ranks_count"], 0) << h.dump();
    EXPECT_TRUE(h["evaluated_at"].is_null()) << h.dump();
  };
  Json second = api_.Get("/v1/jobs/" + job_).body["spec"];
  second["name"] = "h2";
  ApiReply queued = api_.Post("/v1/jobs", second);
  ASSERT_EQ(queued.status, 201) << queued.body.dump();
  ASSERT_EQ(queued.body["state"], "queued");
  checks_say(queued.body["id"], "the job is queued: no attempt runs");
  ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/cancel", Json::object()).status, 200);
  checks_say(job_, "the job ended (cancelled)");
}

TEST_F(HealthApiTest, CheckpointBecomesGoodAndIsLastKnownGood) {
  for (int s = 1; s <= 4; ++s) AllStep(s);
  Json ckpt = Json::array();
  for (int r = 0; r < 8; ++r)
    ckpt.push_back({{"rank", r}, {"attempt", 1}, {"kind", "checkpoint"}, {"step", 4}, {"path", "/ckpt/4"}});
  ckpt.erase(7);
  Report(ckpt);
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/checkpoints").body["checkpoints"][0]["status"], "pending");
  Report(
      Json::array({{{"rank", 7}, {"attempt", 1}, {"kind", "checkpoint"}, {"step", 4}, {"path", "/ckpt/4"}}}));
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/checkpoints").body["checkpoints"][0]["status"], "complete");
  for (int s = 5; s <= 10; ++s) AllStep(s);
  Json batch = Json::array();
  for (int r = 0; r < 8; ++r)
    batch.push_back(
        {{"rank", r}, {"attempt", 1}, {"kind", "param_hash"}, {"step", 10}, {"hash", r % 2 ? "a1" : "b2"}});
  Report(batch);
  api_.Tick();
  Json cp = api_.Get("/v1/jobs/" + job_ + "/checkpoints").body;
  EXPECT_EQ(cp["checkpoints"][0]["status"], "good") << cp.dump();
  EXPECT_EQ(api_.Get("/v1/jobs/" + job_ + "/health").body["last_known_good_checkpoint"]["step"], 4);
}

TEST_F(HealthApiTest, NonFiniteLossWithOnsetStep) {
  for (int s = 1; s <= 6; ++s) AllStep(s);
  AllStep(7, std::numeric_limits<double>::quiet_NaN());  // serialised as null by nlohmann: use the string
  Json batch = Json::array();
  for (int r = 0; r < 8; ++r) batch.push_back(Step(r, 8, "nan"));
  Report(batch);
  api_.Tick();
  auto nf = OfKind("nonfinite_loss");
  ASSERT_EQ(nf.size(), 1u);
  EXPECT_EQ(nf[0]["onset_step"], 8);
}

TEST_F(HealthApiTest, LossSpikeAndSlowRankAreFlaggedButOneSlowStepIsNot) {
  for (int s = 1; s <= 10; ++s) AllStep(s, 2.0, s == 3 ? 4 : -1);  // one slow step of rank 4
  EXPECT_TRUE(OfKind("straggler").empty());
  for (int s = 11; s <= 22; ++s) AllStep(s, 2.0, 6);  // rank 6 slow every step
  auto st = OfKind("straggler");
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0]["ranks"], Json::array({6}));
  AllStep(23, 50.0);
  AllStep(24, 50.0);
  auto spikes = OfKind("loss_spike");
  ASSERT_EQ(spikes.size(), 1u);
  EXPECT_EQ(spikes[0]["onset_step"], 23);
}

}  // namespace
}  // namespace shepherd::testing

namespace shepherd::testing {
namespace {

// One 8-GPU node and an 8-rank job without `command` (its ranks are started by another launcher).
// Returns the job id, or "" when the daemon refused it.
std::string SubmitExternalJob(ApiHarness& api, const Json& policy) {
  Json node = Json::parse(R"({"id": "n0", "topology": {"spine": "s0", "leaf": "l0"}})");
  Json job = Json::parse(R"({"name": "x", "model": {"parameters": 1e8, "layers": 4, "hidden": 512, "heads": 8,
      "seq_len": 512}, "training": {"global_batch_size": 32}, "parallelism": {"tp": 8},
      "resources": {"gpus": 8}})");
  job["policy"] = policy;
  if (api.Post("/v1/nodes", node).status != 201) return "";
  ApiReply r = api.Post("/v1/jobs", job);
  return r.status == 201 ? r.body["id"].get<std::string>() : "";
}

// A job whose ranks another launcher starts (no command) is watched from its first report: the startup
// grace counts from there, not from submission.
TEST(ExternalLauncher, GraceCountsFromTheFirstReport) {
  ApiHarness api;
  std::string id = SubmitExternalJob(api, {{"startup_grace_s", 100}});
  ASSERT_FALSE(id.empty());
  api.clock_.AdvanceSeconds(300);  // the launcher took five minutes
  api.Tick();
  Json waiting = api.Get("/v1/jobs/" + id + "/health").body;
  EXPECT_EQ(waiting["status"], "waiting_for_first_report");
  // Ranks never started are never lost: health showed all eight "lost", and suspected them.
  EXPECT_EQ(waiting["checks"]["heartbeat"]["lost_ranks"], Json::array()) << waiting.dump();
  EXPECT_EQ(waiting["suspects"]["ranks"], Json::array()) << waiting.dump();
  Json first = {{"reports", Json::array({{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}}})}};
  ASSERT_EQ(api.Post("/v1/jobs/" + id + "/reports", first).status, 202);
  api.clock_.AdvanceSeconds(5);
  api.Tick();
  EXPECT_EQ(api.Get("/v1/failures?kind=heartbeat_lost").body["failures"].size(), 0u);  // ranks 1-7: in grace
  for (int s = 0; s < 100; ++s) {
    api.clock_.AdvanceSeconds(1);
    api.Post("/v1/jobs/" + id + "/reports", first);
    api.Tick();
  }
  Json lost = api.Get("/v1/failures?kind=heartbeat_lost").body["failures"];
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]["ranks"], Json::array({1, 2, 3, 4, 5, 6, 7}));
}

// Random, ill-typed reports never break ingestion: every batch is answered 202 with each report either
// accepted or rejected by index, and the job stays queryable.
TEST(ReportsFuzz, IllTypedReportsAreRejectedOneByOne) {
  ApiHarness api;
  std::string id = SubmitExternalJob(api, Json::object());
  ASSERT_FALSE(id.empty());
  std::string path = "/v1/jobs/" + id + "/reports";
  const std::vector<Json> values = {nullptr,
                                    true,
                                    -1,
                                    0,
                                    1,
                                    Json(9223372036854775807LL),
                                    -1e308,
                                    1.5,
                                    "",
                                    "nan",
                                    "inf",
                                    std::string(300, 'x'),
                                    Json::array(),
                                    Json::object(),
                                    "2026-01-01T00:00:00Z"};
  const char* keys[] = {"rank",       "attempt", "time", "kind", "step",  "loss",  "grad_norm", "step_time_s",
                        "collective", "phase",   "seq",  "op",   "group", "state", "hash",      "path"};
  const char* kinds[] = {"heartbeat", "step", "collective", "param_hash", "checkpoint", "bogus"};
  std::mt19937 rng(7);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  for (int batch = 0; batch < 400; ++batch) {
    Json reports = Json::array();
    for (int i = 0; i < 8; ++i) {
      Json r = {{"rank", static_cast<int>(pick(10)) - 1},
                {"attempt", static_cast<int>(pick(3))},
                {"kind", kinds[pick(6)]}};
      for (size_t f = pick(6); f > 0; --f) {
        const char* k = keys[pick(16)];
        r[k] = std::string(k) == "collective" && pick(2) ? Json{{keys[pick(16)], values[pick(values.size())]}}
                                                         : values[pick(values.size())];
      }
      reports.push_back(r);
    }
    ApiReply r = api.Post(path, {{"reports", reports}});
    ASSERT_EQ(r.status, 202) << r.body.dump();
    ASSERT_EQ(r.body["accepted"].get<int>() + static_cast<int>(r.body["rejected"].size()), 8);
    if (batch % 50 == 0) api.Tick();
  }
  EXPECT_EQ(api.Get("/v1/jobs/" + id + "/health").status, 200);
}

}  // namespace
}  // namespace shepherd::testing
