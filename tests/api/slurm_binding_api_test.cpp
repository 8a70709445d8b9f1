// Jobs users start with srun, bound by external_id = SLURM_JOB_ID: the external_id field (unique among jobs
// that have not ended, filtered by an index), POST /v1/external/slurm/{id}/reports (the first report creates
// the job; who may create), and external_remediation "requeue". In process, with auth and simulated time.
#include <gtest/gtest.h>

#include "tests/api/api_harness.h"

namespace shepherd::testing {
namespace {

struct Requeued {
  std::string slurm_job;
  std::string finding;
};

class SlurmBindingTest : public ::testing::Test {
 protected:
  explicit SlurmBindingTest(bool requeue = true) : api_(Options(requeue, &requeued_)) {}

  static ControllerOptions Options(bool requeue, std::vector<Requeued>* out) {
    ControllerOptions o;
    o.slurm = requeue;  // as the daemon: requeue is wired only with --slurm
    if (requeue)
      o.slurm_requeue = [out](const std::string& id, const Finding& f) { out->push_back({id, f.id}); };
    return o;
  }

  void SetUp() override {
    auth_.SetStatic(ParseTokens(R"({"tokens": [
      {"token": "admin-token-0123456789", "role": "admin", "name": "ops"},
      {"token": "operator-token-0123456789", "role": "operator", "name": "oncall"},
      {"token": "submitter-token-0123456789", "role": "submitter", "name": "sam"},
      {"token": "kim-submitter-token-0123456789", "role": "submitter", "name": "kim"},
      {"token": "viewer-token-0123456789", "role": "viewer", "name": "vic"},
      {"token": "agent-n0-token-0123456789", "role": "agent", "node": "n0"}]})")
                        .value());
    InstallAuth(&api_.router_, api_.controller_.get(), &auth_);
    for (int n = 0; n < 2; ++n)
      ASSERT_EQ(
          As("admin", "POST", "/v1/nodes",
             {{"id", "n" + std::to_string(n)}, {"gpus", 4}, {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}})
              .status,
          201);
  }

  // `who`: a role name of the tokens above, "kim", or a raw rank token.
  ApiReply As(const std::string& who, const std::string& method, const std::string& target,
              const Json& body = nullptr) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.request_id = "test";
    const std::string token = who.size() == 64 ? who
                              : who == "kim"   ? "kim-submitter-token-0123456789"
                                               : who + "-token-0123456789";
    req.headers.emplace_back("Authorization", "Bearer " + token);
    if (!body.is_null()) {
      req.body = body.dump();
      req.headers.emplace_back("Content-Type", "application/json");
    }
    ApiReply out;
    api_.router_.Handle(req, [&](HttpResponse res) {
      out.status = res.status;
      out.body = Json::parse(res.body, nullptr, false);
    });
    api_.Drain();
    return out;
  }

  // A job without a command of `ranks` ranks, with an external id when given.
  static Json WatchedJob(int ranks, const std::string& external_id, Json policy = Json::object()) {
    Json j = Json::parse(R"({"name": "w", "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4,
        "seq_len": 64, "vocab": 1000}, "training": {"global_batch_size": 8}, "parallelism": {"tp": 1, "pp": 1, "dp": 2},
        "resources": {"gpus": 2}})");
    j["parallelism"]["dp"] = ranks;
    j["resources"]["gpus"] = ranks;
    j["training"]["global_batch_size"] = ranks;
    if (!external_id.empty()) j["external_id"] = external_id;
    if (!policy.empty()) j["policy"] = policy;
    return j;
  }
  static Json Finished(int attempt, std::vector<int> ranks) {
    Json reports = Json::array();
    for (int r : ranks)
      reports.push_back({{"rank", r}, {"attempt", attempt}, {"kind", "finished"}, {"step", 40}});
    return reports;
  }
  static Json Heartbeats(int attempt, std::vector<int> ranks) {
    Json reports = Json::array();
    for (int r : ranks)
      reports.push_back(
          {{"rank", r}, {"attempt", attempt}, {"kind", "heartbeat"}, {"node", "n" + std::to_string(r % 2)}});
    return reports;
  }
  // The body a rank started by srun sends: its reports and what it knows of its Slurm job.
  static Json SrunBody(Json reports, int ntasks, Json policy = nullptr) {
    Json slurm = {{"ntasks", ntasks}, {"job_name", "train-llm"}};
    if (!policy.is_null()) slurm["policy"] = policy;
    return {{"slurm", slurm}, {"reports", reports}};
  }
  // Slurm job `slurm_job`'s two ranks report under policy "requeue"; rank 1 falls silent after the first
  // report, so the heartbeat timeout (5 s) records a finding that recommends a restart. Returns the job.
  std::string RankOneFallsSilent(const std::string& slurm_job, const Json& more_policy = Json::object()) {
    Json policy = {{"external_remediation", "requeue"}, {"heartbeat_timeout_s", 5}, {"startup_grace_s", 5}};
    policy.update(more_policy);
    std::string id;
    for (int s = 0; s < 20; ++s) {
      ApiReply r =
          As("submitter", "POST", "/v1/external/slurm/" + slurm_job + "/reports",
             SrunBody(Heartbeats(1, s == 0 ? std::vector<int>{0, 1} : std::vector<int>{0}), 2, policy));
      EXPECT_EQ(r.status, 202) << r.body.dump();
      id = r.body.value("job", "");
      api_.clock_.AdvanceSeconds(1);
      api_.Tick();
    }
    return id;
  }
  Json JobsWith(const std::string& external_id) {
    ApiReply r = As("viewer", "GET", "/v1/jobs?external_id=" + external_id);
    EXPECT_EQ(r.status, 200) << r.body.dump();
    return r.body["jobs"];
  }

  std::vector<Requeued> requeued_;
  Authenticator auth_;
  ApiHarness api_;
};

