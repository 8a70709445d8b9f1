// Jobs users start with srun, bound by external_id = SLURM_JOB_ID: the external_id field (unique among jobs
// that have not ended, filtered by an index), POST /v1/external/slurm/{id}/reports (the first report creates
// the job; who may create), and external_remediation "requeue". In process, with auth and simulated time.
#include "tests/api/slurm_binding_fixture.h"

namespace shepherd::testing {
namespace {

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
  // kim pre-submits a watched job bound to Slurm job 900 (Slurm shows it as kim's Unix user's); its rank
  // credential works on the Slurm route.
  slurm_jobs_["900"] = ShownAs("900", "kim.lee", "RUNNING");
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

// A binding is exclusive while its job lives, so a submitter may bind only a Slurm job that Slurm shows
// existing and run by the token's Unix user: binding a future id (or another user's job) would lock that
// job's own ranks out of being watched.
TEST_F(SlurmBindingTest, ASubmitterBindsOnlyASlurmJobSlurmShowsAsItsOwn) {
  // A future id: Slurm does not know it yet.
  unknown_slurm_jobs_ = {"7001"};
  ApiReply r = As("submitter", "POST", "/v1/external/slurm/7001/reports", SrunBody(Heartbeats(1, {0}), 1));
  EXPECT_EQ(r.status, 404) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm_job_id") << r.body.dump();
  EXPECT_NE(r.body["detail"].get<std::string>().find("7001"), std::string::npos) << r.body.dump();
  r = As("submitter", "POST", "/v1/jobs", WatchedJob(2, "7001"));
  EXPECT_EQ(r.status, 404) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "external_id") << r.body.dump();
  EXPECT_TRUE(JobsWith("7001").empty());

  // Another user's job (kim's token stands for Unix user kim.lee): sam cannot bind it, kim can.
  slurm_jobs_["7002"] = ShownAs("7002", "kim.lee", "RUNNING");
  r = As("submitter", "POST", "/v1/external/slurm/7002/reports", SrunBody(Heartbeats(1, {0}), 1));
  EXPECT_EQ(r.status, 403) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm_job_id") << r.body.dump();
  EXPECT_EQ(As("submitter", "POST", "/v1/jobs", WatchedJob(2, "7002")).status, 403);
  EXPECT_TRUE(JobsWith("7002").empty());
  r = As("kim", "POST", "/v1/external/slurm/7002/reports", SrunBody(Heartbeats(1, {0}), 1));
  EXPECT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(r.body["created"], true);

  // A job that ended in Slurm is no one's to bind.
  slurm_jobs_["7003"] = ShownAs("7003", "sam", "COMPLETED");
  r = As("submitter", "POST", "/v1/jobs", WatchedJob(2, "7003"));
  EXPECT_EQ(r.status, 403) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "external_id") << r.body.dump();

  // Its own running job, or its own pending one: created as before.
  r = As("submitter", "POST", "/v1/external/slurm/7004/reports", SrunBody(Heartbeats(1, {0}), 1));
  EXPECT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(r.body["created"], true);
  slurm_jobs_["7005"] = ShownAs("7005", "sam", "PENDING");
  EXPECT_EQ(As("submitter", "POST", "/v1/jobs", WatchedJob(1, "7005")).status, 201);
  EXPECT_EQ(As("submitter", "POST", "/v1/jobs", WatchedJob(1, "12_3")).status, 201) << "an array task";

  // An admin binds anyone's job, but not one Slurm does not show.
  slurm_jobs_["7006"] = ShownAs("7006", "kim.lee", "RUNNING");
  EXPECT_EQ(As("admin", "POST", "/v1/jobs", WatchedJob(1, "7006")).status, 201);
  unknown_slurm_jobs_.insert("7007");
  EXPECT_EQ(As("admin", "POST", "/v1/external/slurm/7007/reports", SrunBody(Heartbeats(1, {0}), 1)).status,
            404);
  EXPECT_TRUE(JobsWith("7007").empty());
}

// Under --slurm an external id reaches Slurm's commands (the watched job's reads, requeue): only a Slurm job
// id is taken, so no option or list is ever passed to scontrol.
TEST_F(SlurmBindingTest, AnExternalIdThatIsNoSlurmJobIdIsRefusedBeforeSlurmIsAsked) {
  for (const char* id : {"--help", "12,13", "12.0", "12_", "_3", "12_3_4", "x1"}) {
    ApiReply r = As("admin", "POST", "/v1/jobs", WatchedJob(2, id));
    EXPECT_EQ(r.status, 422) << id << r.body.dump();
    EXPECT_EQ(r.body["errors"][0]["field"], "external_id") << id << r.body.dump();
  }
  EXPECT_EQ(slurm_asked_, 0);
}

