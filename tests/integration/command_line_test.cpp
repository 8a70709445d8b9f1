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

}  // namespace