TEST_F(SlurmBindingTest, ExternalIdIsStoredShownFilteredAndUniqueAmongJobsThatHaveNotEnded) {
  ApiReply a = As("submitter", "POST", "/v1/jobs", WatchedJob(2, "4242"));
  ASSERT_EQ(a.status, 201) << a.body.dump();
  EXPECT_EQ(a.body["spec"]["external_id"], "4242");
  ApiReply dup = As("submitter", "POST", "/v1/jobs", WatchedJob(2, "4242"));
  EXPECT_EQ(dup.status, 409) << dup.body.dump();
  EXPECT_EQ(dup.body["errors"][0]["field"], "external_id") << dup.body.dump();
  ASSERT_EQ(As("submitter", "POST", "/v1/jobs", WatchedJob(2, "7")).status, 201);

  Json found = JobsWith("4242");
  ASSERT_EQ(found.size(), 1u) << found.dump();
  EXPECT_EQ(found[0]["id"], a.body["id"]);
  EXPECT_TRUE(JobsWith("999").empty());

  // Once the first ended, the id may be used again; the filter lists both.
  ASSERT_EQ(As("submitter", "POST", "/v1/jobs/" + a.body["id"].get<std::string>() + "/cancel").status, 200);
  ApiReply again = As("submitter", "POST", "/v1/jobs", WatchedJob(2, "4242"));
  ASSERT_EQ(again.status, 201) << again.body.dump();
  found = JobsWith("4242");
  ASSERT_EQ(found.size(), 2u) << found.dump();
  EXPECT_EQ(found[0]["state"], "cancelled");
  EXPECT_EQ(found[1]["id"], again.body["id"]);
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs?external_id=4242&state=cancelled").body["jobs"].size(), 1u);
}

TEST_F(SlurmBindingTest, ExternalIdIsOnlyForJobsShepherdDoesNotLaunchAndRequeueNeedsIt) {
  Json launched = WatchedJob(2, "55");
  launched["command"] = {"python3", "train.py"};
  ApiReply r = As("submitter", "POST", "/v1/jobs", launched);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "external_id") << r.body.dump();
  r = As("submitter", "POST", "/v1/jobs", WatchedJob(2, "", {{"external_remediation", "requeue"}}));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "policy.external_remediation") << r.body.dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs?external_id=").status, 422);
}

