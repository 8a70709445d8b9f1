#include "health/report.h"

#include <gtest/gtest.h>

#include <cmath>

namespace shepherd {
namespace {

const Time kRecv = FromUnixSeconds(1'800'000'000);

Result<Report> Parse(const char* text) {
  return ParseReport(Json::parse(text), kRecv);
}

std::vector<std::string> Fields(const Result<Report>& r) {
  std::vector<std::string> out;
  for (const auto& f : r.status().fields()) out.push_back(f.field);
  return out;
}

TEST(ReportTest, ABatchHoldsAtMostAThousandReports) {
  Json body = {{"reports", Json::array()}};
  for (size_t i = 0; i < kMaxReportsPerBatch; ++i)
    body["reports"].push_back({{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}});
  Result<ReportBatch> full = ParseReportBatch(body, kRecv);
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(full->reports.size(), kMaxReportsPerBatch);
  body["reports"].push_back({{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}});
  Result<ReportBatch> over = ParseReportBatch(body, kRecv);
  ASSERT_FALSE(over.ok());
  ASSERT_EQ(over.status().fields().size(), 1u);
  EXPECT_EQ(over.status().fields()[0].field, "reports");
}

TEST(ReportTest, HeartbeatWithCollectiveAndRfc3339Time) {
  auto r = Parse(R"({"rank": 17, "attempt": 2, "time": "2027-01-15T08:00:00.500Z", "kind": "heartbeat",
                     "step": 41, "phase": "train",
                     "collective": {"seq": 9, "op": "all_reduce", "group": "dp", "since": 1800000000.25}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->rank, 17);
  EXPECT_EQ(r->attempt, 2);
  EXPECT_EQ(r->kind, ReportKind::kHeartbeat);
  EXPECT_EQ(r->time, *ParseRfc3339("2027-01-15T08:00:00.500Z"));
  EXPECT_EQ(*r->step, 41);
  EXPECT_EQ(r->phase, Phase::kTrain);
  ASSERT_TRUE(r->collective);
  EXPECT_EQ(r->collective->seq, 9);
  EXPECT_EQ(r->collective->op, "all_reduce");
  EXPECT_EQ(r->collective->group_kind, GroupKind::kDp);
  EXPECT_DOUBLE_EQ(ToUnixSeconds(*r->collective->since), 1800000000.25);
}

TEST(ReportTest, UnixSecondsTimeAndDefaultTime) {
  auto unix_time = Parse(R"({"rank": 0, "attempt": 1, "time": 1800000123.5, "kind": "heartbeat"})");
  ASSERT_TRUE(unix_time.ok());
  EXPECT_DOUBLE_EQ(ToUnixSeconds(unix_time->time), 1800000123.5);
  EXPECT_FALSE(unix_time->collective);
  auto absent = Parse(R"({"rank": 0, "attempt": 1, "kind": "heartbeat"})");
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->time, kRecv);
  EXPECT_EQ(absent->phase, Phase::kUnspecified);
}

TEST(ReportTest, StepMetricsAcceptNanAndInfinityStrings) {
  auto r = Parse(R"({"rank": 3, "attempt": 1, "kind": "step", "step": 7, "loss": "nan", "grad_norm": "inf",
                     "step_time_s": 1.25})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(std::isnan(*r->loss));
  EXPECT_TRUE(std::isinf(*r->grad_norm) && *r->grad_norm > 0);
  EXPECT_DOUBLE_EQ(*r->step_time_s, 1.25);
  auto neg = Parse(R"({"rank": 3, "attempt": 1, "kind": "step", "step": 7, "loss": "-inf", "grad_norm": 2})");
  ASSERT_TRUE(neg.ok());
  EXPECT_TRUE(std::isinf(*neg->loss) && *neg->loss < 0);
  EXPECT_DOUBLE_EQ(*neg->grad_norm, 2);
  EXPECT_FALSE(neg->lr);
  // The learning rate: a finite number >= 0.
  auto lr = Parse(R"({"rank": 3, "attempt": 1, "kind": "step", "step": 7, "loss": 2, "lr": 3e-4})");
  ASSERT_TRUE(lr.ok());
  EXPECT_DOUBLE_EQ(*lr->lr, 3e-4);
  for (const char* bad : {R"("nan")", "-1e-3", R"("0.1")", "true"}) {
    const std::string text =
        std::string(R"({"rank": 3, "attempt": 1, "kind": "step", "step": 7, "lr": )") + bad + "}";
    auto b = Parse(text.c_str());
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().fields()[0].field, "lr") << bad;
  }
}

