// The agent heartbeat read straight from its text (core/json_lite.h; the route's text step,
// Router::PrepareText, run before any tree is built): a valid heartbeat is taken without a tree, and an invalid one gets the very answer the tree path
// gives (same status, same problem body naming the same field). Every other agent and relay test runs its
// heartbeats through the text path too (tests/api/api_harness.h).
#include <gtest/gtest.h>

#include <string>

#include "tests/api/api_harness.h"

namespace shepherd::testing {
namespace {

struct Answer {
  bool prepared = false;
  std::optional<HttpResponse> refused;
};

class HeartbeatTextTest : public ::testing::Test {
 protected:
  HttpRequest Request(const std::string& body) {
    HttpRequest req;
    req.method = "POST";
    req.target = "/v1/nodes/n0/heartbeat";
    req.body = body;
    req.headers.emplace_back("Content-Type", "application/json");
    return req;
  }
  // The route's text step (Router::PrepareText) on the body as it arrived.
  Answer FromText(const std::string& body) {
    HttpRequest req = Request(body);
    Answer a;
    a.refused = api_.router_.PrepareText(req);
    a.prepared = req.prepared != nullptr;
    return a;
  }
  // The same step on the tree of the body (the path every body took before the text reader).
  Answer FromTree(const std::string& body) {
    HttpRequest req = Request(body);
    Result<Json> tree = ParseJsonText(body);
    EXPECT_TRUE(tree.ok()) << body;
    req.json = std::make_shared<const Json>(std::move(tree).value());
    Answer a;
    a.refused = api_.router_.Prepare(req);
    a.prepared = req.prepared != nullptr;
    return a;
  }
  ApiHarness api_;
};

const std::string kProcess = R"({"job":"job-000001","attempt":1,"rank":3,"pid":40,"state":"running"})";
const std::string kSummary =
    R"({"rank":3,"attempt":1,"time":1796040000.125,"kind":"summary","step":12,"phase":"train",)"
    R"("groups":[{"group":"tp","completed":40,"count":1,"wait_s":0.01},{"group":"dp","completed":40}]})";
const std::string kEntry = R"({"job":"job-000001","attempt":1,"rank":3,"reports":[)" + kSummary + "]}";

TEST_F(HeartbeatTextTest, AValidHeartbeatIsTakenFromItsText) {
  const std::string body = R"({"agent":{"pid":1},"gpu_faults":[],"processes":[)" + kProcess +
                           R"(],"reports":[)" + kEntry + R"(],"health_check":{"seq":2,"ok":true,"output":"ok"}})";
  Answer text = FromText(body);
  EXPECT_FALSE(text.refused.has_value());
  EXPECT_TRUE(text.prepared);
  // A report that is itself malformed is rejected in its entry, not the heartbeat: taken as well.
  Answer bad_report = FromText(R"({"processes":[],"reports":[{"job":"job-000001","attempt":1,"rank":3,)"
                               R"("reports":[{"rank":3,"attempt":1,"kind":"nope"}]}]})");
  EXPECT_FALSE(bad_report.refused.has_value());
  EXPECT_TRUE(bad_report.prepared);
}

TEST_F(HeartbeatTextTest, AnInvalidHeartbeatGetsTheTreesAnswerNamingTheField) {
  struct Case {
    std::string body;
    std::string field;  // the field the answer must name
  };
  const std::vector<Case> cases = {
      {R"({"processes":[)" + kProcess + R"(,{"job":"job-000001","attempt":-1,"rank":3}]})",
       "processes[1].attempt"},
      {R"({"processes":[{"job":"job-000001","attempt":1,"rank":3,"state":"zombie"}]})", "processes[0].state"},
      {R"({"processes":[{"attempt":1,"rank":3}]})", "processes[0].job"},
      {R"({"processes":[{"job":"bad job","attempt":1,"rank":3}]})", "processes[0].job"},
      {R"({"processes":[{"job":"j","attempt":1,"rank":3,"pid":"x"}]})", "processes[0].pid"},
      {R"({"processes":[{"job":"j","attempt":1,"rank":3,"signal":200}]})", "processes[0].signal"},
      {R"({"processes":[{"job":"j","attempt":1,"rank":3,"fenced":null}]})", "processes[0].fenced"},
      {R"({"processes":[7]})", "processes[0]"},
      {R"({"processes":{}})", "processes"},
      {R"({"gpu_faults":[{"kind":"xid"}]})", "gpu_faults[0].gpu"},
      {R"({"health_check":{"seq":1,"ok":"yes"}})", "health_check.ok"},
      {R"({"reports":{}})", "reports"},
      {R"({"reports":[)" + kEntry + R"(,{"job":"job-000001","attempt":1,"reports":[]}]})", "reports[1].rank"},
      {R"({"reports":[{"job":"job-000001","attempt":1,"rank":3,"reports":7}]})", "reports[0].reports"},
      {R"({"reports":[{"job":"-x","attempt":1,"rank":3,"reports":[]}]})", "reports[0].job"},
      {"[]", "$"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    Answer text = FromText(c.body);
    Answer tree = FromTree(c.body);
    ASSERT_TRUE(tree.refused.has_value());
    ASSERT_TRUE(text.refused.has_value()) << "the text path took what the tree path refuses";
    EXPECT_FALSE(text.prepared);
    EXPECT_EQ(text.refused->status, tree.refused->status);
    EXPECT_EQ(text.refused->status, 422);
    EXPECT_EQ(text.refused->body, tree.refused->body);
    EXPECT_NE(text.refused->body.find("\"" + c.field + "\""), std::string::npos) << text.refused->body;
  }
}

// Bodies outside the text reader's subset (escapes, repeated keys, not JSON) are not answered from the
// text: the tree decides them, as before.
TEST_F(HeartbeatTextTest, BodiesOutsideTheSubsetAreLeftToTheTree) {
  for (const std::string& body : {std::string(R"({"processes":[],"processes":[]})"),
                                  std::string(R"({"processes":[{"job":"j","attempt":1,"rank":3,"error":"a\nb"}]})"),
                                  std::string(R"({"processes":[)")}) {
    SCOPED_TRACE(body);
    Answer text = FromText(body);
    EXPECT_FALSE(text.refused.has_value());
    EXPECT_FALSE(text.prepared);
  }
}

}  // namespace
}  // namespace shepherd::testing