TEST_F(SlurmBindingTest, TheFirstReportCreatesTheJobAndTheOthersBindToIt) {
  ApiReply first = As("submitter", "POST", "/v1/external/slurm/123/reports", SrunBody(Heartbeats(1, {0}), 4));
  ASSERT_EQ(first.status, 202) << first.body.dump();
  EXPECT_EQ(first.body["created"], true);
  const std::string id = first.body["job"];
  ApiReply rest =
      As("submitter", "POST", "/v1/external/slurm/123/reports", SrunBody(Heartbeats(1, {1, 2, 3}), 4));
  ASSERT_EQ(rest.status, 202) << rest.body.dump();
  EXPECT_EQ(rest.body["created"], false);
  EXPECT_EQ(rest.body["job"], id);
  EXPECT_EQ(rest.body["accepted"], 3);

  Json job = As("viewer", "GET", "/v1/jobs/" + id).body;
  EXPECT_EQ(job["owner"], "sam");
  EXPECT_EQ(job["spec"]["name"], "train-llm");
  EXPECT_EQ(job["spec"]["external_id"], "123");
  EXPECT_TRUE(job["spec"]["command"].empty());
  EXPECT_EQ(job["plan"]["dp"], 4);
  EXPECT_EQ(job["state"], "running");
  EXPECT_EQ(JobsWith("123").size(), 1u);

  // A rank beyond SLURM_NTASKS is refused (by index); the batch's others are taken.
  ApiReply beyond =
      As("submitter", "POST", "/v1/external/slurm/123/reports", SrunBody(Heartbeats(1, {0, 4}), 4));
  ASSERT_EQ(beyond.status, 202) << beyond.body.dump();
  ASSERT_EQ(beyond.body["rejected"].size(), 1u) << beyond.body.dump();
  EXPECT_EQ(beyond.body["rejected"][0]["index"], 1);
}

TEST_F(SlurmBindingTest, ALongSlurmJobNameNamesTheJobByItsFirst128Characters) {
  // Slurm accepts a 300-character name; every report of the job used to be refused (422), so it went
  // unwatched. Cut at a whole character (ü is two bytes).
  Json body = SrunBody(Heartbeats(1, {0}), 1);
  body["slurm"]["job_name"] = std::string(127, 'x') + "üyyy" + std::string(200, 'z');
  ApiReply r = As("submitter", "POST", "/v1/external/slurm/124/reports", body);
  ASSERT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + r.body["job"].get<std::string>()).body["spec"]["name"],
            std::string(127, 'x') + "ü");
}

TEST_F(SlurmBindingTest, ControlCharactersInASlurmJobNameBecomeSpaces) {
  // `sbatch -J $'tab\there'` is a legal Slurm name; its reports were refused (422) and the job unwatched.
  Json body = SrunBody(Heartbeats(1, {0}), 1);
  body["slurm"]["job_name"] = "tab\there\x7f!";
  ApiReply r = As("submitter", "POST", "/v1/external/slurm/125/reports", body);
  ASSERT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + r.body["job"].get<std::string>()).body["spec"]["name"],
            "tab here !");
  body["slurm"]["job_name"] = 7;  // still a string or nothing
  r = As("submitter", "POST", "/v1/external/slurm/126/reports", body);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm.job_name") << r.body.dump();
}

TEST_F(SlurmBindingTest, BadEnvelopesAreRefusedNamingTheFieldAndCreateNothing) {
  Json no_size = {{"reports", Heartbeats(1, {0})}};
  ApiReply r = As("submitter", "POST", "/v1/external/slurm/5/reports", no_size);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm.ntasks") << r.body.dump();
  r = As("submitter", "POST", "/v1/external/slurm/5x/reports", SrunBody(Heartbeats(1, {0}), 1));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm_job_id") << r.body.dump();
  r = As("submitter", "POST", "/v1/external/slurm/5/reports", SrunBody(Heartbeats(1, {0}), 0));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm.ntasks") << r.body.dump();
  r = As("submitter", "POST", "/v1/external/slurm/5/reports",
         SrunBody(Heartbeats(1, {0}), 1, {{"external_remediation", "reboot"}}));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm.policy.external_remediation") << r.body.dump();
  // Larger than the usable inventory (8 GPUs).
  r = As("submitter", "POST", "/v1/external/slurm/5/reports", SrunBody(Heartbeats(1, {0}), 9));
  EXPECT_EQ(r.status, 422) << r.body.dump();
  EXPECT_TRUE(JobsWith("5").empty());
}

TEST_F(SlurmBindingTest, UnknownFieldsNextToSlurmAreRefusedAndCreateNothing) {
  Json body = SrunBody(Heartbeats(1, {0}), 1);
  body["extra"] = 1;
  ApiReply r = As("submitter", "POST", "/v1/external/slurm/5/reports", body);
  EXPECT_EQ(r.status, 422) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "extra") << r.body.dump();
  EXPECT_TRUE(JobsWith("5").empty());
  body.erase("extra");
  EXPECT_EQ(As("submitter", "POST", "/v1/external/slurm/5/reports", body).status, 202);
}

