// Checkpoint grading from step evidence, not arrival time: JobMonitor + CheckpointLedger driven the way
// the controller drives them (Ingest each report, checkpoint reports to the ledger, Evaluate, then
// TakeEvidence into ledger.OnEvidence). The same reports must grade the same paced or in one burst.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "health/checkpoint_ledger.h"
#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

// Two ranks (dp = 2: one replica set of two), healthy training: loss 2.00-2.02, grad norm 1, 1 s steps;
// both ranks hash every 10 steps (agreeing) and save a checkpoint every 25 steps.
struct Harness {
  FakeClock clock;
  std::unique_ptr<JobMonitor> monitor = MakeMonitor(MakeContext(1, 1, 2, clock.Now()));
  CheckpointLedger ledger{"job-1", {.expected_reporters = 2, .good_after_steps = 10, .hash_checks = true}};
  std::vector<Finding> findings;
  int64_t nan_step = -1;  // rank 1 reports a NaN loss at this step (an anomaly that warrants recovery)

  void Feed(const Report& r) {
    monitor->Ingest(r, clock.Now());
    if (r.kind == ReportKind::kCheckpoint)
      ledger.OnCheckpointReport(r.attempt, r.rank, *r.step, r.path, clock.Now());
  }
  void Evaluate() {
    for (Finding& f : monitor->Evaluate(clock.Now())) findings.push_back(std::move(f));
    for (const HealthEvidence& e : monitor->TakeEvidence()) ledger.OnEvidence(e, clock.Now());
  }
  void StepReports(int64_t s, std::map<int64_t, std::string> hashes = {}) {
    for (int r = 0; r < 2; ++r) {
      const double loss = s == nan_step && r == 1 ? std::nan("") : 2.0 + 0.01 * (s % 3);
      Feed(Step(r, clock.Now(), s, loss, 1.0, 1.0));
      if (s % 10 == 0) {
        auto h = hashes.find(s);
        Feed(Hash(r, clock.Now(), s, h != hashes.end() && r == 1 ? h->second : "ab" + std::to_string(s)));
      }
      if (s % 25 == 0) {
        Report c;
        c.rank = r;
        c.attempt = 1;
        c.time = clock.Now();
        c.kind = ReportKind::kCheckpoint;
        c.step = s;
        c.path = "/ckpt/" + std::to_string(s);
        Feed(c);
      }
    }
  }
  std::map<int64_t, CheckpointStatus> Statuses() const {
    std::map<int64_t, CheckpointStatus> out;
    for (const Checkpoint& c : ledger.All()) out[c.step] = c.status;
    return out;
  }
};

// By hand: checkpoints 25, 50, 75, 100; agreeing checks at 30, 50, 80, 100 (the first at or after each);
// healthy through 110 >= 25+10, 50+10, 75+10, 100+10: all four good, last-known-good step 100.
const std::map<int64_t, CheckpointStatus> kAllGood = {{25, CheckpointStatus::kGood},
                                                      {50, CheckpointStatus::kGood},
                                                      {75, CheckpointStatus::kGood},
                                                      {100, CheckpointStatus::kGood}};

TEST(GradingTest, PacedReportsGradeEveryCheckpointGood) {
  Harness h;
  for (int64_t s = 1; s <= 110; ++s) {
    h.StepReports(s);
    h.clock.AdvanceSeconds(1);
    h.Evaluate();
  }
  EXPECT_TRUE(h.findings.empty()) << h.findings[0].detail;
  EXPECT_EQ(h.Statuses(), kAllGood);
  ASSERT_TRUE(h.ledger.LastKnownGood());
  EXPECT_EQ(h.ledger.LastKnownGood()->step, 100);
}

TEST(GradingTest, TheSameReportsInOneBurstGradeTheSame) {
  Harness h;
  for (int64_t s = 1; s <= 110; ++s) {
    h.StepReports(s);
    h.clock.AdvanceSeconds(0.008);  // 110 steps within 0.88 s: a client flushing its backlog
  }
  h.Evaluate();
  EXPECT_TRUE(h.findings.empty()) << h.findings[0].detail;
  EXPECT_EQ(h.Statuses(), kAllGood);
  ASSERT_TRUE(h.ledger.LastKnownGood());
  EXPECT_EQ(h.ledger.LastKnownGood()->step, 100);
}

// A grad-norm spike at step 108 (judged when step 109 arrives; onset 108). By hand: checkpoints 25, 50, 75
// have agreeing checks at 30, 50, 80 and healthy steps through 107 >= 35, 60, 85: good. Checkpoint 100
// needs healthy through 110 > 107: stays complete (not bad: the onset 108 is after it). Last-known-good 75.
// Before grading used step evidence, the burst left them all complete: the incident open at the single
// Evaluate blocked every healthy-through, while paced Evaluates had already passed step 85.
const std::map<int64_t, CheckpointStatus> kGoodThrough75 = {{25, CheckpointStatus::kGood},
                                                            {50, CheckpointStatus::kGood},
                                                            {75, CheckpointStatus::kGood},
                                                            {100, CheckpointStatus::kComplete}};

TEST(GradingTest, AnAnomalyNearTheEndGradesTheSamePacedOrInABurst) {
  Harness paced, burst;
  paced.nan_step = burst.nan_step = 108;
  for (int64_t s = 1; s <= 110; ++s) {
    paced.StepReports(s);
    paced.clock.AdvanceSeconds(1);
    paced.Evaluate();
    burst.StepReports(s);
    burst.clock.AdvanceSeconds(0.008);
  }
  burst.Evaluate();
  for (Harness* h : {&paced, &burst}) {
    ASSERT_EQ(h->findings.size(), 1u);
    EXPECT_EQ(h->findings[0].kind, FindingKind::kNonfiniteLoss);
    EXPECT_EQ(h->findings[0].onset_step, 108);
    EXPECT_EQ(h->Statuses(), kGoodThrough75);
    ASSERT_TRUE(h->ledger.LastKnownGood());
    EXPECT_EQ(h->ledger.LastKnownGood()->step, 75);
  }
}

}  // namespace
}  // namespace shepherd
