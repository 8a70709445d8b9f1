// Summaries (one report per rank per interval, ReportKind::kSummary): parsing, ingestion as a heartbeat,
// per-report refusals, and the hang watchdog driven by summaries alone.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "health/report.h"
#include "tests/health/health_test_util.h"

namespace shepherd {
namespace {

using namespace shepherd::testing;

const Time kRecv = FromUnixSeconds(1'800'000'000);

Result<Report> Parse(const Json& j) { return ParseReport(j, kRecv); }

std::vector<std::string> Fields(const Result<Report>& r) {
  std::vector<std::string> out;
  for (const auto& f : r.status().fields()) out.push_back(f.field);
  return out;
}

Json Wire() {
  return Json::parse(R"({"rank": 5, "attempt": 1, "time": 1800000000.5, "kind": "summary", "step": 120,
      "phase": "train", "groups": [
        {"group": "dp", "completed": 3418, "open": {"seq": 3419, "op": "allreduce", "since": 1800000000.25},
         "count": 31, "wait_s": 0.412},
        {"group": "ep", "completed": -1, "count": 0, "wait_s": 0, "members": [1, 5, 9]}]})");
}

TEST(SummaryParseTest, TheWireFormParsesFieldByField) {
  auto r = Parse(Wire());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->kind, ReportKind::kSummary);
  EXPECT_EQ(r->step, 120);
  EXPECT_EQ(r->phase, Phase::kTrain);
  ASSERT_EQ(r->groups.size(), 2u);
  const GroupSummary& dp = r->groups[0];
  EXPECT_EQ(dp.group, "dp");
  EXPECT_EQ(dp.group_kind, GroupKind::kDp);
  EXPECT_EQ(dp.completed, 3418);
  ASSERT_TRUE(dp.open.has_value());
  EXPECT_EQ(dp.open->seq, 3419);
  EXPECT_EQ(dp.open->op, "allreduce");
  EXPECT_EQ(dp.open->group_kind, GroupKind::kDp);
  EXPECT_EQ(dp.open->since, FromUnixSeconds(1'800'000'000.25));
  EXPECT_EQ(dp.count, 31);
  EXPECT_DOUBLE_EQ(dp.wait_s, 0.412);
  const GroupSummary& ep = r->groups[1];
  EXPECT_EQ(ep.group_kind, GroupKind::kOther);
  EXPECT_EQ(ep.completed, -1);
  EXPECT_FALSE(ep.open.has_value());
  EXPECT_EQ(ep.members, std::vector<int>({1, 5, 9}));
  EXPECT_STREQ(ToString(r->kind), "summary");

  Json bare = {{"rank", 0}, {"attempt", 1}, {"kind", "summary"}, {"groups", Json::array()}};
  auto b = Parse(bare);  // a rank that has run no collective yet: a heartbeat with no groups
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(b->groups.empty());
  // count and wait_s default to 0; `open` null is absent.
  Json min = bare;
  min["groups"] = Json::parse(R"([{"group": "tp", "completed": 4, "open": null}])");
  auto m = Parse(min);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->groups[0].count, 0);
  EXPECT_FALSE(m->groups[0].open.has_value());
}

TEST(SummaryParseTest, EveryInvalidFieldIsNamedByItsPath) {
  Json j = Wire();
  j["groups"][0]["completed"] = -2;
  j["groups"][0]["count"] = -1;
  j["groups"][0]["wait_s"] = -0.5;
  j["groups"][1]["members"] = Json::array({5, 1});
  j["groups"][1]["open"] = Json::parse(R"({"seq": "x", "since": "yesterday"})");
  auto r = Parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Fields(r), std::vector<std::string>({"groups[0].completed", "groups[0].count", "groups[0].wait_s",
                                                 "groups[1].members", "groups[1].open.seq",
                                                 "groups[1].open.since"}));
  EXPECT_EQ(r.status().message().rfind("groups[0].completed: ", 0), 0u) << r.status().message();

