// Goodput accounting on hand-built records. Times are seconds after an epoch the test picks; every expected
// figure is worked out by hand in the comment next to it, never by the code under test.
#include "goodput/accounting.h"

#include <gtest/gtest.h>

#include <vector>

namespace shepherd {
namespace {

const Time kEpoch = FromUnixSeconds(1'800'000'000);
Time T(double s) {
  return kEpoch + Seconds(s);
}

constexpr double kGpus = 16;  // every attempt here holds 16 GPUs on 2 nodes

struct Records {
  Job job;
  std::vector<Attempt> attempts;
  std::vector<Checkpoint> checkpoints;
  std::vector<Finding> findings;

  Records(JobState state, double created, double updated = 0) {
    job.id = "job-1";
    job.state = state;
    job.created_at = T(created);
    job.updated_at = T(updated);
  }
  Attempt& Add(int number, double start) {
    Attempt a;
    a.job = job.id;
    a.number = number;
    a.started_at = T(start);
    attempts.push_back(a);
    return attempts.back();
  }
  void Ckpt(int attempt, int64_t step, double at, CheckpointStatus status = CheckpointStatus::kGood) {
    Checkpoint c;
    c.job = job.id;
    c.attempt = attempt;
    c.step = step;
    c.created_at = T(at);
    c.status = status;
    checkpoints.push_back(c);
  }
  void Fault(const std::string& id, FindingKind kind, std::optional<double> onset, double detected,
             const std::string& incident = "") {
    Finding f;
    f.id = id;
    f.job = job.id;
    f.kind = kind;
    if (onset) f.onset_at = T(*onset);
    f.detected_at = T(detected);
    f.incident = incident;
    findings.push_back(f);
  }
  JobGoodput Account(double now, std::optional<double> since = std::nullopt,
                     std::optional<double> until = std::nullopt) {
    sizes.assign(attempts.size(), AttemptSize{kGpus, 2});
    GoodputInput in{.job = job,
                    .attempts = attempts,
                    .checkpoints = checkpoints,
                    .findings = findings,
                    .now = T(now),
                    .sizes = sizes};
    if (since) in.since = T(*since);
    if (until) in.until = T(*until);
    return AccountJob(in);
  }
  std::vector<AttemptSize> sizes;
};

double Sec(const JobGoodput& g, Bucket b) {
  return g.buckets[static_cast<int>(b)].seconds;
}
double Cause(const JobGoodput& g, BadputCause c) {
  auto it = g.by_cause.find(c);
  return it == g.by_cause.end() ? 0 : it->second.seconds;
}
int Incidents(const JobGoodput& g, BadputCause c) {
  auto it = g.incidents.find(c);
  return it == g.incidents.end() ? 0 : it->second;
}

// Buckets tile the wall time, none negative; recovery's parts tile recovery; GPU-hours follow seconds.
void ExpectWhole(const JobGoodput& g) {
  double sum = 0, gh = 0;
  for (int b = 0; b < kBucketCount; ++b) {
    EXPECT_GE(g.buckets[b].seconds, 0) << ToString(static_cast<Bucket>(b));
    sum += g.buckets[b].seconds;
    gh += g.buckets[b].gpu_hours;
  }
  EXPECT_NEAR(sum, g.wall_s, 1e-6);
  const double queued = g.buckets[static_cast<int>(Bucket::kQueued)].seconds;
  EXPECT_NEAR(gh, (g.wall_s - queued) * kGpus / 3600, 1e-6);  // every span but the queue held 16 GPUs
  const RecoveryParts& r = g.recovery;
  EXPECT_NEAR(r.stop.seconds + r.wait.seconds + r.launch.seconds + r.load.seconds,
              g.buckets[static_cast<int>(Bucket::kRecovery)].seconds, 1e-6);
}

TEST(AccountingTest, NoFaults) {
  Records r(JobState::kRunning, 0);
  Attempt& a = r.Add(1, 100);
  a.first_step_at = T(160);
  a.save_s = 40;
  r.Ckpt(1, 500, 400);
  r.Ckpt(1, 1000, 700);
  const JobGoodput g = r.Account(1000);
  ExpectWhole(g);
  EXPECT_DOUBLE_EQ(g.wall_s, 1000);
  EXPECT_NEAR(Sec(g, Bucket::kQueued), 100, 1e-6);      // 0 → 100
  EXPECT_NEAR(Sec(g, Bucket::kStartup), 60, 1e-6);      // 100 → 160
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 800, 1e-6);  // 160 → 1000 is 840, less 40 of saves
  EXPECT_NEAR(Sec(g, Bucket::kCheckpointSave), 40, 1e-6);
  EXPECT_NEAR(g.ettr, 0.8, 1e-9);  // 800 / 1000
  EXPECT_NEAR(g.buckets[static_cast<int>(Bucket::kProductive)].gpu_hours, 800 * 16 / 3600.0, 1e-9);
  EXPECT_EQ(g.buckets[static_cast<int>(Bucket::kQueued)].gpu_hours, 0);
  ASSERT_EQ(g.attempts.size(), 1u);
  EXPECT_NEAR(g.attempts[0].wall_s, 900, 1e-6);  // 100 → 1000
  EXPECT_NEAR(g.attempts[0].productive_s, 800, 1e-6);
  EXPECT_TRUE(g.by_cause.empty());
  EXPECT_DOUBLE_EQ(g.gpus, kGpus);
}

// Attempt 1 checkpoints step 100 at 300 and dies at 420 (node lost, seen at 450, stopped at 470); the
// restart waits out its backoff to 500, starts at 530, loads for 15 s and steps from 560.
Records NodeLoss() {
  Records r(JobState::kRunning, 0);
  Attempt& a1 = r.Add(1, 10);
  a1.first_step_at = T(20);
  a1.last_step = 150;
  a1.last_step_at = T(400);
  a1.ended_at = T(470);
  a1.ended_by = "f-1";
  a1.save_s = 10;
  r.Ckpt(1, 100, 300);
  r.Fault("f-1", FindingKind::kNodeLost, 420, 450);
  Attempt& a2 = r.Add(2, 530);
  a2.not_before = T(500);
  a2.resume_step = 100;
  a2.resume_checkpoint = "job-1/1/100";
  a2.load_s = 15;
  a2.first_step_at = T(560);
  return r;
}

TEST(AccountingTest, NodeLossWithResume) {
  Records r = NodeLoss();
  const JobGoodput g = r.Account(1000);
  ExpectWhole(g);
  EXPECT_NEAR(Sec(g, Bucket::kQueued), 10, 1e-6);   // 0 → 10
  EXPECT_NEAR(Sec(g, Bucket::kStartup), 10, 1e-6);  // 10 → 20
  // Attempt 1's steps 20 → 300 are kept by checkpoint 100 (less its 10 s save, which ended at 300);
  // attempt 2's 560 → 1000 run on.
  EXPECT_NEAR(Sec(g, Bucket::kProductive), (300 - 20 - 10) + (1000 - 560), 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kCheckpointSave), 10, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 420 - 300, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 450 - 420, 1e-6);
  EXPECT_NEAR(g.recovery.stop.seconds, 470 - 450, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kBackoff), 500 - 470, 1e-6);
  EXPECT_NEAR(g.recovery.wait.seconds, 530 - 500, 1e-6);
  EXPECT_NEAR(g.recovery.launch.seconds, 560 - 530 - 15, 1e-6);
  EXPECT_NEAR(g.recovery.load.seconds, 15, 1e-6);
  // Everything from the fault's onset to the restart's first step, and the lost steps: 120 + 30 + 20 +
  // 30 + 30 + 15 + 15.
  EXPECT_NEAR(Cause(g, BadputCause::kNodeLost), 260, 1e-6);
  EXPECT_EQ(Incidents(g, BadputCause::kNodeLost), 1);
  ASSERT_EQ(g.attempts.size(), 2u);
  EXPECT_NEAR(g.attempts[0].wall_s, 460, 1e-6);  // 10 → 470
  EXPECT_NEAR(g.attempts[0].productive_s, 270, 1e-6);
  EXPECT_EQ(g.attempts[0].ended_by, "f-1");
  EXPECT_EQ(g.attempts[0].cause, BadputCause::kNodeLost);
  EXPECT_NEAR(g.attempts[1].productive_s, 440, 1e-6);
}

