// Jobs another launcher starts (no command): Shepherd observes, attributes and records, and never starts an
// attempt by itself. Attempts follow the ranks. Simulated time through the API.
#include <gtest/gtest.h>

#include "tests/api/api_harness.h"

namespace shepherd::testing {
namespace {

// Four 4-GPU nodes; a 16-rank DP job started by someone else.
class ExternalJobApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int n = 0; n < 4; ++n)
      ASSERT_EQ(api_.Post("/v1/nodes", {{"id", "n" + std::to_string(n)},
                                        {"gpus", 4},
                                        {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}})
                    .status,
                201);
    ASSERT_EQ(api_.Post("/v1/nodes", {{"id", "sp0"},
                                      {"gpus", 4},
                                      {"topology", {{"spine", "s0"}, {"leaf", "l0"}}},
                                      {"spare", true}})
                  .status,
              201);
    Json job = Json::parse(R"({"name": "ext", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
        "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 1, "pp": 1, "dp": 16}, "resources": {"gpus": 16, "gpus_per_node": 4},
        "policy": {"heartbeat_timeout_s": 10, "startup_grace_s": 30}})");
    ApiReply r = api_.Post("/v1/jobs", job);
    ASSERT_EQ(r.status, 201) << r.body.dump();
    job_ = r.body["id"];
  }
  // Every rank but `silent` heartbeats at `attempt`; one simulated second passes. Returns the answer.
  ApiReply Second(int attempt, int silent = -1) {
    Json reports = Json::array();
    for (int r = 0; r < 16; ++r)
      if (r != silent)
        reports.push_back({{"rank", r},
                           {"attempt", attempt},
                           {"kind", "heartbeat"},
                           {"node", "h" + std::to_string(r / 4)}});
    ApiReply out = api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", reports}});
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
    return out;
  }
  Json Job() { return api_.Get("/v1/jobs/" + job_).body; }

  ApiHarness api_;
  std::string job_;
};

TEST_F(ExternalJobApiTest, ASilentRankIsRecordedWithRecommendationsAndNothingIsStartedOrCordoned) {
  EXPECT_EQ(Job()["state"], "launching");
  ApiReply first = Second(1);
  ASSERT_EQ(first.status, 202);
  EXPECT_EQ(Job()["state"], "running");
  for (int s = 0; s < 20; ++s) {
    ApiReply r = Second(1, /*silent=*/5);
    ASSERT_EQ(r.status, 202) << r.body.dump();
    EXPECT_EQ(r.body["accepted"], 15);
    EXPECT_EQ(r.body["ignored"], 0);  // reports of the current attempt are always used
  }
  Json fs = api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"];
  ASSERT_EQ(fs.size(), 1u) << fs.dump();
  EXPECT_EQ(fs[0]["kind"], "heartbeat_lost");
  EXPECT_EQ(fs[0]["ranks"], Json::array({5}));
  // The host rank 5 reported, in the finding and in health alike (health named Shepherd's slot node n1).
  EXPECT_EQ(fs[0]["nodes"], Json::array({"h1"}));
  Json suspects = api_.Get("/v1/jobs/" + job_ + "/health").body["suspects"];
  EXPECT_EQ(suspects["ranks"], Json::array({5})) << suspects.dump();
  EXPECT_EQ(suspects["nodes"], Json::array({"h1"})) << suspects.dump();
  ASSERT_FALSE(fs[0]["recommended_actions"].empty());
  for (const Json& a : fs[0]["actions"]) {
    EXPECT_EQ(a.get<std::string>().find("stop attempt"), std::string::npos) << a;
    EXPECT_EQ(a.get<std::string>().find("cordon"), std::string::npos) << a;
  }
  Json j = Job();
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["restarts"], 0);
  Json nodes = api_.Get("/v1/nodes").body["summary"]["by_state"];
  EXPECT_FALSE(nodes.contains("cordoned")) << nodes.dump();
  EXPECT_FALSE(nodes.contains("failed")) << nodes.dump();
}

