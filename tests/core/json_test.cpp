#include "core/json.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace shepherd {

TEST(ParseJsonText, RejectsDeepNestingBeforeBuilding) {
  std::string deep(100000, '[');
  auto r = ParseJsonText(deep, 64);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("deeper than 64"), std::string::npos);
}

TEST(ParseJsonText, AcceptsNestingAtTheLimitAndBracketsInStrings) {
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(ParseJsonText(ok, 64).ok());
  EXPECT_FALSE(ParseJsonText("[" + ok + "]", 64).ok());
  auto s = ParseJsonText(R"({"a": "[[[[[[[[[[\"[[[["})", 3);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)["a"], "[[[[[[[[[[\"[[[[");
}

TEST(ParseJsonText, MalformedIsInvalidArgument) {
  for (const char* bad : {"", "{", "{\"a\":}", "nul", "[1,]"}) {
    auto r = ParseJsonText(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
  // The parser's reason is kept: a number no double holds was "not valid JSON" and nothing more.
  auto big = ParseJsonText(R"({"gpu_memory_gib": 1e400})");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("number overflow parsing '1e400'"), std::string::npos)
      << big.status().message();
  auto long_token = ParseJsonText("[\"" + std::string(5000, 'x'));
  ASSERT_FALSE(long_token.ok());
  EXPECT_LT(long_token.status().message().size(), 300u);
}

TEST(ParseJsonText, AKeyGivenTwiceInOneObjectIsRefusedByItsPath) {
  // The last value used to win without a word.
  struct Case {
    const char* text;
    const char* path;
  };
  for (const Case& c :
       {Case{R"({"name": "a", "name": "b"})", "name"},
        Case{R"({"model": {"layers": 2, "hidden": 8, "layers": 4}})", "model.layers"},
        Case{R"({"nodes": [{"id": "n0"}, {"id": "n1", "gpus": 8, "id": "n2"}]})", "nodes[1].id"},
        Case{R"([[1], [{"a": [2, {"b": 1, "b": 2}]}]])", "[1][0].a[1].b"}}) {
    auto r = ParseJsonText(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    ASSERT_EQ(r.status().fields().size(), 1u) << c.text;
    EXPECT_EQ(r.status().fields()[0].field, c.path) << c.text;
  }
  // The same key in sibling or nested objects is not a repeat.
  EXPECT_TRUE(ParseJsonText(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "c": {"x": {"a": 3}}})").ok());
}

std::string FlatObject(std::size_t keys, const std::string& last = "") {
  std::string text = "{";
  for (std::size_t i = 0; i < keys; ++i) text += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  text += last.empty() ? "\"end\":0}" : last + "}";
  return text;
}

TEST(ParseJsonText, AFlatObjectOfManyKeysParsesInLinearTime) {
  // 200,000 distinct keys (3 MB): the repeated-key check used to compare each key with every earlier one.
  JsonLimits limits;
  limits.max_members = 1 << 20;
  const std::string text = FlatObject(200000);
  const auto start = std::chrono::steady_clock::now();
  auto r = ParseJsonText(text, limits);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 200001u);
  EXPECT_LT(took, 5.0);  // about 0.3 s unoptimised on a loaded machine; the quadratic scan took minutes
  // A repeat at the very end is still found, by its path.
  auto dup = ParseJsonText(FlatObject(200000, "\"k7\":1"), limits);
  ASSERT_FALSE(dup.ok());
  ASSERT_EQ(dup.status().fields().size(), 1u);
  EXPECT_EQ(dup.status().fields()[0].field, "k7");
}

TEST(ParseJsonText, RepeatsAreFoundAtEveryDepthAndTheFirstInTheTextIsNamed) {
  std::string text = "{\"a\":", tail = "}";
  for (int depth = 0; depth < 20; ++depth) {  // 41 levels of nesting
    text += "[{\"x\":1,\"y\":2,\"x\":3,\"z\":";
    tail = "}]" + tail;
  }
  text += "0" + tail;
  auto r = ParseJsonText(text);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.status().fields().size(), 1u);
  EXPECT_EQ(r.status().fields()[0].field, "a[0].x");  // the outermost repeat comes first in the text
  // An inner repeat written before an outer one is the one named, though the inner object closes first.
  auto inner = ParseJsonText(R"({"b": 1, "c": {"d": 1, "d": 2}, "b": 2})");
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status().fields()[0].field, "c.d");
  auto outer = ParseJsonText(R"({"b": 1, "b": 2, "c": {"d": 1, "d": 2}})");
  ASSERT_FALSE(outer.ok());
  EXPECT_EQ(outer.status().fields()[0].field, "b");
}

TEST(ParseJsonText, LimitsOfMembersElementsAndValuesNameWhatIsOver) {
  JsonLimits limits;
  limits.max_members = 3;
  limits.max_elements = 4;
  limits.max_values = 20;
  EXPECT_TRUE(ParseJsonText(R"({"a": [1, 2, 3, 4], "b": {"x": 1, "y": 2, "z": 3}, "c": []})", limits).ok());
  struct Case {
    std::string text;
    std::string path;
    std::string what;
  };
  for (const Case& c : {
           Case{R"({"a": 1, "b": 2, "c": 3, "d": 4})", "$", "has more than 3 members"},
           Case{R"({"a": [0, {"p": 1, "q": 2, "r": 3, "s": 4}]})", "a[1]", "has more than 3 members"},
           Case{R"({"a": [[1], [1, 2, 3, 4, 5]]})", "a[1]", "has more than 4 elements"},
           Case{R"([1, 2, 3, 4, 5])", "$", "has more than 4 elements"},
           Case{R"([[[1, 2, 3, 4], [1, 2, 3, 4]], [[1, 2, 3, 4], [1, 2, 3, 4]], [[1, 2, 3, 4], [1, 2]]])",
                "$", "has more than 20 values in all"},
       }) {
    auto r = ParseJsonText(c.text, limits);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.text;
    ASSERT_EQ(r.status().fields().size(), 1u) << c.text;
    EXPECT_EQ(r.status().fields()[0].field, c.path) << c.text;
    EXPECT_EQ(r.status().fields()[0].message, c.what) << c.text;
    EXPECT_NE(r.status().message().find(c.what), std::string::npos) << r.status().message();
  }
  // Brackets, commas and colons inside strings are not structure.
  EXPECT_TRUE(ParseJsonText(R"(["a,b,c,d,e,f", "[1,2,3,4,5]", "{\"k\":1,\"k\":2}"])", limits).ok());
}

TEST(ParseJsonText, DefaultLimitsFitTheLargestLegitimateBodies) {
  // A heartbeat of an 8-GPU node with every dump an agent may attach, and a batch of 4,096 reports.
  std::string hb = R"({"processes": [)";
  for (int r = 0; r < 8; ++r) {
    hb += std::string(r ? "," : "") + R"({"job": "job-000001", "attempt": 3, "rank": )" + std::to_string(r) +
          R"(, "state": "running", "pid": 100, "flight_recorder": [)";
    for (int d = 0; d < 64; ++d)
      hb += std::string(d ? "," : "") + R"({"path": "/d/)" + std::to_string(d) + R"(", "size": 1})";
    hb += "]}";
  }
  hb += R"(], "gpu_faults": []})";
  EXPECT_TRUE(ParseJsonText(hb).ok());
  std::string batch = R"({"reports": [)";
  for (int i = 0; i < 4096; ++i)
    batch +=
        std::string(i ? "," : "") +
        R"({"rank": 1, "attempt": 1, "kind": "collective", "time": 1.5, "collective": {"seq": 9, "op": "all_reduce", "group": "g-1", "state": "started"}, "members": [0, 1, 2, 3, 4, 5, 6, 7]})";
  batch += "]}";
  EXPECT_TRUE(ParseJsonText(batch).ok());
}

TEST(Node, DefaultsAndTopology) {
  auto n =
      ParseNode(Json::parse(R"({"id":"node-1","topology":{"spine":"s0","leaf":"l1"}})"), {"spine", "leaf"});
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->hostname, "node-1");
  EXPECT_EQ(n->gpus, 8);
  EXPECT_EQ(n->nvlink_domain, "node-1");
  EXPECT_EQ(n->topology.at("leaf"), "l1");
  EXPECT_TRUE(n->schedulable);
  EXPECT_FALSE(n->spare);
}

TEST(Node, EveryInvalidFieldIsNamed) {
  auto n =
      ParseNode(Json::parse(R"({"id":"bad id!","gpus":0,"spare":"yes","topology":{"spine":"s0","rack":"r"},
                                     "colour":"red"})"),
                {"spine", "leaf"});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Code::kInvalidContent);
  std::set<std::string> fields;
  for (const auto& f : n.status().fields()) fields.insert(f.field);
  EXPECT_EQ(fields,
            (std::set<std::string>{"id", "gpus", "spare", "topology.leaf", "topology.rack", "colour"}));
}

// Placement keeps a node's GPUs in a 64-bit mask: 65 was a 400 from deep inside the inventory before.
TEST(Node, AtMost64GpusNamedAsTheField) {
  const auto topo = std::vector<std::string>{"spine", "leaf"};
  EXPECT_TRUE(
      ParseNode(Json::parse(R"({"id":"n","gpus":64,"topology":{"spine":"s","leaf":"l"}})"), topo).ok());
  auto n = ParseNode(Json::parse(R"({"id":"n","gpus":65,"topology":{"spine":"s","leaf":"l"}})"), topo);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Code::kInvalidContent);
  ASSERT_EQ(n.status().fields().size(), 1u);
  EXPECT_EQ(n.status().fields()[0].field, "gpus");
}

TEST(Codecs, JobRoundTrip) {
  Job job;
  job.id = "job-000007";
  job.seq = 7;
  job.spec.name = "x";
  job.spec.model = {7e9, 32, 4096, 32, 4096, 32000};
  job.spec.training.global_batch_size = 64;
  job.spec.resources.gpus = 8;
  job.spec.parallelism = {false, 2, 1, 4, 1};
  job.spec.env = {{"A", "b"}};
  job.plan = {2, 1, 4, 1, 16, 1};
  job.state = JobState::kRunning;
  job.attempt = 3;
  job.created_at = FromUnixSeconds(1700000000.5);
  auto back = JobFromJson(Json::parse(ToJson(job).dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->id, "job-000007");
  EXPECT_EQ(back->plan, job.plan);
  EXPECT_EQ(back->state, JobState::kRunning);
  EXPECT_EQ(back->attempt, 3);
  EXPECT_EQ(back->spec.env.at("A"), "b");
  EXPECT_EQ(back->spec.parallelism.dp, 4);
  EXPECT_EQ(back->created_at, job.created_at);
}

TEST(Codecs, AttemptPlacementIsCompactAndRoundTrips) {
  Attempt a;
  a.job = "job-1";
  a.number = 2;
  a.placement.ranks = {{0, "n1", 0, 0, 0, 0}, {1, "n1", 1, 1, 0, 0}, {2, "n2", 0, 0, 0, 1}};
  Json j = ToJson(a);
  EXPECT_EQ(j["placement"]["nodes"], Json::parse(R"(["n1","n2"])"));
  auto back = AttemptFromJson(j);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->placement.ranks.size(), 3u);
  EXPECT_EQ(back->placement.ranks[2].node, "n2");
  EXPECT_EQ(back->placement.ranks[1].gpu, 1);
}

TEST(Codecs, FindingEvidenceRoundTrips) {
  Finding f;
  f.id = "f-000003";
  f.job = "job-000001";
  f.attempt = 2;
  f.kind = FindingKind::kProcessExit;
  f.ranks = {1};
  f.nodes = {"n0"};
  f.signal = 9;
  f.oom_kill = false;
  Result<Finding> back = FindingFromJson(ToJson(f));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->signal, 9);
  EXPECT_EQ(back->oom_kill, false);  // judged: not an OOM kill (absent would mean "not known")
  EXPECT_FALSE(ToJson(Finding{}).contains("oom_kill"));

  f.kind = FindingKind::kHang;
  f.signal.reset(), f.oom_kill.reset();
  f.ranks = {1, 4};
  f.silent_ranks = {4};
  back = FindingFromJson(ToJson(f));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->silent_ranks, std::vector<int>({4}));
  EXPECT_FALSE(back->oom_kill);
  EXPECT_FALSE(back->straggler);

  f.kind = FindingKind::kStraggler;
  f.ranks = {3};
  f.nodes = {"n1"};
  f.straggler = StragglerEvidence{.group = "dp", .lateness_s = 0.15, .share_held_up = 0.97, .windows = 20};
  const Json j = ToJson(f);
  EXPECT_EQ(j["straggler"]["rank"], 3);
  EXPECT_EQ(j["straggler"]["node"], "n1");
  EXPECT_EQ(j["straggler"]["group"], "dp");
  back = FindingFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->straggler, f.straggler);
}

TEST(Codecs, CorruptRecordIsAnError) {
  auto r = JobFromJson(Json::parse(R"({"id": 5})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

}  // namespace shepherd