TEST(AccountingTest, WindowClipsEverySpan) {
  Records r = NodeLoss();
  const JobGoodput g = r.Account(1000, 400, 600);
  ExpectWhole(g);
  EXPECT_DOUBLE_EQ(g.wall_s, 200);
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 20, 1e-6);  // 400 → 420
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 30, 1e-6);     // 420 → 450
  EXPECT_NEAR(Sec(g, Bucket::kBackoff), 30, 1e-6);       // 470 → 500
  EXPECT_NEAR(Sec(g, Bucket::kRecovery), 20 + 30 + 15 + 15, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 40, 1e-6);  // 560 → 600
  EXPECT_NEAR(Sec(g, Bucket::kQueued), 0, 1e-6);
  EXPECT_EQ(Incidents(g, BadputCause::kNodeLost), 1);  // seen at 450, inside
  // A window before the fault holds no incident.
  const JobGoodput before = r.Account(1000, 0, 200);
  ExpectWhole(before);
  EXPECT_EQ(Incidents(before, BadputCause::kNodeLost), 0);
  // 20 → 200, less the share of the 10 s save (in the step span 20 → 300) that falls inside: 180/280.
  EXPECT_NEAR(Sec(before, Bucket::kProductive), 180 - 10.0 * 180 / 280, 1e-6);
}