// Every credential does only its own job: a rank credential reports for its own job only and never
// creates one; a submitter creates as itself and cannot report into another's job; people without the
// submit right cannot create.
TEST_F(SlurmBindingTest, WhoMayBindAndWhoMayCreate) {
  // kim pre-submits a watched job bound to Slurm job 900; its rank credential works on the Slurm route.
  ApiReply kims = As("kim", "POST", "/v1/jobs", WatchedJob(2, "900"));
  ASSERT_EQ(kims.status, 201) << kims.body.dump();
  const std::string rank = kims.body["rank_token"];
  ApiReply own = As(rank, "POST", "/v1/external/slurm/900/reports", {{"reports", Heartbeats(1, {0, 1})}});
  EXPECT_EQ(own.status, 202) << own.body.dump();
  EXPECT_EQ(own.body["job"], kims.body["id"]);

  // That credential cannot create a job for another Slurm job, nor report into sam's.
  EXPECT_EQ(As(rank, "POST", "/v1/external/slurm/901/reports", SrunBody(Heartbeats(1, {0}), 1)).status, 403);
  EXPECT_TRUE(JobsWith("901").empty());
  ASSERT_EQ(As("submitter", "POST", "/v1/external/slurm/902/reports", SrunBody(Heartbeats(1, {0}), 1)).status,
            202);
  EXPECT_EQ(As(rank, "POST", "/v1/external/slurm/902/reports", {{"reports", Heartbeats(1, {0})}}).status,
            403);

  // sam cannot report into kim's job; kim can; admin can.
  EXPECT_EQ(
      As("submitter", "POST", "/v1/external/slurm/900/reports", {{"reports", Heartbeats(1, {0})}}).status,
      403);
  EXPECT_EQ(As("kim", "POST", "/v1/external/slurm/900/reports", {{"reports", Heartbeats(1, {0})}}).status,
            202);
  EXPECT_EQ(As("admin", "POST", "/v1/external/slurm/900/reports", {{"reports", Heartbeats(1, {0})}}).status,
            202);

  // Roles without the right to submit create nothing and report into nothing.
  for (const char* who : {"operator", "viewer", "agent-n0"}) {
    EXPECT_EQ(As(who, "POST", "/v1/external/slurm/903/reports", SrunBody(Heartbeats(1, {0}), 1)).status, 403)
        << who;
    EXPECT_EQ(As(who, "POST", "/v1/external/slurm/900/reports", {{"reports", Heartbeats(1, {0})}}).status,
              403)
        << who;
  }
  EXPECT_TRUE(JobsWith("903").empty());
}

// external_remediation "requeue": a silent rank of a job bound to Slurm job 321 requeues it once per
// attempt; its ranks come back as attempt 2, which Shepherd follows, and the next silence requeues again.
TEST_F(SlurmBindingTest, RequeueRunsOncePerAttemptAndTheNextAttemptIsFollowed) {
  const Json policy = {{"external_remediation", "requeue"},
                       {"heartbeat_interval_s", 1},
                       {"heartbeat_timeout_s", 5},
                       {"startup_grace_s", 5}};
  auto second = [&](int attempt, std::vector<int> ranks) {
    ApiReply r = As("submitter", "POST", "/v1/external/slurm/321/reports",
                    SrunBody(Heartbeats(attempt, std::move(ranks)), 2, policy));
    EXPECT_EQ(r.status, 202) << r.body.dump();
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
    return r.body.value("job", "");
  };
  const std::string id = second(1, {0, 1});
  // Both ranks healthy for a while: nothing is requeued.
  for (int s = 0; s < 10; ++s) second(1, {0, 1});
  EXPECT_TRUE(requeued_.empty());
  // Rank 1 goes silent (a hang): one requeue for attempt 1, however long it stays silent.
  for (int s = 0; s < 20; ++s) second(1, {0});
  ASSERT_EQ(requeued_.size(), 1u);
  EXPECT_EQ(requeued_[0].slurm_job, "321");
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs[0]["id"], requeued_[0].finding);
  EXPECT_NE(fs[0]["actions"].dump().find("requeue Slurm job 321"), std::string::npos) << fs[0].dump();
  Json job = As("viewer", "GET", "/v1/jobs/" + id).body;
  EXPECT_EQ(job["restarts"], 1);
  EXPECT_EQ(job["attempt"], 1);  // Shepherd starts nothing itself: the attempt follows the ranks

  // Slurm requeued it: SLURM_RESTART_COUNT=1, so the ranks report attempt 2.
  for (int s = 0; s < 10; ++s) second(2, {0, 1});
  job = As("viewer", "GET", "/v1/jobs/" + id).body;
  EXPECT_EQ(job["attempt"], 2);
  EXPECT_EQ(job["state"], "running");
  ASSERT_EQ(requeued_.size(), 1u);
  for (int s = 0; s < 20; ++s) second(2, {1});
  ASSERT_EQ(requeued_.size(), 2u);
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 2);
}

