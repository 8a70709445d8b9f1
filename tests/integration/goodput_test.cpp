// Goodput over real HTTP from the real daemon: a job another launcher starts reports steps and a
// checkpoint, its launcher restarts it, the daemon is killed and started again; each goodput answer has
// every bucket, sums to its wall time, and spans no more than the test's own clock saw.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "core/json.h"
#include "core/time.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

Json J(const HttpResult& r) {
  return Json::parse(r.body);
}

const char* kBuckets[] = {"queued",    "startup",  "productive", "lost_progress", "checkpoint_save",
                          "detection", "recovery", "backoff",    "unattributed"};

double SecondsSince(const std::string& rfc3339, Time t) {
  return ToSeconds(t - *ParseRfc3339(rfc3339));
}

// Every bucket and recovery part present; the buckets sum to wall_s, the parts to recovery; nothing
// negative; GPU-hours = seconds × GPUs outside the queue, at most.
void ExpectWhole(const Json& g) {
  double sum = 0, gpu_hours = 0;
  for (const char* b : kBuckets) {
    ASSERT_TRUE(g["buckets"].contains(b)) << b << " missing: " << g.dump();
    const double s = g["buckets"][b]["seconds"];
    EXPECT_GE(s, 0) << b;
    sum += s;
    gpu_hours += g["buckets"][b]["gpu_hours"].get<double>();
  }
  EXPECT_NEAR(sum, g["wall_s"].get<double>(), 1e-6) << g.dump();
  double parts = 0;
  for (const char* p : {"stop", "wait", "launch", "load"})
    parts += g["buckets"]["recovery"]["parts"][p]["seconds"].get<double>();
  EXPECT_NEAR(parts, g["buckets"]["recovery"]["seconds"].get<double>(), 1e-6);
  EXPECT_LE(gpu_hours, g["wall_s"].get<double>() * 4 / 3600 + 1e-9);
}