// A GPU fault ends attempt 1 at step 250; attempt 2 resumes from 200 and finds corruption; attempt 3 rolls
// back past attempt 2 to step 100, a checkpoint of attempt 1.
TEST(AccountingTest, RollbackPastAnEarlierAttempt) {
  Records r(JobState::kRunning, 0);
  Attempt& a1 = r.Add(1, 0);
  a1.first_step_at = T(10);
  a1.last_step = 250;
  a1.last_step_at = T(260);
  a1.ended_at = T(290);
  a1.ended_by = "f-1";
  r.Ckpt(1, 100, 110);
  r.Ckpt(1, 200, 210);
  r.Fault("f-1", FindingKind::kGpuFault, 270, 280);
  Attempt& a2 = r.Add(2, 300);
  a2.resume_step = 200;
  a2.first_step_at = T(310);
  a2.last_step = 300;
  a2.last_step_at = T(410);
  a2.ended_at = T(440);
  a2.ended_by = "f-2";
  r.Fault("f-2", FindingKind::kSdcSuspected, 420, 430);
  Attempt& a3 = r.Add(3, 450);
  a3.resume_step = 100;
  a3.first_step_at = T(460);
  const JobGoodput g = r.Account(600);
  ExpectWhole(g);
  // Kept: attempt 1 up to step 100 (10 → 110) and attempt 3 (460 → 600).
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 100 + 140, 1e-6);
  // Lost: attempt 1's 110 → 210 (steps 100-200, to the rollback) and 210 → 270 (to its own fault);
  // attempt 2's 310 → 420.
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 100 + 60 + 110, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 10 + 10, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kRecovery), 3 * 20, 1e-6);  // stop, wait, launch of each restart: 10 s each
  EXPECT_NEAR(Sec(g, Bucket::kStartup), 10, 1e-6);
  // GPU fault: its lost steps 60, detection 10, stopping 10, waiting 10, launch 10.
  EXPECT_NEAR(Cause(g, BadputCause::kGpuFault), 100, 1e-6);
  // Corruption: attempt 1's steps 100-200 (100 s) and all of attempt 2's steps (110), detection 10, stop
  // 10, wait 10, launch 10.
  EXPECT_NEAR(Cause(g, BadputCause::kSdc), 250, 1e-6);
  EXPECT_EQ(Incidents(g, BadputCause::kGpuFault), 1);
  EXPECT_EQ(Incidents(g, BadputCause::kSdc), 1);
  EXPECT_NEAR(g.attempts[1].productive_s, 0, 1e-6);
}