TEST_F(SlurmBindingTest, RequeueNeedsARestartRecommendation) {
  // Loss spikes are recorded, never acted on: no requeue.
  const Json policy = {{"external_remediation", "requeue"}, {"good_after_steps", 1}};
  for (int step = 1; step <= 40; ++step) {
    Json reports = Json::array();
    for (int r = 0; r < 2; ++r)
      reports.push_back(
          {{"rank", r}, {"attempt", 1}, {"kind", "step"}, {"step", step}, {"loss", step == 35 ? 50.0 : 2.0}});
    ASSERT_EQ(As("submitter", "POST", "/v1/external/slurm/88/reports", SrunBody(reports, 2, policy)).status,
              202);
    api_.clock_.AdvanceSeconds(0.5);
    api_.Tick();
  }
  const std::string id = JobsWith("88")[0]["id"];
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs[0]["kind"], "loss_spike") << fs.dump();
  EXPECT_TRUE(requeued_.empty());
}

// A requeue Slurm did not carry out (the worker found the batch job already ended) is written on the
// finding that asked for it and does not count against max_restarts.
TEST_F(SlurmBindingTest, ARequeueThatDidNotHappenIsWrittenOnItsFindingAndGivesTheRestartBack) {
  const std::string id = RankOneFallsSilent("77");
  ASSERT_EQ(requeued_.size(), 1u);
  ASSERT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 1);
  api_.controller_->ExternalRequeueDone(
      {requeued_[0].finding, id, "77", false, "Slurm shows job 77 COMPLETED"});
  api_.Drain();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 0);
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs[0]["id"], requeued_[0].finding);
  EXPECT_NE(fs[0]["actions"].dump().find("not requeued: Slurm shows job 77 COMPLETED"), std::string::npos)
      << fs[0].dump();
  // It did not use up the attempt's requeue: rank 0 falls silent too, and that finding asks again.
  for (int s = 0; s < 8; ++s) {
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
  }
  ASSERT_EQ(requeued_.size(), 2u);
  EXPECT_NE(requeued_[1].finding, requeued_[0].finding);
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 1);
}

TEST_F(SlurmBindingTest, NoRequeueOnceTheRestartBudgetIsSpentAndTheJobStaysWatched) {
  const std::string id = RankOneFallsSilent("79", {{"max_restarts", 0}});
  EXPECT_TRUE(requeued_.empty());
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  ASSERT_FALSE(fs.empty());
  EXPECT_NE(fs[0]["actions"].dump().find("none: not requeued (restart budget exhausted"), std::string::npos)
      << fs[0].dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["state"], "running");
}

TEST_F(SlurmBindingTest, ARequeueThatHappenedKeepsItsRestart) {
  const std::string id = RankOneFallsSilent("78");
  ASSERT_EQ(requeued_.size(), 1u);
  api_.controller_->ExternalRequeueDone({requeued_[0].finding, id, "78", true, ""});
  api_.Drain();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 1);
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  EXPECT_EQ(fs[0]["actions"].dump().find("not requeued"), std::string::npos) << fs[0].dump();
}