TEST(ReportTest, CollectiveParamHashAndCheckpointKinds) {
  auto c =
      Parse(R"({"rank": 1, "attempt": 1, "kind": "collective", "seq": 4, "op": "all_gather", "group": "moe",
                     "state": "completed"})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->collective->group, "moe");
  EXPECT_EQ(c->collective->group_kind, GroupKind::kOther);
  EXPECT_EQ(c->collective_state, CollectiveState::kCompleted);
  auto h = Parse(R"({"rank": 1, "attempt": 1, "kind": "param_hash", "step": 100, "hash": "DEADbeef01"})");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->hash, "DEADbeef01");
  auto k = Parse(R"({"rank": 1, "attempt": 1, "kind": "checkpoint", "step": 500, "path": "/ckpt/500/r1"})");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->path, "/ckpt/500/r1");
}

TEST(ReportTest, ANamedGroupsMembersAreItsRanksAscendingWithTheReporterAmongThem) {
  auto c = Parse(R"({"rank": 2, "attempt": 1, "kind": "collective", "seq": 0, "group": "g-9805b47f",
                     "state": "started", "members": [0, 2, 5]})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->collective->members, (std::vector<int>{0, 2, 5}));
  for (const char* members : {"[0, 1]", "[5, 2]", "[2, 2]", "[]", "[2, -1]", "2", "[2, 1.5]"}) {
    std::string text = R"({"rank": 2, "attempt": 1, "kind": "collective", "seq": 0, "group": "g",
                           "state": "started", "members": )" +
                       std::string(members) + "}";
    EXPECT_EQ(Fields(ParseReport(Json::parse(text), kRecv)), std::vector<std::string>{"members"}) << members;
  }
}

TEST(ReportTest, FinishedWithOrWithoutItsLastStep) {
  auto f = Parse(R"({"rank": 2, "attempt": 1, "kind": "finished", "step": 1000})");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, ReportKind::kFinished);
  EXPECT_EQ(f->step, 1000);
  f = Parse(R"({"rank": 2, "attempt": 1, "kind": "finished"})");
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->step.has_value());
  EXPECT_EQ(Fields(Parse(R"({"rank": 2, "attempt": 1, "kind": "finished", "step": -1})")),
            std::vector<std::string>{"step"});
  EXPECT_EQ(Fields(Parse(R"({"rank": 2, "attempt": 1, "kind": "done"})")), std::vector<std::string>{"kind"});
}

TEST(ReportTest, CheckpointScopeReplicatedOrRank) {
  auto k = Parse(
      R"({"rank": 0, "attempt": 1, "kind": "checkpoint", "step": 5, "path": "/c/5", "scope": "replicated"})");
  ASSERT_TRUE(k.ok());
  EXPECT_TRUE(k->replicated);
  k = Parse(R"({"rank": 0, "attempt": 1, "kind": "checkpoint", "step": 5, "path": "/c/5", "scope": "rank"})");
  ASSERT_TRUE(k.ok());
  EXPECT_FALSE(k->replicated);
  k = Parse(R"({"rank": 0, "attempt": 1, "kind": "checkpoint", "step": 5, "path": "/c/5"})");
  ASSERT_TRUE(k.ok());
  EXPECT_FALSE(k->replicated);
  EXPECT_EQ(Fields(Parse(
                R"({"rank": 0, "attempt": 1, "kind": "checkpoint", "step": 5, "path": "/c", "scope": 1})")),
            std::vector<std::string>{"scope"});
  EXPECT_EQ(
      Fields(Parse(
          R"({"rank": 0, "attempt": 1, "kind": "checkpoint", "step": 5, "path": "/c", "scope": "all"})")),
      std::vector<std::string>{"scope"});
}

TEST(ReportTest, EveryInvalidFieldIsNamed) {
  auto r = Parse(R"({"rank": -1, "attempt": "one", "time": "yesterday", "kind": "step", "loss": "lots",
                     "step_time_s": -2})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidContent);
  EXPECT_EQ(Fields(r), (std::vector<std::string>{"rank", "attempt", "time", "step", "loss", "step_time_s"}));
  EXPECT_EQ(r.status().message().rfind("rank: ", 0), 0u) << r.status().message();
}

TEST(ReportTest, NestedCollectiveFieldsUseTheirPath) {
  auto r = Parse(R"({"rank": 0, "attempt": 1, "kind": "heartbeat", "phase": "sleeping",
                     "collective": {"seq": "x", "group": ""}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Fields(r), (std::vector<std::string>{"collective.seq", "collective.group", "phase"}));
}

