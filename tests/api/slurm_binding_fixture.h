// The fixtures of the Slurm binding tests: an in-process API with auth, simulated time and, with --slurm,
// a requeue that is recorded instead of run and Slurm's answers about a job's owner played by the test
// (SlurmBindingTest); the Slurm worker's reads of watched jobs played by the test (SlurmWatchTest).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "slurm/jobs.h"
#include "tests/api/api_harness.h"

namespace shepherd::testing {

struct Requeued {
  std::string slurm_job;
  std::string finding;
};

class SlurmBindingTest : public ::testing::Test {
 protected:
  explicit SlurmBindingTest(bool slurm = true) : api_(Options(slurm, &requeued_), SlurmApi(slurm)) {}

  // With --slurm, Slurm is asked whose a job is before a caller binds its id. The answer comes later, as
  // from the daemon's asker thread (posted). Slurm shows each id in `slurm_jobs_`, an id of
  // `unknown_slurm_jobs_` not at all, and any other id as a running job of sam's (the submitter token).
  ApiOptions SlurmApi(bool slurm) {
    ApiOptions o;
    if (!slurm) return o;
    o.show_slurm_job = [this](const std::string& id, std::function<void(Result<slurm::SlurmJob>)> done) {
      ++slurm_asked_;
      Result<slurm::SlurmJob> shown = NotFound("slurm job " + id + " not found");
      if (slurm_down_)
        shown = Unavailable("scontrol show job " + id + ": timed out");
      else if (auto it = slurm_jobs_.find(id); it != slurm_jobs_.end())
        shown = it->second;
      else if (!unknown_slurm_jobs_.contains(id))
        shown = ShownAs(id, "sam", "RUNNING");
      api_.posted_.push_back([done = std::move(done), shown = std::move(shown)] { done(shown); });
    };
    o.slurm_users = {{"kim", "kim.lee"}};  // kim's token stands for Unix user kim.lee; sam's for sam
    return o;
  }
  static slurm::SlurmJob ShownAs(const std::string& id, const std::string& user, const std::string& state) {
    return slurm::ParseJob("JobId=" + id + " JobName=train-llm UserId=" + user + "(1000) JobState=" + state +
                           " Reason=None Requeue=1 Restarts=0 ExitCode=0:0 NodeList=n[0-1]")
        .value();
  }

  static ControllerOptions Options(bool requeue, std::vector<Requeued>* out) {  // requeue: --slurm
    ControllerOptions o;
    o.slurm = requeue;  // as the daemon: requeue is wired only with --slurm
    if (requeue)
      o.slurm_requeue = [out](const Job& job, const Finding& f) {
        out->push_back({job.spec.external_id, f.id});
      };
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
  // `who` sends the reports (a role name of the tokens above).
  std::string RankOneFallsSilent(const std::string& slurm_job, const Json& more_policy = Json::object(),
                                 const std::string& who = "submitter") {
    Json policy = {{"external_remediation", "requeue"}, {"heartbeat_timeout_s", 5}, {"startup_grace_s", 5}};
    policy.update(more_policy);
    std::string id;
    for (int s = 0; s < 20; ++s) {
      ApiReply r =
          As(who, "POST", "/v1/external/slurm/" + slurm_job + "/reports",
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
  std::map<std::string, slurm::SlurmJob> slurm_jobs_;
  std::set<std::string> unknown_slurm_jobs_;
  bool slurm_down_ = false;
  int slurm_asked_ = 0;
  Authenticator auth_;
  ApiHarness api_;
};

// --slurm: every reconcile cycle the daemon's worker reads the Slurm job of each watched job (SyncSlurm
// lists them, OnSlurmReport takes the reads). The records are parsed from scontrol's own format.
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
    api_.controller_->OnSlurmReport(SlurmCycleResults{{}, {{{job, external_id}, record}}});
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

}  // namespace shepherd::testing