// --slurm: every reconcile cycle the daemon's worker reads the Slurm job of each watched job (SyncSlurm
// lists them, SlurmCycleDone takes the reads). The records are parsed from scontrol's own format.
class SlurmWatchTest : public SlurmBindingTest {
 protected:
  std::vector<WatchedSlurmJob> Watched() {
    std::vector<WatchedSlurmJob> out;
    api_.controller_->SyncSlurm(slurm::SlurmView{}, [&](Result<Controller::SlurmWork> w) {
      ASSERT_TRUE(w.ok()) << w.status().message();
      out = w->watched;
    });
    api_.Drain();
    return out;
  }
  // One cycle's read of `external_id` for Shepherd job `job`: scontrol's record with `state` (and
  // `exit_code`), or a Status when Slurm does not know it or does not answer.
  void Read(const std::string& job, const std::string& external_id, Result<std::string> state,
            const std::string& exit_code = "0:0") {
    Result<slurm::SlurmJob> record = state.status();
    if (state.ok())
      record =
          slurm::ParseJob("JobId=" + external_id + " JobName=train-llm UserId=sam(1000) JobState=" + *state +
                          " Reason=None Requeue=1 Restarts=0 ExitCode=" + exit_code + " NodeList=n[0-1]");
    api_.controller_->SlurmCycleDone({}, {{{job, external_id}, record}});
    api_.Drain();
  }
  Json Job(const std::string& id) { return As("viewer", "GET", "/v1/jobs/" + id).body; }
  // A watched job of `ranks` ranks created by its first report.
  std::string Create(const std::string& external_id, int ranks) {
    std::vector<int> all(ranks);
    for (int r = 0; r < ranks; ++r) all[r] = r;
    ApiReply r = As("submitter", "POST", "/v1/external/slurm/" + external_id + "/reports",
                    SrunBody(Heartbeats(1, all), ranks));
    EXPECT_EQ(r.status, 202) << r.body.dump();
    return r.body.value("job", "");
  }
};

TEST_F(SlurmWatchTest, AWatchedJobEndsWhenSlurmShowsItsJobEndedAndTheNextJobGetsItsSlots) {
  const std::string id = Create("500", 8);  // the whole inventory: two nodes of four GPUs
  ASSERT_FALSE(id.empty());
  // The next Slurm job's ranks find Shepherd's nodes full: its job waits in the queue, its reports get 409.
  ApiReply full = As("submitter", "POST", "/v1/external/slurm/501/reports", SrunBody(Heartbeats(1, {0}), 2));
  EXPECT_EQ(full.status, 409) << full.body.dump();
  std::vector<WatchedSlurmJob> watched = Watched();  // both, the queued one too
  ASSERT_EQ(watched.size(), 2u);
  EXPECT_EQ(watched[0].job, id);
  EXPECT_EQ(watched[0].external_id, "500");
  EXPECT_EQ(watched[1].external_id, "501");

  api_.clock_.AdvanceSeconds(1);
  Read(id, "500", std::string("RUNNING"));
  Read(id, "500", std::string("COMPLETING"));
  Read(id, "500", std::string("COMPLETED"));
  EXPECT_EQ(Job(id)["state"], "running");  // one read of an end is not yet evidence
  Read(id, "500", std::string("COMPLETED"));
  Json job = Job(id);
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["reason"], "slurm job 500 is COMPLETED (exit code 0:0)") << job.dump();

  ApiReply next = As("submitter", "POST", "/v1/external/slurm/501/reports", SrunBody(Heartbeats(1, {0}), 2));
  ASSERT_EQ(next.status, 202) << next.body.dump();
  EXPECT_EQ(job["current_attempt"]["reason"], "placed at submission");
  EXPECT_EQ(Job(next.body["job"])["current_attempt"]["reason"], "placed from the queue");  // it waited
  watched = Watched();
  ASSERT_EQ(watched.size(), 1u);
  EXPECT_EQ(watched[0].external_id, "501");
}