TEST(ReportTest, KindSpecificRequirements) {
  EXPECT_EQ(Fields(Parse(R"({"rank": 0, "attempt": 1, "kind": "gossip"})")),
            std::vector<std::string>{"kind"});
  EXPECT_EQ(Fields(Parse(R"({"rank": 0, "attempt": 1, "kind": "param_hash", "step": 1, "hash": "xyz"})")),
            std::vector<std::string>{"hash"});
  EXPECT_EQ(Fields(Parse(R"({"rank": 0, "attempt": 1, "kind": "checkpoint"})")),
            (std::vector<std::string>{"step", "path"}));
  EXPECT_EQ(Fields(Parse(R"({"rank": 0, "attempt": 1, "kind": "collective", "seq": 1, "group": "tp"})")),
            std::vector<std::string>{"state"});
  EXPECT_FALSE(ParseReport(Json::array(), kRecv).ok());
}

TEST(ReportTest, PhaseEvalIsAccepted) {
  auto r = Parse(R"({"rank": 0, "attempt": 1, "kind": "heartbeat", "phase": "eval"})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->phase, Phase::kEval);
  EXPECT_STREQ(ToString(Phase::kEval), "eval");
}

TEST(ReportTest, NodeOnEveryKindIsValidated) {
  auto r = Parse(R"({"rank": 0, "attempt": 1, "kind": "step", "step": 3, "node": "gpu-node_07.cluster"})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->node, "gpu-node_07.cluster");
  r = Parse(R"({"rank": 0, "attempt": 1, "kind": "heartbeat"})");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->node.empty());
  const std::string long_ok(253, 'a'), too_long(254, 'a');
  EXPECT_TRUE(
      ParseReport(Json{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}, {"node", long_ok}}, kRecv).ok());
  for (const Json& bad :
       {Json(""), Json("."), Json(".."), Json("a b"), Json("n/1"), Json(too_long), Json(7)}) {
    auto b = ParseReport(
        Json{{"rank", 0}, {"attempt", 1}, {"kind", "checkpoint"}, {"step", 1}, {"path", "/c"}, {"node", bad}},
        kRecv);
    EXPECT_EQ(Fields(b), std::vector<std::string>{"node"}) << bad.dump();
  }
}

TEST(ReportTest, TimesOutsideTheCalendarOrTheClockAreRefused) {
  for (const Json& bad :
       {Json("2026-02-30T00:00:00Z"), Json("2026-11-26T03:20:60Z"), Json("2026-11-26T03:20:00+99:00"),
        Json("2026-11-26 03:20:00Z"), Json("9999-01-01T00:00:00Z"), Json(1e11), Json(9.3e18), Json(-1.0)}) {
    auto t = ParseReport(Json{{"rank", 0}, {"attempt", 1}, {"kind", "heartbeat"}, {"time", bad}}, kRecv);
    EXPECT_EQ(Fields(t), std::vector<std::string>{"time"}) << bad.dump();
    auto since = ParseReport(Json{{"rank", 0},
                                  {"attempt", 1},
                                  {"kind", "heartbeat"},
                                  {"collective", {{"seq", 1}, {"group", "tp"}, {"since", bad}}}},
                             kRecv);
    EXPECT_EQ(Fields(since), std::vector<std::string>{"collective.since"}) << bad.dump();
  }
  auto ok =
      Parse(R"({"rank": 0, "attempt": 1, "kind": "heartbeat", "time": "2027-01-15T13:30:00.25+05:30"})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->time, *ParseRfc3339("2027-01-15T08:00:00.250Z"));
}

TEST(ReportTest, CheckpointPathRefusesControlCharacters) {
  for (const std::string& bad :
       {std::string("/ckpt/4\0/r0", 11), std::string("/ckpt/4\n"), std::string("/ckpt/\x1b[2J"),
        std::string("/ckpt/\t4"), std::string("/ckpt/4\x7f")}) {
    auto r = ParseReport(
        Json{{"rank", 0}, {"attempt", 1}, {"kind", "checkpoint"}, {"step", 4}, {"path", bad}}, kRecv);
    EXPECT_EQ(Fields(r), std::vector<std::string>{"path"}) << Json(bad).dump();
  }
  EXPECT_TRUE(ParseReport(Json{{"rank", 0},
                               {"attempt", 1},
                               {"kind", "checkpoint"},
                               {"step", 4},
                               {"path", "/ckpt/4/r0 (copy) é"}},
                          kRecv)
                  .ok());
}

TEST(ReportTest, AnAttemptOutOfRangeIsToldTheRange) {
  auto r = Parse(R"({"rank": 0, "attempt": 4611686018427387904, "kind": "heartbeat"})");
  ASSERT_EQ(Fields(r), std::vector<std::string>{"attempt"});
  EXPECT_EQ(r.status().message(), "attempt: required: an integer from 0 to 2147483647");
  EXPECT_EQ(Fields(Parse(R"({"rank": 2147483648, "attempt": 1, "kind": "heartbeat"})")),
            std::vector<std::string>{"rank"});
}

}  // namespace
}  // namespace shepherd