// A node is lost; the restart's launch fails before any step (a finding of the same incident); the next
// restart runs. One incident, one cause, for all of it.
TEST(AccountingTest, IncidentWithTwoAttempts) {
  Records r(JobState::kRunning, 0);
  Attempt& a1 = r.Add(1, 0);
  a1.first_step_at = T(10);
  a1.last_step = 60;
  a1.last_step_at = T(90);
  a1.ended_at = T(120);
  a1.ended_by = "f-1";
  r.Ckpt(1, 50, 60);
  r.Fault("f-1", FindingKind::kNodeLost, 100, 110, "f-1");
  Attempt& a2 = r.Add(2, 130);
  a2.resume_step = 50;
  a2.ended_at = T(210);
  a2.ended_by = "f-2";
  r.Fault("f-2", FindingKind::kProcessExit, 190, 200, "f-1");
  Attempt& a3 = r.Add(3, 220);
  a3.resume_step = 50;
  a3.first_step_at = T(240);
  const JobGoodput g = r.Account(300);
  ExpectWhole(g);
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 50 + 60, 1e-6);  // 10 → 60, 240 → 300
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 40, 1e-6);     // 60 → 100
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 10 + 10, 1e-6);   // 100 → 110, 190 → 200
  // stopping 10, waiting 10, attempt 2's launch 130 → 190 (60), stopping 10, waiting 10, attempt 3's launch 20.
  EXPECT_NEAR(Sec(g, Bucket::kRecovery), 10 + 10 + 60 + 10 + 10 + 20, 1e-6);
  EXPECT_NEAR(Cause(g, BadputCause::kNodeLost), 40 + 20 + 120, 1e-6);
  EXPECT_NEAR(Cause(g, BadputCause::kUserError), 0, 1e-6);
  EXPECT_EQ(Incidents(g, BadputCause::kNodeLost), 1);
  EXPECT_EQ(g.attempts[1].cause, BadputCause::kNodeLost);
}

// The same, with the failed restart's end pointed at the incident's root (found before it started): the
// restart has no detection or stop of its own; all of it is the incident's launch.
TEST(AccountingTest, RestartEndedByTheIncidentsRoot) {
  Records r(JobState::kRunning, 0);
  Attempt& a1 = r.Add(1, 0);
  a1.first_step_at = T(10);
  a1.ended_at = T(120);
  a1.ended_by = "f-1";
  r.Ckpt(1, 50, 60);
  r.Fault("f-1", FindingKind::kNodeLost, 100, 110, "f-1");
  Attempt& a2 = r.Add(2, 130);
  a2.resume_step = 50;
  a2.ended_at = T(210);
  a2.ended_by = "f-1";
  Attempt& a3 = r.Add(3, 220);
  a3.resume_step = 50;
  a3.first_step_at = T(240);
  const JobGoodput g = r.Account(300);
  ExpectWhole(g);
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 10, 1e-6);      // 100 → 110 only
  EXPECT_NEAR(g.recovery.launch.seconds, 80 + 20, 1e-6);  // 130 → 210, 220 → 240
  EXPECT_NEAR(g.recovery.stop.seconds, 10, 1e-6);         // 110 → 120
  EXPECT_NEAR(g.recovery.wait.seconds, 10 + 10, 1e-6);    // 120 → 130, 210 → 220
  EXPECT_NEAR(Cause(g, BadputCause::kNodeLost), 40 + 10 + 10 + 10 + 80 + 10 + 20, 1e-6);
  EXPECT_EQ(Incidents(g, BadputCause::kNodeLost), 1);
}

// The attempt ended by a hang and the job waits out its restart's backoff: its steps up to its last good
// checkpoint are kept.
TEST(AccountingTest, BackoffWhileRecovering) {
  Records r(JobState::kRecovering, 0);
  Attempt& a1 = r.Add(1, 0);
  a1.first_step_at = T(20);
  a1.last_step = 20;
  a1.last_step_at = T(80);
  a1.ended_at = T(160);
  a1.ended_by = "f-1";
  r.Ckpt(1, 10, 50);
  r.Ckpt(1, 15, 70, CheckpointStatus::kComplete);  // not known good: not kept
  r.Fault("f-1", FindingKind::kHang, 90, 150);
  const JobGoodput g = r.Account(200);
  ExpectWhole(g);
  EXPECT_NEAR(Sec(g, Bucket::kStartup), 20, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 30, 1e-6);    // 20 → 50
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 40, 1e-6);  // 50 → 90
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 60, 1e-6);     // 90 → 150
  EXPECT_NEAR(g.recovery.stop.seconds, 10, 1e-6);        // 150 → 160
  EXPECT_NEAR(Sec(g, Bucket::kBackoff), 40, 1e-6);       // 160 → now (200)
  EXPECT_NEAR(Cause(g, BadputCause::kHang), 40 + 60 + 10 + 40, 1e-6);
}