TEST_F(SlurmWatchTest, RunningRequeuedOrUnclearReadsEndNothing) {
  const std::string id = Create("600", 2);
  for (const char* state : {"PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "COMPLETING", "RESV_DEL_HOLD"})
    for (int twice = 0; twice < 2; ++twice) Read(id, "600", std::string(state));
  // A single read of an end between runs (a requeue seen mid-transition) ends nothing.
  Read(id, "600", std::string("NODE_FAIL"), "0:0");
  Read(id, "600", std::string("PENDING"));
  Read(id, "600", std::string("NODE_FAIL"), "0:0");
  Read(id, "600", std::string("RUNNING"));
  // Slurm does not answer: no evidence either way.
  for (int i = 0; i < 3; ++i) Read(id, "600", Unavailable("scontrol show job 600: Socket timed out"));
  EXPECT_EQ(Job(id)["state"], "running");

  // An id Slurm has never shown (another cluster's job, a typo) is never ended by Slurm's silence.
  const std::string other = Create("700", 2);
  for (int i = 0; i < 5; ++i) Read(other, "700", NotFound("slurm job 700 not found"));
  EXPECT_EQ(Job(other)["state"], "running");
}

// scontrol suspend, or a scancel read once (the job ends at the second read, up to two reconcile intervals
// later): the ranks' silence was recorded as heartbeat_lost on healthy nodes. Held while Slurm shows the job
// suspended or ending; judged again once it runs, its silence counted from then.
TEST_F(SlurmWatchTest, ASuspendedOrEndingJobIsNotJudgedUntilItRunsAgain) {
  const Json policy = {{"heartbeat_timeout_s", 5}, {"startup_grace_s", 5}};
  auto report = [&](const std::string& ext) {
    ApiReply r = As("submitter", "POST", "/v1/external/slurm/" + ext + "/reports",
                    SrunBody(Heartbeats(1, {0, 1}), 2, policy));
    EXPECT_EQ(r.status, 202) << r.body.dump();
    return r.body.value("job", "");
  };
  auto silence = [&](int seconds) {
    for (int i = 0; i < seconds; ++i) {
      api_.clock_.AdvanceSeconds(1);
      api_.Tick();
    }
  };
  auto findings = [&](const std::string& id) {
    return As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"].size();
  };
  const std::string id = report("950");
  Read(id, "950", std::string("RUNNING"));
  Read(id, "950", std::string("SUSPENDED"));
  silence(60);
  EXPECT_EQ(findings(id), 0u);
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id + "/health").body["status"], "suspended");
  Read(id, "950", std::string("RUNNING"));
  silence(4);
  EXPECT_EQ(findings(id), 0u);  // silent 4 s since it runs again: within the 5 s timeout
  silence(4);
  EXPECT_EQ(findings(id), 1u);  // still silent: lost

  const std::string cancelled = report("951");
  Read(cancelled, "951", std::string("RUNNING"));
  Read(cancelled, "951", std::string("CANCELLED"), "0:15");  // scancel: its ranks stop
  silence(20);
  Read(cancelled, "951", std::string("CANCELLED"), "0:15");
  EXPECT_EQ(Job(cancelled)["state"], "cancelled");
  EXPECT_EQ(findings(cancelled), 0u);
}

TEST_F(SlurmWatchTest, SlurmsEndGivesTheJobsEndState) {
  struct Case {
    const char* slurm;
    const char* exit_code;
    const char* shepherd;
  };
  int n = 800;
  for (Case c : {Case{"FAILED", "1:0", "failed"}, Case{"CANCELLED", "0:15", "cancelled"},
                 Case{"TIMEOUT", "0:0", "failed"}, Case{"OUT_OF_MEMORY", "0:125", "failed"},
                 Case{"NODE_FAIL", "0:0", "failed"}}) {
    const std::string ext = std::to_string(n++);
    const std::string id = Create(ext, 2);
    Read(id, ext, std::string(c.slurm), c.exit_code);
    Read(id, ext, std::string(c.slurm), c.exit_code);
    Json job = Job(id);
    EXPECT_EQ(job["state"], c.shepherd) << c.slurm;
    EXPECT_EQ(job["reason"], "slurm job " + ext + " is " + c.slurm + " (exit code " + c.exit_code + ")");
  }
  // Seen running, then purged (MinJobAge passed while Shepherd was not reading): ended, outcome unknown.
  const std::string id = Create("900", 2);
  Read(id, "900", std::string("RUNNING"));
  Read(id, "900", NotFound("slurm job 900 not found"));
  Read(id, "900", std::string("RUNNING"));  // not found once, then there again: nothing ended
  Read(id, "900", NotFound("slurm job 900 not found"));
  EXPECT_EQ(Job(id)["state"], "running");
  Read(id, "900", NotFound("slurm job 900 not found"));
  Json job = Job(id);
  EXPECT_EQ(job["state"], "failed");
  EXPECT_NE(job["reason"].get<std::string>().find("Slurm no longer knows it (last seen RUNNING"),
            std::string::npos)
      << job.dump();
}