  j = Wire();
  j["groups"][0]["open"]["seq"] = 3418;  // not past completed
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups[0].open.seq"}));
  j = Wire();
  j["groups"][0]["wait_s"] = "nan";
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups[0].wait_s"}));
  j = Wire();
  j["groups"][1]["group"] = "dp";  // twice
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups[1].group"}));
  j = Wire();
  j["groups"][1]["group"] = "";
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups[1].group"}));
  j = Wire();
  j["groups"][1]["group"] = std::string(129, 'g');
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups[1].group"}));
  j = Wire();
  j["groups"][0] = 7;
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups[0]"}));
  j = Wire();
  j["phase"] = "lunch";
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"phase"}));
  j = Wire();
  j.erase("groups");
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups"}));
  j["groups"] = Json::object();
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups"}));
}

TEST(SummaryParseTest, AtMostSixteenGroups) {
  Json j = {{"rank", 0}, {"attempt", 1}, {"kind", "summary"}, {"groups", Json::array()}};
  for (size_t i = 0; i < kMaxSummaryGroups; ++i)
    j["groups"].push_back({{"group", "g" + std::to_string(i)}, {"completed", 1}});
  ASSERT_TRUE(Parse(j).ok());
  j["groups"].push_back({{"group", "one-more"}, {"completed", 1}});
  EXPECT_EQ(Fields(Parse(j)), std::vector<std::string>({"groups"}));
}

// A summary's members may leave the sender out: that is a refusal counted by the monitor
// (group_membership), not a malformed report.
TEST(SummaryParseTest, MembersWithoutTheSenderParse) {
  Json j = Wire();
  j["groups"][1]["members"] = Json::array({1, 9});
  auto r = Parse(j);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->groups[1].members, std::vector<int>({1, 9}));
}

// --- ingestion ----------------------------------------------------------------------------------------

struct G {
  const char* group;
  int64_t completed;
  std::optional<int64_t> open = {};  // seq of the open collective
  std::optional<Time> since = {};    // its entry time (default: the report's time)
  std::vector<int> members = {};
  int64_t count = 0;
};

Report Summary(int rank, Time t, int64_t step, std::vector<G> groups, Phase phase = Phase::kTrain) {
  Report r = Heartbeat(rank, t, step);
  r.kind = ReportKind::kSummary;
  r.phase = phase;
  for (const G& g : groups) {
    GroupSummary s;
    s.group = g.group;
    s.group_kind = GroupKindFromName(g.group);
    s.completed = g.completed;
    s.count = g.count;
    s.members = g.members;
    if (g.open) {
      CollectiveInfo c;
      c.seq = *g.open;
      c.op = "all_reduce";
      c.group = g.group;
      c.group_kind = s.group_kind;
      c.since = g.since.value_or(t);
      s.open = c;
    }
    r.groups.push_back(std::move(s));
  }
  return r;
}

TEST(SummaryIngestTest, SummariesAloneKeepRanksAliveAndStepping) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 4, clock.Now()));
  int64_t seq = 0, step = 0;
  auto train = [&](Time now) {  // every interval: 20 dp collectives completed, one more step
    seq += 20;
    ++step;
    for (int r = 0; r < 4; ++r) m->Ingest(Summary(r, now, step, {{"dp", seq - 1, {}, {}, {}, 20}}), now);
  };
  auto findings = RunTicks(*m, clock, 600, train);
  EXPECT_TRUE(findings.empty()) << ToString(findings[0].kind) << ": " << findings[0].detail;
  EXPECT_EQ(m->JobStep(), step);
  EXPECT_EQ(m->HealthJson(clock.Now())["status"], "healthy");

  // One rank goes silent: lost, as with heartbeats.
  auto three = [&](Time now) {
    seq += 20;
    for (int r = 0; r < 3; ++r) m->Ingest(Summary(r, now, step, {{"dp", seq - 1}}), now);
  };
  auto lost = OfKind(RunTicks(*m, clock, 30, three), FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({3}));
}