TEST_F(ExternalJobApiTest, RanksThatFinishAtDifferentTimesEndTheJobWithoutAFindingAndFreeItsSlots) {
  ASSERT_EQ(Second(1).status, 202);
  Json early = Json::array(), late = Json::array(), late_beats = Json::array();
  for (int r = 0; r < 16; ++r) {
    (r < 8 ? early : late).push_back({{"rank", r}, {"attempt", 1}, {"kind", "finished"}, {"step", 300}});
    if (r >= 8) late_beats.push_back({{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}});
  }
  ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", early}}).status, 202);
  for (int s = 0; s < 30; ++s) {  // half the ranks finished and fell silent; the others run on for 30 s
    ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", late_beats}}).status, 202);
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
  }
  EXPECT_EQ(Job()["state"], "running");
  ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", late}}).status, 202);
  Json j = Job();
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_EQ(j["reason"], "every rank reported finished");
  EXPECT_TRUE(api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"].empty());
  EXPECT_EQ(api_.Get("/v1/nodes").body["summary"]["free_usable_gpus"], 16);
}

TEST_F(ExternalJobApiTest, AttemptsFollowTheRanks) {
  ASSERT_EQ(Second(1).status, 202);
  // The site's launcher restarted the job: its ranks now report attempt 2.
  ApiReply r = Second(2);
  ASSERT_EQ(r.status, 202);
  EXPECT_EQ(r.body["accepted"], 16);
  EXPECT_EQ(r.body["ignored"], 0);
  Json j = Job();
  EXPECT_EQ(j["attempt"], 2);
  EXPECT_EQ(j["restarts"], 0);
  EXPECT_NE(j["current_attempt"]["reason"].get<std::string>().find("launcher started attempt 2"),
            std::string::npos);
  // A straggling report of attempt 1 is ignored, not refused.
  ApiReply old = Second(1);
  ASSERT_EQ(old.status, 202);
  EXPECT_EQ(old.body["ignored"], 16);
  EXPECT_EQ(Job()["attempt"], 2);
  EXPECT_TRUE(api_.Get("/v1/failures").body["failures"].empty());
  // A far jump (a wrong or forged attempt) is not followed: it would make every real report an old one's.
  ApiReply far = Second(2147483647);
  EXPECT_EQ(far.body["ignored"], 16);
  EXPECT_EQ(Job()["attempt"], 2);
  EXPECT_EQ(Second(2).body["ignored"], 0);
}

// A watched job of an admin's with external_remediation "cordon": the node a silent rank reported is
// cordoned only when the job's launcher lists it for the job (here: the nodes Shepherd's inventory holds
// for it). The attack: a rank named a node of the fleet that is not the job's, and it was cordoned.
TEST_F(ExternalJobApiTest, CordonActsOnlyOnNodesTheJobsLauncherLists) {
  for (int n = 4; n < 8; ++n)  // room for a second job beside the fixture's
    ASSERT_EQ(api_.Post("/v1/nodes", {{"id", "n" + std::to_string(n)},
                                      {"gpus", 4},
                                      {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}})
                  .status,
              201);
  Json body = Json::parse(R"({"name": "ext", "model": {"parameters": 1e8, "layers": 4, "hidden": 512,
      "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
      "parallelism": {"tp": 1, "pp": 1, "dp": 16}, "resources": {"gpus": 16, "gpus_per_node": 4},
      "policy": {"heartbeat_timeout_s": 10, "startup_grace_s": 30, "external_remediation": "cordon"}})");
  ApiReply created = api_.Post("/v1/jobs", body);
  ASSERT_EQ(created.status, 201) << created.body.dump();
  job_ = created.body["id"];
  ASSERT_EQ(
      api_.Post("/v1/nodes", {{"id", "victim"}, {"gpus", 4}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}})
          .status,
      201);
  std::map<int, std::string> placed;
  const ApiReply placement = api_.Get("/v1/jobs/" + job_ + "/placement");
  for (const Json& r : placement.body["ranks"]) placed[r["rank"]] = r["node"];
  ASSERT_EQ(placed.size(), 16u) << placement.body.dump();
  // Rank 5 names "victim", rank 9 its own node; their parameter hashes are the odd ones out (a majority
  // verdict blames the nodes their ranks reported).
  Json reports = Json::array();
  for (int r = 0; r < 16; ++r)
    reports.push_back(
        {{"rank", r}, {"attempt", 1}, {"kind", "heartbeat"}, {"node", r == 5 ? "victim" : placed[r]}});
  ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", reports}}).status, 202);
  Json hashes = Json::array();
  for (int r = 0; r < 16; ++r)
    hashes.push_back({{"rank", r},
                      {"attempt", 1},
                      {"kind", "param_hash"},
                      {"step", 100},
                      {"hash", r == 5 || r == 9 ? "bbbb" : "aaaa"}});
  ASSERT_EQ(api_.Post("/v1/jobs/" + job_ + "/reports", {{"reports", hashes}}).status, 202);
  api_.clock_.AdvanceSeconds(1);
  api_.Tick();
  Json fs = api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"];
  ASSERT_FALSE(fs.empty());
  std::string actions;
  for (const Json& f : fs)
    for (const Json& a : f["actions"]) actions += a.get<std::string>() + "\n";
  EXPECT_NE(actions.find("would cordon victim, not done: not among the nodes the job's launcher lists"),
            std::string::npos)
      << fs.dump();
  EXPECT_EQ(api_.Get("/v1/nodes/victim").body["state"], "available") << "a node the job does not run on";
  EXPECT_NE(actions.find("cordon " + placed[9] + " (external_remediation: cordon)"), std::string::npos)
      << actions;
  EXPECT_EQ(api_.Get("/v1/nodes/" + placed[9]).body["state"], "cordoned");
}