// Slurm that does not answer in time: 503 with Retry-After, nothing bound; the next try binds.
TEST_F(SlurmBindingTest, SlurmNotAnsweringIsA503WithRetryAfter) {
  slurm_down_ = true;
  HttpRequest req;
  req.method = "POST";
  req.target = "/v1/external/slurm/7010/reports";
  req.request_id = "test";
  req.headers.emplace_back("Authorization", "Bearer submitter-token-0123456789");
  req.headers.emplace_back("Content-Type", "application/json");
  req.body = SrunBody(Heartbeats(1, {0}), 1).dump();
  HttpResponse res;
  api_.router_.Handle(req, [&](HttpResponse r) { res = std::move(r); });
  api_.Drain();
  EXPECT_EQ(res.status, 503) << res.body;
  bool retry_after = false;
  for (const auto& [k, v] : res.headers) retry_after |= k == "Retry-After" && v == "5";
  EXPECT_TRUE(retry_after) << res.body;
  EXPECT_NE(res.body.find("slurm_job_id"), std::string::npos) << res.body;
  EXPECT_TRUE(JobsWith("7010").empty());
  slurm_down_ = false;
  EXPECT_EQ(
      As("submitter", "POST", "/v1/external/slurm/7010/reports", SrunBody(Heartbeats(1, {0}), 1)).status,
      202);
}

// Reports that waited for Slurm's answer look the id up again: the first creates the job, the others bind
// to it (none creates a second).
TEST_F(SlurmBindingTest, ReportsWaitingForSlurmCreateOneJob) {
  std::vector<int> statuses;
  std::vector<Json> answers;
  for (int rank = 0; rank < 4; ++rank) {
    HttpRequest req;
    req.method = "POST";
    req.target = "/v1/external/slurm/7020/reports";
    req.request_id = "test";
    req.headers.emplace_back("Authorization", "Bearer submitter-token-0123456789");
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = SrunBody(Heartbeats(1, {rank}), 4).dump();
    api_.router_.Handle(req, [&](HttpResponse r) {
      statuses.push_back(r.status);
      answers.push_back(Json::parse(r.body, nullptr, false));
    });
  }
  EXPECT_TRUE(statuses.empty()) << "each waits for Slurm";
  api_.Drain();
  ASSERT_EQ(statuses, (std::vector<int>{202, 202, 202, 202}));
  int created = 0;
  for (const Json& a : answers) created += a.value("created", false) ? 1 : 0;
  EXPECT_EQ(created, 1);
  EXPECT_EQ(JobsWith("7020").size(), 1u);
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
  api_.controller_->OnSlurmReport(
      RequeueOutcome{requeued_[0].finding, id, "77", false, "Slurm shows job 77 COMPLETED"});
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
  api_.controller_->OnSlurmReport(RequeueOutcome{requeued_[0].finding, id, "78", true, ""});
  api_.Drain();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 1);
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  EXPECT_EQ(fs[0]["actions"].dump().find("not requeued"), std::string::npos) << fs[0].dump();
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

class SlurmBindingWithoutSlurmTest : public SlurmBindingTest {
 protected:
  SlurmBindingWithoutSlurmTest() : SlurmBindingTest(/*requeue=*/false) {}
};

// Without --slurm nothing can say whose a Slurm job is: only an admin binds an id (the admin's job is then
// the one its ranks report into).
TEST_F(SlurmBindingWithoutSlurmTest, OnlyAnAdminBindsAnIdWithoutSlurm) {
  ApiReply r = As("submitter", "POST", "/v1/external/slurm/77/reports", SrunBody(Heartbeats(1, {0}), 1));
  EXPECT_EQ(r.status, 403) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "slurm_job_id") << r.body.dump();
  r = As("submitter", "POST", "/v1/jobs", WatchedJob(1, "77"));
  EXPECT_EQ(r.status, 403) << r.body.dump();
  EXPECT_EQ(r.body["errors"][0]["field"], "external_id") << r.body.dump();
  EXPECT_TRUE(JobsWith("77").empty());
  EXPECT_EQ(As("submitter", "POST", "/v1/jobs", WatchedJob(1, "")).status, 201) << "no id: nothing to bind";
  r = As("admin", "POST", "/v1/external/slurm/77/reports", SrunBody(Heartbeats(1, {0}), 1));
  EXPECT_EQ(r.status, 202) << r.body.dump();
  EXPECT_EQ(JobsWith("77").size(), 1u);
}

TEST_F(SlurmBindingWithoutSlurmTest, RequeueWithoutSlurmIsRecordedAsNotPossible) {
  const std::string id = RankOneFallsSilent("66", Json::object(), "admin");
  Json fs = As("viewer", "GET", "/v1/jobs/" + id + "/failures").body["failures"];
  ASSERT_FALSE(fs.empty());
  EXPECT_NE(fs[0]["actions"].dump().find("cannot requeue Slurm job 66: the daemon runs without --slurm"),
            std::string::npos)
      << fs[0].dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["restarts"], 0);
}

TEST_F(SlurmBindingWithoutSlurmTest, WithoutSlurmToAskTheJobEndsWhenEveryRankFinished) {
  ApiReply r = As("admin", "POST", "/v1/external/slurm/901/reports", SrunBody(Heartbeats(1, {0, 1}), 2));
  ASSERT_EQ(r.status, 202) << r.body.dump();
  const std::string id = r.body["job"];
  ApiReply one = As("admin", "POST", "/v1/external/slurm/901/reports", SrunBody(Finished(1, {0}), 2));
  ASSERT_EQ(one.status, 202) << one.body.dump();
  EXPECT_EQ(As("viewer", "GET", "/v1/jobs/" + id).body["state"], "running");
  ASSERT_EQ(As("admin", "POST", "/v1/external/slurm/901/reports", SrunBody(Finished(1, {1}), 2)).status, 202);
  Json job = As("viewer", "GET", "/v1/jobs/" + id).body;
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["reason"], "every rank reported finished");
}

}  // namespace
}  // namespace shepherd::testing
