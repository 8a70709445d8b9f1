// Watched Slurm jobs under --slurm (control/launch/slurm_job_watch.h): the worker's reads of each watched job decide
// when it ends in Shepherd, and hold it while Slurm shows it suspended or ending. In process, simulated time.
#include "tests/api/slurm_binding_fixture.h"

namespace shepherd::testing {
namespace {

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

}  // namespace
}  // namespace shepherd::testing