// Every rank of another launcher's job silent at once (a tester SIGSTOPped both ranks of a watched job):
// paused, frozen or cut off, which Shepherd cannot tell apart. Recorded, with no restart recommended (with
// external_remediation "requeue" it would have been carried out).
TEST_F(ExternalJobApiTest, EveryRankSilentAtOnceIsRecordedWithNothingRecommended) {
  for (int s = 0; s < 3; ++s) ASSERT_EQ(Second(1).status, 202);
  for (int s = 0; s < 15; ++s) {
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
  }
  Json fs = api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"];
  ASSERT_EQ(fs.size(), 1u) << fs.dump();
  EXPECT_EQ(fs[0]["kind"], "heartbeat_lost");
  EXPECT_EQ(fs[0]["ranks"].size(), 16u);
  EXPECT_EQ(fs[0]["recommended_actions"].dump().find("restart"), std::string::npos) << fs[0].dump();
  EXPECT_NE(fs[0]["recommended_actions"].dump().find("every rank silent at once"), std::string::npos)
      << fs[0].dump();
  EXPECT_EQ(Job()["attempt"], 1);
}

// A forced restart of another launcher's job is refused: an attempt Shepherd started would stop nothing,
// and the real ranks' reports would then be an old attempt's, ignored, leaving the job unwatched.
TEST_F(ExternalJobApiTest, AForcedRestartIsRefusedAndTheJobStaysWatched) {
  ASSERT_EQ(Second(1).status, 202);
  ApiReply r = api_.Post("/v1/jobs/" + job_ + "/restart", {{"from", "latest"}});
  EXPECT_EQ(r.status, 409) << r.body.dump();
  EXPECT_NE(r.body["detail"].get<std::string>().find("launched by someone else"), std::string::npos);
  EXPECT_EQ(Job()["attempt"], 1);
  ApiReply next = Second(1);
  EXPECT_EQ(next.body["accepted"], 16);
  EXPECT_EQ(next.body["ignored"], 0);
  EXPECT_TRUE(api_.Get("/v1/jobs/" + job_ + "/failures").body["failures"].empty());
}

}  // namespace
}  // namespace shepherd::testing