TEST(AccountingTest, OperatorRestart) {
  Records r(JobState::kRunning, 0);
  Attempt& a1 = r.Add(1, 0);
  a1.first_step_at = T(5);
  a1.last_step = 12;
  a1.last_step_at = T(58);
  a1.ended_at = T(62);
  a1.ended_by = "f-1";
  r.Ckpt(1, 10, 50, CheckpointStatus::kComplete);
  r.Fault("f-1", FindingKind::kRestartRequested, std::nullopt, 60);  // no onset: no detection time
  Attempt& a2 = r.Add(2, 62);                                        // forced: no backoff
  a2.resume_step = 10;
  a2.first_step_at = T(70);
  const JobGoodput g = r.Account(100);
  ExpectWhole(g);
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 45 + 30, 1e-6);  // 5 → 50, 70 → 100
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 10, 1e-6);     // 50 → 60
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 0, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kBackoff), 0, 1e-6);
  EXPECT_NEAR(g.recovery.stop.seconds, 2, 1e-6);    // 60 → 62
  EXPECT_NEAR(g.recovery.launch.seconds, 8, 1e-6);  // 62 → 70
  EXPECT_NEAR(Cause(g, BadputCause::kOperatorRestart), 20, 1e-6);
  EXPECT_EQ(Incidents(g, BadputCause::kOperatorRestart), 1);
}

// Attempt 1's end was never recorded (the daemon lost it): from its last step to attempt 2's start nobody
// can say what happened.
TEST(AccountingTest, MissingMarksAreUnattributed) {
  Records r(JobState::kRunning, 0);
  Attempt& a1 = r.Add(1, 10);
  a1.first_step_at = T(20);
  a1.last_step = 40;
  a1.last_step_at = T(100);
  Attempt& a2 = r.Add(2, 150);
  a2.first_step_at = T(160);
  const JobGoodput g = r.Account(200);
  ExpectWhole(g);
  EXPECT_NEAR(Sec(g, Bucket::kUnattributed), 50, 1e-6);  // 100 → 150
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 80, 1e-6);  // 20 → 100: attempt 2 started from scratch
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 40, 1e-6);    // 160 → 200
  EXPECT_NEAR(Sec(g, Bucket::kStartup), 10, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kQueued), 10, 1e-6);
  EXPECT_NEAR(g.recovery.launch.seconds, 10, 1e-6);
  EXPECT_TRUE(g.by_cause.empty());  // no finding: no cause
}

// Clock skew: attempt 2 starts 10 s before attempt 1's recorded end. Both claims give the overlap up.
TEST(AccountingTest, OverlapIsUnattributedNeverNegative) {
  Records r(JobState::kRunning, 0);
  Attempt& a1 = r.Add(1, 0);
  a1.first_step_at = T(10);
  a1.ended_at = T(120);
  Attempt& a2 = r.Add(2, 110);
  a2.first_step_at = T(130);
  a2.not_before = T(90);  // before attempt 1's end: no backoff
  const JobGoodput g = r.Account(200);
  ExpectWhole(g);
  EXPECT_NEAR(Sec(g, Bucket::kUnattributed), 10, 1e-6);   // 110 → 120
  EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 100, 1e-6);  // 10 → 110
  EXPECT_NEAR(g.recovery.launch.seconds, 10, 1e-6);       // 120 → 130
  EXPECT_NEAR(Sec(g, Bucket::kProductive), 70, 1e-6);     // 130 → 200
  EXPECT_NEAR(Sec(g, Bucket::kBackoff), 0, 1e-6);
}

// A finding whose onset and detection contradict the attempt's marks (onset before the attempt, found
// after it ended) never makes a negative span.
TEST(AccountingTest, ContradictoryFindingTimesAreClamped) {
  Records r(JobState::kFailed, 0, 100);
  Attempt& a1 = r.Add(1, 0);
  a1.first_step_at = T(10);
  a1.ended_at = T(100);
  a1.ended_by = "f-1";
  r.Fault("f-1", FindingKind::kLossSpike, -50, 130);
  const JobGoodput g = r.Account(300);
  ExpectWhole(g);
  EXPECT_DOUBLE_EQ(g.wall_s, 100);  // a failed job ends at its end, not now
  // Onset clamped to the first step (10), detection to the attempt's end (100).
  EXPECT_NEAR(Sec(g, Bucket::kDetection), 90, 1e-6);
  EXPECT_NEAR(Sec(g, Bucket::kStartup), 10, 1e-6);
}

