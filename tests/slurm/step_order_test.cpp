// Launch orders (slurm/step_order.h): step names, the wrapper's question from its environment, and how it
// reads the leader's answer.
#include "slurm/step_order.h"

#include <gtest/gtest.h>

namespace shepherd::slurm {
namespace {

TEST(StepOrder, StepNamesCarryTheOrderAndEveryOrderOfAnAttemptIsItsStep) {
  EXPECT_EQ(StepName(3, 0), "shepherd-a3");
  EXPECT_EQ(StepName(3, 12), "shepherd-a3-o12");
  EXPECT_TRUE(IsStepOfAttempt("shepherd-a3", 3));
  EXPECT_TRUE(IsStepOfAttempt("shepherd-a3-o1", 3));
  EXPECT_TRUE(IsStepOfAttempt("shepherd-a3-o12", 3));
  EXPECT_FALSE(IsStepOfAttempt("shepherd-a31", 3));
  EXPECT_FALSE(IsStepOfAttempt("shepherd-a31-o1", 3));
  EXPECT_FALSE(IsStepOfAttempt("shepherd-a3-o", 3));
  EXPECT_FALSE(IsStepOfAttempt("shepherd-a3-ox", 3));
  EXPECT_FALSE(IsStepOfAttempt("shepherd-a3b", 3));
  EXPECT_FALSE(IsStepOfAttempt("shepherd-a2-o3", 3));
  EXPECT_FALSE(IsStepOfAttempt("batch", 3));
}

EnvMap Env() {
  return {{"SHEPHERD_SLURM_ORDER", "7"},
          {"SHEPHERD_JOB", "job-000001"},
          {"SHEPHERD_ATTEMPT", "2"},
          {"SLURM_JOB_ID", "41"},
          {"SHEPHERD_URL", "http://a:1,http://b:2"},
          {"SHEPHERD_TOKEN", "tok"}};
}

TEST(StepOrder, TheQuestionComesFromTheTasksEnvironment) {
  auto q = OrderQuestionFrom(Env());
  ASSERT_TRUE(q.ok()) << q.status().message();
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->order, 7);
  EXPECT_EQ((*q)->attempt, 2);
  EXPECT_EQ((*q)->job, "job-000001");
  EXPECT_EQ((*q)->allocation, "41");
  EXPECT_EQ((*q)->url, "http://a:1,http://b:2");
  EXPECT_EQ((*q)->token, "tok");
  EXPECT_EQ((*q)->timeout_s, 60);
  EXPECT_EQ(OrderRequestBody(**q), R"({"allocation":"41","attempt":2,"order":7})");

  EnvMap older = Env();
  older.erase("SHEPHERD_SLURM_ORDER");  // a step of an older daemon: no question, the command runs
  auto none = OrderQuestionFrom(older);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(StepOrder, AMalformedEnvironmentNamesTheVariable) {
  const std::vector<std::pair<std::string, std::string>> bad = {{"SHEPHERD_SLURM_ORDER", "0"},
                                                                {"SHEPHERD_SLURM_ORDER", "7x"},
                                                                {"SHEPHERD_ATTEMPT", ""},
                                                                {"SHEPHERD_ATTEMPT", "-1"},
                                                                {"SHEPHERD_JOB", ""},
                                                                {"SLURM_JOB_ID", ""},
                                                                {"SHEPHERD_URL", ""},
                                                                {"SHEPHERD_SLURM_ORDER_TIMEOUT_S", "0"},
                                                                {"SHEPHERD_SLURM_ORDER_TIMEOUT_S", "nan"}};
  for (const auto& [k, v] : bad) {
    EnvMap env = Env();
    env[k] = v;
    auto q = OrderQuestionFrom(env);
    ASSERT_FALSE(q.ok()) << k << "=" << v;
    EXPECT_NE(q.status().message().find(k), std::string::npos) << q.status().message();
  }
}

TEST(StepOrder, OnlyTheLeadersTrueRunsTheCommand) {
  EXPECT_EQ(ReadOrderAnswer(200, R"({"current": true})"), OrderVerdict::kCurrent);
  EXPECT_EQ(ReadOrderAnswer(200, R"({"current": false})"), OrderVerdict::kStale);
  EXPECT_EQ(ReadOrderAnswer(200, R"({"current": "yes"})"), OrderVerdict::kRetry);
  EXPECT_EQ(ReadOrderAnswer(200, "<html>"), OrderVerdict::kRetry);
  EXPECT_EQ(ReadOrderAnswer(503, ""), OrderVerdict::kRetry);  // no leader known, or a deposed one
  EXPECT_EQ(ReadOrderAnswer(500, ""), OrderVerdict::kRetry);
  EXPECT_EQ(ReadOrderAnswer(429, ""), OrderVerdict::kRetry);
  EXPECT_EQ(ReadOrderAnswer(401, ""), OrderVerdict::kRefused);
  EXPECT_EQ(ReadOrderAnswer(403, ""), OrderVerdict::kRefused);
  EXPECT_EQ(ReadOrderAnswer(404, ""), OrderVerdict::kRefused);
  EXPECT_EQ(ReadOrderAnswer(422, ""), OrderVerdict::kRefused);
}

}  // namespace
}  // namespace shepherd::slurm
