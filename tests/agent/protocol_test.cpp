#include "agent/protocol.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/node.h"

namespace shepherd::agent {
namespace {

TEST(Protocol, ParsesAssignments) {
  Json j = Json::parse(R"({"version": 7, "ranks": [{"job": "job-1", "attempt": 2, "rank": 5, "gpu": 1,
      "command": ["python3", "train.py"], "env": {"RANK": "5", "WORLD_SIZE": "8"}}]})");
  Result<Assignments> a = ParseAssignments(j);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->version, 7);
  ASSERT_EQ(a->ranks.size(), 1u);
  EXPECT_EQ(a->ranks[0].key, (RankKey{"job-1", 2, 5}));
  EXPECT_EQ(a->ranks[0].gpu, 1);
  EXPECT_EQ(a->ranks[0].command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(a->ranks[0].env.at("WORLD_SIZE"), "8");
}

TEST(Protocol, RejectsTheWholeAnswerWhenOneRankIsMalformed) {
  Json j = Json::parse(R"({"version": 1, "ranks": [
      {"job": "j", "attempt": 1, "rank": 0, "command": ["a"]},
      {"job": "j", "attempt": 1, "rank": "1", "command": [], "env": {"X": 1}}]})");
  Result<Assignments> a = ParseAssignments(j);
  ASSERT_FALSE(a.ok());
  std::vector<std::string> fields;
  for (const FieldError& f : a.status().fields()) fields.push_back(f.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"ranks[1].rank", "ranks[1].command", "ranks[1].env.X"}));
  EXPECT_FALSE(ParseAssignments(Json::parse(R"({"ranks": []})")).ok());
  EXPECT_FALSE(ParseAssignments(Json::array()).ok());
}

TEST(Protocol, HeartbeatBodyListsRunningAndExited) {
  std::vector<ProcessReport> procs = {
      {{"j", 2, 5}, 4242, true, std::nullopt, std::nullopt, "", {}},
      {{"j", 1, 5}, 4100, false, 1, std::nullopt, "", {}},
      {{"j", 1, 6}, 0, false, std::nullopt, std::nullopt, "spawn x: not found", {}},
      {{"j", 1, 7}, 4101, false, std::nullopt, 9, "", "", {}, false}};
  Json faults = Json::parse(R"([{"gpu": 3, "kind": "ecc_uncorrectable", "detail": "d"}])");
  Json b = HeartbeatBody({123, "2026-11-21T07:00:00.000Z"}, faults, procs);
  EXPECT_EQ(b["agent"]["pid"], 123);
  EXPECT_EQ(b["gpu_faults"], faults);
  EXPECT_EQ(b["processes"][0], Json::parse(R"({"job": "j", "attempt": 2, "rank": 5, "pid": 4242,
      "state": "running"})"));
  EXPECT_EQ(b["processes"][1], Json::parse(R"({"job": "j", "attempt": 1, "rank": 5, "pid": 4100,
      "state": "exited", "exit_code": 1, "signal": null})"));
  EXPECT_EQ(b["processes"][2]["error"], "spawn x: not found");
  EXPECT_EQ(b["processes"][3], Json::parse(R"({"job": "j", "attempt": 1, "rank": 7, "pid": 4101,
      "state": "exited", "exit_code": null, "signal": 9, "oom_kill": false})"));
  EXPECT_EQ(HeartbeatBody({1, ""}, Json::object(), {})["gpu_faults"], Json::array());
}

// The daemon refuses a heartbeat beyond its bounds (422), which would leave the node's ranks unrenewed: the
// agent lists its running ranks first and sends at most kMaxHeartbeatProcesses entries of at most
// kMaxHeartbeatDumps dumps.
TEST(Protocol, HeartbeatBodyStaysWithinTheDaemonsBounds) {
  std::vector<ProcessReport> procs;
  std::vector<DumpFile> dumps;
  for (int d = 0; d < 20; ++d) dumps.push_back({"/fr/nccl_trace_rank_0." + std::to_string(d), 1});
  for (int r = 0; r < 300; ++r) {
    ProcessReport p{{"j", 1, r}, 100 + r, r >= 290, 1, std::nullopt, "", {}};
    p.flight_recorder = dumps;
    procs.push_back(std::move(p));
  }
  Json b = HeartbeatBody({1, ""}, Json::array(), procs);
  ASSERT_EQ(b["processes"].size(), kMaxHeartbeatProcesses);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(b["processes"][i]["state"], "running") << i;
    EXPECT_EQ(b["processes"][i]["rank"], 290 + static_cast<int>(i));
  }
  for (const Json& e : b["processes"]) ASSERT_EQ(e["flight_recorder"].size(), kMaxHeartbeatDumps);
  EXPECT_EQ(b["processes"][0]["flight_recorder"][0]["path"], "/fr/nccl_trace_rank_0.0");
}

