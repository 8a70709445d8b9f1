// Writes that do not slow with state: every statement on the write path finds its row
// through an index, checked with EXPLAIN QUERY PLAN on a real SQLite file holding many records (so the
// planner has statistics to choose a scan if the schema let it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "storage/schema.h"
#include "storage/sqlite_util.h"
#include "storage/store.h"
#include "tests/storage/test_util.h"

namespace shepherd {
namespace {

using ::shepherd::testing::RawDb;
using ::shepherd::testing::TempDir;

// The plan's detail lines (the 4th column of EXPLAIN QUERY PLAN) for `sql`, parameters unbound.
std::vector<std::string> PlanOf(const std::string& db, const std::string& sql) {
  sqlite3* raw = nullptr;
  sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  Db conn(raw);
  std::vector<std::string> out;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(raw, ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &s, nullptr) != SQLITE_OK)
    return {"<error: " + std::string(sqlite3_errmsg(raw)) + ">"};
  while (sqlite3_step(s) == SQLITE_ROW)
    out.push_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 3)));
  sqlite3_finalize(s);
  return out;
}

class QueryPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("plan.db");
    auto store = OpenSqliteStore(db_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    // Enough rows in several collections and jobs that a scan would be a real cost.
    for (int b = 0; b < 10; ++b) {
      WriteBatch batch;
      for (int i = 0; i < 500; ++i) {
        const int n = b * 500 + i;
        batch.Put({Collection::kNodes, "node-" + std::to_string(n), "", "{}"});
        batch.Put({Collection::kFindings, "f-" + std::to_string(n), "job-" + std::to_string(n % 50), "{}"});
      }
      (*store)->Write(std::move(batch), [](Status s) { ASSERT_TRUE(s.ok()) << s.message(); });
    }
    (*store)->Flush();
    store->reset();
    RawDb(db_).Column("ANALYZE");
  }
  TempDir dir_;
  std::string db_;
};

TEST_F(QueryPlanTest, EraseSearchesThePrimaryKey) {
  std::vector<std::string> plan = PlanOf(db_, kEraseRecordSql);
  ASSERT_FALSE(plan.empty());
  for (const std::string& step : plan) {
    EXPECT_EQ(step.find("SCAN"), std::string::npos) << step;
    EXPECT_NE(step.find("SEARCH records USING INDEX sqlite_autoindex_records_1 (collection=? AND key=?)"),
              std::string::npos)
        << step;
  }
}

TEST_F(QueryPlanTest, UpsertScansNothing) {
  // The conflict target is the primary key (a unique index on exactly (collection, key)).
  for (const std::string& step : PlanOf(db_, kUpsertRecordSql))
    EXPECT_EQ(step.find("SCAN"), std::string::npos) << step;
  RawDb raw(db_);
  EXPECT_EQ(raw.Column("SELECT name FROM pragma_index_info('sqlite_autoindex_records_1') ORDER BY seqno"),
            (std::vector<std::string>{"collection", "key"}));
  EXPECT_EQ(
      raw.One(
          "SELECT \"unique\" FROM pragma_index_list('records') WHERE name = 'sqlite_autoindex_records_1'"),
      "1");
}

TEST_F(QueryPlanTest, AJobsRecordsAreFoundThroughTheJobIndex) {
  for (const std::string& step : PlanOf(db_, "SELECT key FROM records WHERE job = ?1"))
    EXPECT_NE(step.find("USING INDEX records_by_job"), std::string::npos) << step;
}

}  // namespace
}  // namespace shepherd