TEST(AccountingTest, EndedJobs) {
  {  // Succeeded: the last attempt is productive to its end.
    Records r(JobState::kSucceeded, 0, 100);
    Attempt& a = r.Add(1, 0);
    a.first_step_at = T(10);
    a.ended_at = T(100);
    const JobGoodput g = r.Account(500);
    ExpectWhole(g);
    EXPECT_DOUBLE_EQ(g.wall_s, 100);
    EXPECT_NEAR(Sec(g, Bucket::kProductive), 90, 1e-6);
  }
  {  // Cancelled: kept up to its last good checkpoint (60), the rest lost; no cause.
    Records r(JobState::kCancelled, 0, 100);
    Attempt& a = r.Add(1, 0);
    a.first_step_at = T(10);
    a.ended_at = T(100);
    r.Ckpt(1, 100, 60);
    const JobGoodput g = r.Account(500);
    ExpectWhole(g);
    EXPECT_NEAR(Sec(g, Bucket::kProductive), 50, 1e-6);
    EXPECT_NEAR(Sec(g, Bucket::kLostProgress), 40, 1e-6);
    EXPECT_TRUE(g.by_cause.empty());
  }
  {  // Cancelled while queued: all queue, no GPU-hours.
    Records r(JobState::kCancelled, 0, 70);
    const JobGoodput g = r.Account(500);
    ExpectWhole(g);
    EXPECT_NEAR(Sec(g, Bucket::kQueued), 70, 1e-6);
    EXPECT_EQ(g.ettr, 0);
  }
}

TEST(AccountingTest, GpusFromPlacement) {
  Job job;
  job.plan.dp = 4;
  Attempt a;
  for (int i = 0; i < 12; ++i) a.placement.ranks.push_back({.rank = i, .node = i < 8 ? "n1" : "n2"});
  AttemptSize s = SizeOf(a, job);
  EXPECT_EQ(s.gpus, 12);
  EXPECT_EQ(s.nodes, 2);
  job.spec.resources.gpus_per_node = 3;  // no placement: the plan's 4 GPUs at 3 a node
  s = SizeOf(Attempt{}, job);
  EXPECT_EQ(s.gpus, 4);
  EXPECT_EQ(s.nodes, 2);
}

TEST(AccountingTest, CauseNames) {
  Finding f;
  f.kind = FindingKind::kProcessExit;
  EXPECT_EQ(CauseOf(f), BadputCause::kUserError);
  f.fenced = true;
  EXPECT_EQ(CauseOf(f), BadputCause::kControlPlane);
  f.kind = FindingKind::kHeartbeatLost;
  EXPECT_EQ(CauseOf(f), BadputCause::kRankLost);
  for (int i = 0; i <= static_cast<int>(BadputCause::kOther); ++i) {
    auto c = static_cast<BadputCause>(i);
    EXPECT_EQ(BadputCauseFromString(ToString(c)), c);
  }
  EXPECT_STREQ(ToString(Bucket::kLostProgress), "lost_progress");
}

TEST(FleetRateTest, CountsHardwareIncidentsPerNodeHour) {
  // Ten jobs, each one attempt of 2 nodes for 60 h ended by a node loss, and one operator restart.
  std::vector<Job> jobs(10);
  std::vector<std::vector<Attempt>> attempts(10);
  std::vector<std::vector<Finding>> findings(10);
  std::vector<AttemptSize> size{{16, 2}};
  std::vector<JobRecords> records;
  for (int i = 0; i < 10; ++i) {
    jobs[i].state = JobState::kFailed;
    Attempt a;
    a.number = 1;
    a.started_at = T(0);
    a.ended_at = T(60 * 3600);
    a.ended_by = "f-" + std::to_string(i);
    attempts[i].push_back(a);
    Finding f;
    f.id = a.ended_by;
    f.kind = i == 9 ? FindingKind::kRestartRequested : FindingKind::kNodeLost;
    findings[i].push_back(f);
    records.push_back({.job = &jobs[i], .attempts = attempts[i], .findings = findings[i], .sizes = size});
  }
  FleetRate r = MeasureFleetRate(records, T(100 * 3600));
  EXPECT_EQ(r.incidents, 9);
  EXPECT_NEAR(r.node_hours, 10 * 2 * 60, 1e-6);  // 1,200
  EXPECT_NEAR(r.per_node_hour, 9.0 / 1200, 1e-12);
  EXPECT_FALSE(r.enough);  // 9 < 10
  findings[9][0].kind = FindingKind::kGpuFault;
  r = MeasureFleetRate(records, T(100 * 3600));
  EXPECT_EQ(r.incidents, 10);
  EXPECT_TRUE(r.enough);
}

}  // namespace
}  // namespace shepherd