TEST(SummaryIngestTest, ACompletedSeqGoingBackwardsIsIgnoredWithoutAStateChange) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  const Time t0 = clock.Now();
  IngestResult ok = m->Ingest(Summary(0, t0, 5, {{"dp", 40, 41}}), t0);
  EXPECT_FALSE(ok.ignored);
  EXPECT_FALSE(ok.ignored_reason.has_value());
  clock.AdvanceSeconds(1);
  // Seq 39 < 40: refused whole (its step too), counted, and the open collective stays as it was.
  IngestResult back = m->Ingest(Summary(0, clock.Now(), 9, {{"dp", 39}}), clock.Now());
  EXPECT_TRUE(back.ignored);
  ASSERT_TRUE(back.ignored_reason.has_value());
  EXPECT_EQ(*back.ignored_reason, IgnoredReason::kSeqBackwards);
  EXPECT_STREQ(ToString(*back.ignored_reason), "seq_backwards");
  EXPECT_EQ(m->RankStep(0), 5);
  EXPECT_EQ(m->ignored_reports(), 1u);
  // Equal is not backwards (a rank still inside the same collective).
  EXPECT_FALSE(m->Ingest(Summary(0, clock.Now(), 6, {{"dp", 40, 41}}), clock.Now()).ignored);
  // Another attempt starts its seqs over: a new monitor, nothing to compare with.
}

TEST(SummaryIngestTest, RefusedSummariesNeverProduceAFinding) {
  // Rank 1 sends only summaries going backwards (a client that restarted its counters): their content is
  // not used, but they prove the rank alive, so it is not lost; and no hang comes from their content.
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  m->Ingest(Summary(1, clock.Now(), 5, {{"dp", 100}}), clock.Now());
  int64_t seq = 0;
  auto beat = [&](Time now) {
    seq += 10;
    m->Ingest(Summary(0, now, 5, {{"dp", seq}}), now);
    IngestResult r = m->Ingest(Summary(1, now, 5, {{"dp", 1, 2, now - Seconds(500)}}), now);
    EXPECT_EQ(r.ignored_reason, IgnoredReason::kSeqBackwards);
  };
  auto findings = RunTicks(*m, clock, 120, beat);
  for (const Finding& f : findings) ADD_FAILURE() << "unexpected finding: " << f.detail;
  EXPECT_EQ(m->ignored_reports(), 24u);  // 120 s in 5 s ticks
}

TEST(SummaryIngestTest, ARankWhoseRefusedSummariesStopIsLostAfterTheTimeout) {
  // Refused summaries keep a rank alive only while they come: once rank 1 sends nothing, it is lost.
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  m->Ingest(Summary(1, clock.Now(), 5, {{"dp", 100}}), clock.Now());
  int ticks = 0;
  auto beat = [&](Time now) {
    m->Ingest(Summary(0, now, 5, {{"dp", 10 * ++ticks}}), now);
    if (ticks <= 6) m->Ingest(Summary(1, now, 5, {{"dp", 1}}), now);  // the first 30 s of 120, 5 s ticks
  };
  auto findings = RunTicks(*m, clock, 120, beat);
  auto lost = OfKind(findings, FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({1}));
}