TEST_F(SlurmBindingTest, ReportsOfAJobCancelledHereDoNotCreateAnotherUntilSlurmRequeuesIt) {
  ApiReply first =
      As("submitter", "POST", "/v1/external/slurm/444/reports", SrunBody(Heartbeats(1, {0, 1}), 2));
  ASSERT_EQ(first.status, 202) << first.body.dump();
  const std::string id = first.body["job"];
  ASSERT_EQ(As("submitter", "POST", "/v1/jobs/" + id + "/cancel").status, 200);
  // Its ranks run on in Slurm and report: refused, and no new job.
  ApiReply late =
      As("submitter", "POST", "/v1/external/slurm/444/reports", SrunBody(Heartbeats(1, {0, 1}), 2));
  EXPECT_EQ(late.status, 409) << late.body.dump();
  EXPECT_NE(late.body["detail"].get<std::string>().find("job " + id + " of external id 444 is cancelled"),
            std::string::npos)
      << late.body.dump();
  EXPECT_EQ(JobsWith("444").size(), 1u);
  // Slurm requeued it: attempt 2 is a new run, watched as a new job.
  ApiReply again =
      As("submitter", "POST", "/v1/external/slurm/444/reports", SrunBody(Heartbeats(2, {0, 1}), 2));
  ASSERT_EQ(again.status, 202) << again.body.dump();
  EXPECT_EQ(again.body["created"], true);
  EXPECT_NE(again.body["job"], id);
  EXPECT_EQ(JobsWith("444").size(), 2u);
}

TEST_F(SlurmWatchTest, RanksThatFinishedWhileTheBatchScriptRunsOnAreNotLostAndSlurmSaysWhenTheJobEnds) {
  Json policy = {{"external_remediation", "requeue"}, {"heartbeat_timeout_s", 5}, {"startup_grace_s", 5}};
  ApiReply r =
      As("submitter", "POST", "/v1/external/slurm/900/reports", SrunBody(Heartbeats(1, {0, 1}), 2, policy));
  ASSERT_EQ(r.status, 202) << r.body.dump();
  const std::string id = r.body["job"];
  ASSERT_EQ(
      As("submitter", "POST", "/v1/external/slurm/900/reports", SrunBody(Finished(1, {0, 1}), 2)).status,
      202);
  for (int s = 0; s < 30; ++s) {  // the batch script post-processes, then starts another srun stage
    api_.clock_.AdvanceSeconds(1);
    api_.Tick();
  }
  EXPECT_EQ(Job(id)["state"], "running");  // Slurm, not the ranks, says when a Slurm job ends
  EXPECT_TRUE(As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"].empty());
  EXPECT_TRUE(requeued_.empty());
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id + "/health").body["checks"]["heartbeat"]["ranks_finished"],
            2);
  Read(id, "900", std::string("COMPLETED"));
  Read(id, "900", std::string("COMPLETED"));
  EXPECT_EQ(Job(id)["state"], "succeeded");
}

class SlurmBindingWithoutSlurmTest : public SlurmBindingTest {
 protected:
  SlurmBindingWithoutSlurmTest() : SlurmBindingTest(/*requeue=*/false) {}
};

TEST_F(SlurmBindingWithoutSlurmTest, RequeueWithoutSlurmIsRecordedAsNotPossible) {
  const std::string id = RankOneFallsSilent("66");
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  ASSERT_FALSE(fs.empty());
  EXPECT_NE(fs[0]["actions"].dump().find("cannot requeue Slurm job 66: the daemon runs without --slurm"),
            std::string::npos)
      << fs[0].dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 0);
}

TEST_F(SlurmBindingWithoutSlurmTest, WithoutSlurmToAskTheJobEndsWhenEveryRankFinished) {
  ApiReply r = As("submitter", "POST", "/v1/external/slurm/901/reports", SrunBody(Heartbeats(1, {0, 1}), 2));
  ASSERT_EQ(r.status, 202) << r.body.dump();
  const std::string id = r.body["job"];
  ApiReply one = As("submitter", "POST", "/v1/external/slurm/901/reports", SrunBody(Finished(1, {0}), 2));
  ASSERT_EQ(one.status, 202) << one.body.dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["state"], "running");
  ASSERT_EQ(As("submitter", "POST", "/v1/external/slurm/901/reports", SrunBody(Finished(1, {1}), 2)).status,
            202);
  Json job = As("viewer", "GET", "/v1/jobs/" + id).body;
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["reason"], "every rank reported finished");
}

}  // namespace
}  // namespace shepherd::testing
