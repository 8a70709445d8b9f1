// The command line of the real binary: a word that is no command, or a stray argument, is a one-line error
// and exit 2, never a daemon started with defaults.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Outcome RunShepherdd(const std::string& args) {
  Outcome o;
  // `timeout` bounds the case this test exists for: a daemon that starts and serves instead of refusing.
  FILE* p = popen(("timeout 20 " + std::string(SHEPHERDD_PATH) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), p)) o.output += buf.data();
  const int rc = pclose(p);
  o.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return o;
}

TEST(CommandLine, AnUnknownCommandIsRefused) {
  const Outcome o = RunShepherdd("frobnicate --listen 127.0.0.1:0");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("unknown command 'frobnicate'"), std::string::npos) << o.output;
}

TEST(CommandLine, AStrayArgumentAfterTheOptionsIsRefused) {
  const Outcome o = RunShepherdd("--listen 127.0.0.1:0 --db /nonexistent-dir/x.db frobnicate");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("frobnicate"), std::string::npos) << o.output;
}

TEST(CommandLine, GenInventoryRefusesAStrayArgument) {
  const Outcome o = RunShepherdd("gen-inventory --spines 1 extra");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_EQ(o.output.find("\"nodes\""), std::string::npos) << o.output;
}

TEST(CommandLine, HelpStillWorks) {
  const Outcome o = RunShepherdd("--help");
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("--listen"), std::string::npos) << o.output;
}

// `shepherdd simulate`: the ETTR on a line of its own; --json is the API's answer; bad input is exit 2
// naming the field.
TEST(CommandLine, SimulatePrintsTheEttrLine) {
  const Outcome o = RunShepherdd("simulate --nodes 16 --days 5 --seeds 2 --interval-s 1800");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const auto at = o.output.find("\nETTR: 0.");
  ASSERT_NE(at, std::string::npos) << o.output;
  double mean = 0, low = 0, high = 0;
  ASSERT_EQ(std::sscanf(o.output.c_str() + at, "\nETTR: %lf [%lf, %lf]", &mean, &low, &high), 3) << o.output;
  EXPECT_LE(low, mean);
  EXPECT_LE(mean, high);
  EXPECT_GT(mean, 0.5);
}

TEST(CommandLine, SimulateJsonIsTheApiAnswer) {
  const Outcome o = RunShepherdd("simulate --nodes 16 --days 5 --seeds 1 --json");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("\"ettr\""), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("\"badput_by_cause\""), std::string::npos) << o.output;
}

TEST(CommandLine, SimulateRefusesBadInput) {
  Outcome o = RunShepherdd("simulate --seeds 0");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("seeds"), std::string::npos) << o.output;
  o = RunShepherdd("simulate --nodes 16 extra");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  o = RunShepherdd("simulate --request '{\"fleet\": \"inventory\"}'");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("fleet"), std::string::npos) << o.output;
  o = RunShepherdd("simulate --days 100000");
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_NE(o.output.find("days"), std::string::npos) << o.output;
}

}  // namespace
