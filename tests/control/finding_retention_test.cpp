// Findings retention (ControllerOptions::finding_retention, the findings_retention_days config key): on a
// fake clock, resolved findings (their job ended or gone, no cordon naming them) older than the retention
// are erased from memory and the store through the tick's batch, a bounded number per pass; the rest stay.
#include <gtest/gtest.h>

#include <set>

#include "control/records.h"
#include "tests/control/controller_fixture.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using Ids = std::set<std::string>;

class FindingRetentionTest : public ControllerTest {
 protected:
  // A finding of `job` detected `days_ago` days before now, written to the store behind the controller.
  void StoreFinding(const std::string& id, const std::string& job, double days_ago) {
    Finding f;
    f.id = id;
    f.job = job;
    f.attempt = 1;
    f.kind = FindingKind::kHang;
    f.detected_at = clock_.Now() - Seconds(days_ago * 86400);
    f.incident = id;
    WriteBatch b;
    b.Put(FindingRecord(f));
    ASSERT_TRUE(testing::WriteSync(*store_, std::move(b)).ok());
  }
  std::set<std::string> StoredFindings() {
    auto s = store_->Load();
    EXPECT_TRUE(s.ok());
    std::set<std::string> out;
    for (const Record& r : s->records)
      if (r.collection == Collection::kFindings) out.insert(r.key);
    return out;
  }
  std::set<std::string> KeptFindings() {
    auto f = controller_->view().GetFailures({});
    EXPECT_TRUE(f.ok());
    std::set<std::string> out;
    for (const Finding& x : *f) out.insert(x.id);
    return out;
  }
  void Restart(ControllerOptions options) {
    controller_ = std::make_unique<Controller>(
        store_.get(), &clock_, [this](std::function<void()> f) { posted_.push_back(std::move(f)); }, options);
    ASSERT_TRUE(controller_->Recover().ok());
    Drain();
  }
};

TEST_F(FindingRetentionTest, ResolvedFindingsOlderThanTheRetentionGoRunningJobsKeepTheirs) {
  ASSERT_TRUE(AddNode("n1", "leaf-a").ok());
  ASSERT_TRUE(AddNode("n2", "leaf-a").ok());
  auto ended = Submit(8);
  auto running = Submit(8);
  ASSERT_TRUE(ended.ok() && running.ok());
  ASSERT_TRUE(Cancel(ended->job.id).ok());
  StoreFinding("f-000001", ended->job.id, 40);    // resolved, old: goes
  StoreFinding("f-000002", ended->job.id, 10);    // resolved, recent: stays
  StoreFinding("f-000003", running->job.id, 40);  // its job runs: stays
  StoreFinding("f-000004", "job-long-gone", 31);  // its job is gone: goes
  ControllerOptions options;                      // the default: 30 days
  Restart(options);
  ASSERT_EQ(KeptFindings().size(), 4u);

  controller_->Tick();
  Drain();
  EXPECT_EQ(KeptFindings(), (Ids{"f-000002", "f-000003"}));
  EXPECT_EQ(StoredFindings(), (Ids{"f-000002", "f-000003"}));

  // 21 days later the second one is 31 days old too; the running job's stays whatever its age.
  clock_.AdvanceSeconds(21 * 86400);
  controller_->Tick();
  Drain();
  EXPECT_EQ(StoredFindings(), (Ids{"f-000003"}));
  EXPECT_EQ(KeptFindings(), (Ids{"f-000003"}));
}

TEST_F(FindingRetentionTest, APassErasesABoundedBatchAndPassesAreSpaced) {
  for (int i = 1; i <= 7; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "f-%06d", i);
    StoreFinding(id, "job-gone", 100);
  }
  ControllerOptions options;
  options.finding_retention = FindingRetention{.max_age_s = 86400, .prune_batch = 3, .pass_interval_s = 60};
  Restart(options);
  controller_->Tick();
  Drain();
  EXPECT_EQ(StoredFindings().size(), 4u);  // the 3 oldest went
  EXPECT_EQ(StoredFindings().count("f-000001"), 0u);
  controller_->Tick();  // within the pass interval: nothing more
  Drain();
  EXPECT_EQ(StoredFindings().size(), 4u);
  clock_.AdvanceSeconds(61);
  controller_->Tick();
  Drain();
  EXPECT_EQ(StoredFindings().size(), 1u);
  clock_.AdvanceSeconds(61);
  controller_->Tick();
  Drain();
  EXPECT_TRUE(StoredFindings().empty());
  EXPECT_TRUE(KeptFindings().empty());
}

TEST_F(FindingRetentionTest, ZeroKeepsFindingsForever) {
  StoreFinding("f-000001", "job-gone", 3650);
  ControllerOptions options;
  options.finding_retention.max_age_s = 0;
  Restart(options);
  controller_->Tick();
  Drain();
  EXPECT_EQ(StoredFindings(), (Ids{"f-000001"}));
}

}  // namespace
}  // namespace shepherd