TEST(Protocol, ParsesHeartbeatAnswer) {
  Result<HeartbeatAnswer> a = ParseHeartbeatAnswer(
      Json::parse(R"({"ack_exits": [{"job": "j", "attempt": 1, "rank": 5}], "assignments_version": 9})"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ack_exits, (std::vector<RankKey>{{"j", 1, 5}}));
  EXPECT_EQ(a->assignments_version, 9);
  EXPECT_TRUE(ParseHeartbeatAnswer(Json::object()).ok());
  EXPECT_FALSE(ParseHeartbeatAnswer(Json::parse(R"({"ack_exits": [{"job": "j"}]})")).ok());
}

TEST(Protocol, RegisterBodyOmitsUnsetFields) {
  NodeRegistration n{"node-1", "host",       8,           {{"leaf", "l0"}, {"spine", "s0"}},
                     false,    std::nullopt, std::nullopt};
  Json j = RegisterBody(n);
  EXPECT_EQ(j, Json::parse(R"({"id": "node-1", "hostname": "host", "gpus": 8,
      "topology": {"leaf": "l0", "spine": "s0"}})"));
  n.spare = true;
  n.gpu_memory_gib = 141;
  n.gpu_model = "H200";
  j = RegisterBody(n);
  EXPECT_EQ(j["spare"], true);
  EXPECT_EQ(j["gpu_memory_gib"], 141.0);
  EXPECT_EQ(j["gpu_model"], "H200");
}

TEST(Protocol, ParsesTopologyFlag) {
  auto t = ParseTopologyFlag("spine=s0,leaf=l03,nvlink_domain=r7");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t,
            (std::map<std::string, std::string>{{"spine", "s0"}, {"leaf", "l03"}, {"nvlink_domain", "r7"}}));
  EXPECT_TRUE(ParseTopologyFlag("")->empty());
  EXPECT_FALSE(ParseTopologyFlag("spine").ok());
  EXPECT_FALSE(ParseTopologyFlag("spine=").ok());
  EXPECT_FALSE(ParseTopologyFlag("=s0").ok());
  EXPECT_FALSE(ParseTopologyFlag("a=1,a=2").ok());
}

TEST(Protocol, ReadsGpuFaultFile) {
  auto dir = std::filesystem::temp_directory_path() / ("agent-faults-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "gpu_faults.json").string();
  EXPECT_EQ(ReadGpuFaults(path, 8), Json::array());
  std::ofstream(path) << R"([{"gpu": 3, "kind": "xid", "detail": "79"}])";
  EXPECT_EQ(ReadGpuFaults(path, 8), Json::parse(R"([{"gpu": 3, "kind": "xid", "detail": "79"}])"));
  std::ofstream(path) << R"({"gpu_faults": [{"gpu": 1, "kind": "ecc_uncorrectable"}]})";
  EXPECT_EQ(ReadGpuFaults(path, 8)[0]["gpu"], 1);
  std::ofstream(path) << "{not json";
  EXPECT_EQ(ReadGpuFaults(path, 8), Json::array());
  // A probe's slips are made what the daemon takes, never sent to get the heartbeat refused: entries
  // without a GPU of this node are dropped, an unprintable kind is "fault", a detail loses its controls.
  std::ofstream(path) << R"([{"gpu": 8}, {"gpu": -1}, {"kind": "xid"}, {"gpu": "2"}, "x",
                            {"gpu": 2, "kind": "", "detail": "row\nremap"}, {"gpu": 7, "kind": 79}])";
  EXPECT_EQ(ReadGpuFaults(path, 8), Json::parse(R"([{"gpu": 2, "kind": "fault", "detail": "row remap"},
                                                    {"gpu": 7, "kind": "fault"}])"));
  // A long detail is cut at 1024 bytes, never inside a UTF-8 character (the heartbeat is sent as JSON).
  std::string detail = std::string(1023, 'x') + "\u00e9";  // é: two bytes at 1023-1024
  std::ofstream(path) << Json::array({{{"gpu", 1}, {"detail", detail}}}).dump();
  const Json cut = ReadGpuFaults(path, 8);
  EXPECT_EQ(cut[0]["detail"].get<std::string>(), std::string(1023, 'x'));
  EXPECT_NO_THROW(cut.dump());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shepherd::agent

namespace shepherd::agent {
namespace {

TEST(Protocol, ParsesKeepAndAnOldDaemonsAnswerWithoutIt) {
  Result<Assignments> a = ParseAssignments(
      Json::parse(R"({"version": 3, "ranks": [], "keep": [{"job": "j", "attempt": 1, "rank": 4}]})"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->keep, (std::vector<RankKey>{{"j", 1, 4}}));
  a = ParseAssignments(Json::parse(R"({"version": 3, "ranks": []})"));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->keep.empty());
  // A malformed keep rejects the whole answer (a partial one could stop what it left out).
  a = ParseAssignments(
      Json::parse(R"({"version": 3, "ranks": [], "keep": [{"job": "j", "attempt": -1, "rank": 0}]})"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().fields().at(0).field, "keep[0].attempt");
}

}  // namespace
}  // namespace shepherd::agent