TEST(SummaryIngestTest, NamedGroupMembershipChangesAndForeignClaimsAreIgnored) {
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 4, clock.Now()));
  const Time t = clock.Now();
  EXPECT_FALSE(m->Ingest(Summary(0, t, 1, {{"ep", 3, {}, {}, {0, 2}}}), t).ignored);
  // Rank 0's "ep" is {0, 2}: other members now.
  IngestResult changed = m->Ingest(Summary(0, t, 1, {{"ep", 4, {}, {}, {0, 1}}}), t);
  EXPECT_EQ(changed.ignored_reason, IgnoredReason::kGroupMembership);
  // Rank 1 claims a group that leaves it out.
  IngestResult foreign = m->Ingest(Summary(1, t, 1, {{"ep", 4, {}, {}, {0, 2}}}), t);
  EXPECT_EQ(foreign.ignored_reason, IgnoredReason::kGroupMembership);
  // Rank 3 claims rank 2, already in rank 0's "ep", for another group of that name.
  IngestResult overlap = m->Ingest(Summary(3, t, 1, {{"ep", 4, {}, {}, {2, 3}}}), t);
  EXPECT_EQ(overlap.ignored_reason, IgnoredReason::kGroupMembership);
  // Members beyond the world.
  IngestResult outside = m->Ingest(Summary(3, t, 1, {{"ep", 4, {}, {}, {3, 9}}}), t);
  EXPECT_EQ(outside.ignored_reason, IgnoredReason::kGroupMembership);
  // The same members again, and a member of the group without them: fine.
  EXPECT_FALSE(m->Ingest(Summary(0, t, 1, {{"ep", 4, {}, {}, {0, 2}}}), t).ignored);
  EXPECT_FALSE(m->Ingest(Summary(2, t, 1, {{"ep", 4}}), t).ignored);
  // A named group's completed going backwards.
  IngestResult back = m->Ingest(Summary(0, t, 1, {{"ep", 2}}), t);
  EXPECT_EQ(back.ignored_reason, IgnoredReason::kSeqBackwards);
  // Members sent with a tp/pp/dp/cp/world group are not used (placement says who is in it).
  EXPECT_FALSE(m->Ingest(Summary(1, t, 1, {{"dp", 4, {}, {}, {0, 2}}}), t).ignored);
}

// --- the hang watchdog from summaries only -----------------------------------------------------------

TEST(SummaryHangTest, TheRankAliveOutsideCollectivesIsTheCulprit) {
  // TP=2, DP=4 (rank = tp + 2·dp), two GPUs per node: rank 6 lives on n3. Everyone completed tp#1, dp#1.
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 4, clock.Now(), 2));
  const Time since = clock.Now();
  auto state = [&](Time now) {
    for (int r : {0, 1, 2, 3, 4, 5})
      m->Ingest(Summary(r, now, 5, {{"tp", 1}, {"dp", 1, 2, since}}), now);  // wait for 6 and 7
    m->Ingest(Summary(7, now, 5, {{"tp", 1, 2, since}, {"dp", 1}}), now);  // waits for 6 in tp
    m->Ingest(Summary(6, now, 5, {{"tp", 1}, {"dp", 1}}), now);           // alive, inside nothing
  };
  state(since);
  EXPECT_TRUE(OfKind(RunTicks(*m, clock, 55, state), FindingKind::kHang).empty());
  auto hangs = OfKind(RunTicks(*m, clock, 10, state), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({6}));
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n3"}));
  EXPECT_NE(hangs[0].detail.find("rank 6 (heartbeating but inside no collective"), std::string::npos)
      << hangs[0].detail;
  EXPECT_TRUE(hangs[0].silent_ranks.empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["hang"]["waiting_ranks"], 7);
}

TEST(SummaryHangTest, EveryMemberInsideTheCollectiveIsACommunicationFault) {
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 1, clock.Now(), 1));  // ranks 0,1 on n0,n1
  const Time since = clock.Now();
  auto stuck = [&](Time now) {
    for (int r : {0, 1}) m->Ingest(Summary(r, now, 7, {{"tp", 2, 3, since}}), now);
  };
  stuck(since);
  auto hangs = OfKind(RunTicks(*m, clock, 65, stuck), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_TRUE(hangs[0].ranks.empty());
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n0", "n1"}));
  EXPECT_NE(hangs[0].detail.find("communication fault"), std::string::npos) << hangs[0].detail;
  // It completes (the next summaries say tp#3 done, nothing open): cleared.
  auto done = [&](Time now) {
    for (int r : {0, 1}) m->Ingest(Summary(r, now, 8, {{"tp", 3, {}, {}, {}, 1}}), now);
  };
  EXPECT_TRUE(RunTicks(*m, clock, 10, done).empty());
  EXPECT_EQ(m->HealthJson(clock.Now())["checks"]["hang"]["status"], "ok");
}