TEST(Goodput, AJobsAnswerSumsToItsWallTimeAcrossARestartAndADaemonRestart) {
  TempDir dir;
  std::string job;
  const Time before_submit = std::chrono::system_clock::now();
  {
    Daemon d(dir.path);
    ASSERT_TRUE(d.WaitReady()) << d.log();
    ASSERT_EQ(Http(d.port(), "POST", "/v1/nodes",
                   Json{{"id", "n0"},
                        {"gpus", 8},
                        {"gpu_memory_gib", 80},
                        {"gpu_model", "H100"},
                        {"topology", {{"spine", "s0"}, {"leaf", "l0"}}}}
                       .dump())
                  .status,
              201);
    const Json spec = {
        {"name", "g"},
        {"model", {{"parameters", 1e9}, {"layers", 8}, {"hidden", 1024}, {"heads", 8}, {"seq_len", 1024}}},
        {"training", {{"global_batch_size", 64}}},
        {"parallelism", {{"tp", 1}, {"pp", 1}, {"dp", 4}}},
        {"resources", {{"gpus", 4}}}};  // no command: another launcher starts it, its ranks report
    HttpResult r = Http(d.port(), "POST", "/v1/jobs", spec.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    job = J(r)["id"];
    const std::string base = "/v1/jobs/" + job;
    // Attempt 1: steps, and a checkpoint every rank saved.
    Json reports = Json::array();
    for (int rank = 0; rank < 4; ++rank) {
      for (int step = 1; step <= 3; ++step)
        reports.push_back({{"rank", rank},
                           {"attempt", 1},
                           {"kind", "step"},
                           {"step", step},
                           {"loss", 2.0},
                           {"grad_norm", 1.0},
                           {"step_time_s", 0.1}});
      reports.push_back({{"rank", rank},
                         {"attempt", 1},
                         {"kind", "checkpoint"},
                         {"step", 3},
                         {"path", "/ckpt/3/rank" + std::to_string(rank)}});
    }
    r = Http(d.port(), "POST", base + "/reports", Json{{"reports", reports}}.dump());
    ASSERT_EQ(r.status, 202) << r.body;
    ASSERT_EQ(J(r)["accepted"], 16) << r.body;

    HttpResult g1 = Http(d.port(), "GET", base + "/goodput");
    const Time after_first = std::chrono::system_clock::now();
    ASSERT_EQ(g1.status, 200) << g1.body;
    const Json a = J(g1);
    ExpectWhole(a);
    EXPECT_EQ(a["job"], job);
    EXPECT_EQ(a["gpus"], 4);
    ASSERT_EQ(a["attempts"].size(), 1u) << a.dump();
    EXPECT_EQ(a["attempts"][0]["attempt"], 1);
    // The job's life as the answer tells it lies within what this test's clock saw.
    const Json created = J(Http(d.port(), "GET", base))["created_at"];
    EXPECT_EQ(a["since"], created);
    EXPECT_GE(SecondsSince(a["since"], after_first), a["wall_s"].get<double>() - 0.002);
    EXPECT_LE(a["wall_s"].get<double>(), ToSeconds(after_first - before_submit) + 0.002);
    EXPECT_TRUE(a["by_cause"].is_object());
    // No save time measured: no advice, and why.
    if (a["checkpoint_advice"].is_null())
      EXPECT_FALSE(a["checkpoint_advice_reason"].get<std::string>().empty());
    else
      EXPECT_GT(a["checkpoint_advice"]["interval_s"].get<double>(), 0);

    // Its launcher restarts it: the ranks' reports name attempt 2.
    Json again = Json::array();
    for (int rank = 0; rank < 4; ++rank)
      again.push_back({{"rank", rank},
                       {"attempt", 2},
                       {"kind", "step"},
                       {"step", 4},
                       {"loss", 2.0},
                       {"grad_norm", 1.0},
                       {"step_time_s", 0.1}});
    r = Http(d.port(), "POST", base + "/reports", Json{{"reports", again}}.dump());
    ASSERT_EQ(r.status, 202) << r.body;
    ASSERT_EQ(J(Http(d.port(), "GET", base))["attempt"], 2);
    const Json b = J(Http(d.port(), "GET", base + "/goodput"));
    ExpectWhole(b);
    ASSERT_EQ(b["attempts"].size(), 2u) << b.dump();
    EXPECT_EQ(b["attempts"][1]["attempt"], 2);
    d.Signal(SIGKILL);
    ASSERT_EQ(d.Wait(), 128 + SIGKILL);
  }
  // Started again: the earlier attempt is read back from the database.
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  const Json c = J(Http(d.port(), "GET", "/v1/jobs/" + job + "/goodput"));
  ExpectWhole(c);
  ASSERT_EQ(c["attempts"].size(), 2u) << c.dump();
  EXPECT_EQ(c["attempts"][0]["attempt"], 1);

  // A window inside the job's life: the answer spans it exactly.
  const Time created = *ParseRfc3339(c["since"].get<std::string>());
  // The job may be younger than the window below needs: wait, bounded, for the clock to pass it.
  for (const Time deadline = std::chrono::system_clock::now() + Seconds(5);
       std::chrono::system_clock::now() < created + Seconds(0.03) && std::chrono::system_clock::now() < deadline;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string since = FormatRfc3339(created + Seconds(0.01));
  // A little in the past: the text is rounded to the millisecond and must not pass the daemon's now.
  const std::string until = FormatRfc3339(std::chrono::system_clock::now() - Seconds(0.005));
  ASSERT_LT(*ParseRfc3339(since), *ParseRfc3339(until));
  HttpResult w = Http(d.port(), "GET", "/v1/jobs/" + job + "/goodput?since=" + since + "&until=" + until);
  ASSERT_EQ(w.status, 200) << w.body;
  const Json wj = J(w);
  ExpectWhole(wj);
  EXPECT_EQ(wj["since"], since);
  EXPECT_EQ(wj["until"], until);
  EXPECT_NEAR(wj["wall_s"].get<double>(), ToSeconds(*ParseRfc3339(until) - *ParseRfc3339(since)), 1e-6);

  // The fleet: this job, totals that sum, and the published rate while the fleet has too little history.
  HttpResult f = Http(d.port(), "GET", "/v1/goodput");
  ASSERT_EQ(f.status, 200) << f.body;
  const Json fj = J(f);
  ExpectWhole(fj);
  ASSERT_EQ(fj["jobs"].size(), 1u) << fj.dump();
  EXPECT_EQ(fj["jobs"][0]["job"], job);
  EXPECT_NEAR(fj["jobs"][0]["wall_s"].get<double>(), fj["wall_s"].get<double>(), 1e-6);
  EXPECT_EQ(fj["interruption_rate"]["source"], "default");
  EXPECT_NEAR(fj["interruption_rate"]["per_node_hour"].get<double>(), 419.0 / (2048.0 * 54 * 24), 1e-15);
  EXPECT_TRUE(fj["since"].is_null());
  // A window before the job: nothing in it.
  f = Http(d.port(), "GET", "/v1/goodput?since=2020-01-01T00:00:00Z&until=2020-01-02T00:00:00Z");
  ASSERT_EQ(f.status, 200) << f.body;
  EXPECT_EQ(J(f)["wall_s"], 0);

  // The per-job series: all nine buckets and the ETTR.
  const std::string metrics = Http(d.port(), "GET", "/metrics").body;
  for (const char* b : kBuckets)
    EXPECT_NE(metrics.find("shepherd_job_goodput_seconds{job=\"" + job + "\",bucket=\"" + b + "\"} "),
              std::string::npos)
        << b;
  EXPECT_NE(metrics.find("shepherd_job_ettr{job=\"" + job + "\"} "), std::string::npos);
}

TEST(Goodput, UnknownJobsAndBadWindowsAreProblems) {
  TempDir dir;
  Daemon d(dir.path);
  ASSERT_TRUE(d.WaitReady()) << d.log();
  HttpResult r = Http(d.port(), "GET", "/v1/jobs/job-nope/goodput");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/problem+json");
  auto field_of = [](const HttpResult& x) { return J(x)["errors"][0]["field"].get<std::string>(); };
  for (const std::string& route : {"/v1/goodput", "/v1/jobs/job-nope/goodput"}) {
    r = Http(d.port(), "GET", route + "?since=yesterday");
    ASSERT_EQ(r.status, 400) << route << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/problem+json");
    EXPECT_EQ(field_of(r), "since");
    r = Http(d.port(), "GET", route + "?until=2026-02-30T00:00:00Z");
    ASSERT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(field_of(r), "until");
    r = Http(d.port(), "GET", route + "?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z");
    ASSERT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(field_of(r), "since");
    r = Http(d.port(), "GET", route + "?window=1h");
    ASSERT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(field_of(r), "window");
  }
}

}  // namespace
}  // namespace shepherd::testing