TEST(SummaryHangTest, AStoppedMemberIsSilentAndTheCulprit) {
  // SIGSTOP-like: rank 1 entered tp#3 and stopped (no more summaries); rank 0 waits in tp#3.
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 1, clock.Now(), 1));
  const Time since = clock.Now();
  m->Ingest(Summary(1, since, 7, {{"tp", 2, 3, since}}), since);
  auto waiting = [&](Time now) { m->Ingest(Summary(0, now, 7, {{"tp", 2, 3, since}}), now); };
  waiting(since);
  auto findings = RunTicks(*m, clock, 65, waiting);
  auto lost = OfKind(findings, FindingKind::kHeartbeatLost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ranks, std::vector<int>({1}));
  auto hangs = OfKind(findings, FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({1}));
  EXPECT_EQ(hangs[0].nodes, std::vector<std::string>({"n1"}));
  EXPECT_EQ(hangs[0].silent_ranks, std::vector<int>({1}));
}

TEST(SummaryHangTest, ACollectiveOrderMismatchIsACycleNamingBoth) {
  // TP=2, DP=1: world is {0, 1}. Rank 0 waits in tp#5 (rank 1 reached tp#4 only); rank 1 waits in world#7
  // (rank 0 reached world#6 only): each waits for the other.
  FakeClock clock;
  auto m = Training(MakeContext(2, 1, 1, clock.Now(), 1));
  const Time since = clock.Now();
  auto state = [&](Time now) {
    m->Ingest(Summary(0, now, 9, {{"tp", 4, 5, since}, {"world", 6}}), now);
    m->Ingest(Summary(1, now, 9, {{"tp", 4}, {"world", 6, 7, since}}), now);
  };
  state(since);
  auto hangs = OfKind(RunTicks(*m, clock, 65, state), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({0, 1}));
  EXPECT_NE(hangs[0].detail.find("cycle"), std::string::npos) << hangs[0].detail;
}

TEST(SummaryHangTest, TheOldestOpenGroupIsTheRanksCollectiveAndNamedGroupsAreFollowed) {
  // DP=4 with a named group "ep" = {0, 2}: rank 0 waits in ep#3 (since long ago) while also inside a newer
  // dp collective; rank 2 is alive, inside nothing, and completed ep#2 only: the culprit, through "ep".
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 4, clock.Now(), 1));
  const Time old_since = clock.Now();
  auto state = [&](Time now) {
    m->Ingest(Summary(0, now, 3, {{"dp", 9, 10, now}, {"ep", 2, 3, old_since, {0, 2}}}), now);
    m->Ingest(Summary(2, now, 3, {{"dp", 9}, {"ep", 2, {}, {}, {0, 2}}}), now);
    for (int r : {1, 3}) m->Ingest(Summary(r, now, 3, {{"dp", 9, 10, now}}), now);
  };
  state(old_since);
  auto hangs = OfKind(RunTicks(*m, clock, 65, state), FindingKind::kHang);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].ranks, std::vector<int>({2}));
  EXPECT_NE(hangs[0].detail.find("ep"), std::string::npos) << hangs[0].detail;
}

TEST(SummaryHangTest, ProgressingSummariesAreNeverAHang) {
  // Collectives complete steadily (count > 0, completed rising) with no step reports at all.
  FakeClock clock;
  auto m = Training(MakeContext(1, 1, 2, clock.Now()));
  int64_t seq = 0;
  auto busy = [&](Time now) {
    seq += 3;
    for (int r : {0, 1}) m->Ingest(Summary(r, now, -1, {{"dp", seq, seq + 1, now}}), now);
  };
  auto findings = RunTicks(*m, clock, 400, busy);
  EXPECT_TRUE(findings.empty()) << ToString(findings[0].kind) << ": " << findings[0].detail;
}

}  // namespace
}  // namespace shepherd
