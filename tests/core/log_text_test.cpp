// Untrusted text in log lines: a line feed in an exit's error forged a log line of its own.
#include "core/log_text.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

TEST(LogText, LineBreaksAndControlCharactersAreEscaped) {
  EXPECT_EQ(EscapeLogText("boom\n[info] job-000001 succeeded"), "boom\\n[info] job-000001 succeeded");
  EXPECT_EQ(EscapeLogText("a\rb\tc"), "a\\rb\\tc");
  EXPECT_EQ(EscapeLogText(std::string("nul\0esc\x1b[2Jdel\x7f", 15)), "nul\\x00esc\\x1b[2Jdel\\x7f");
  EXPECT_EQ(EscapeLogText("back\\slash"), "back\\\\slash");
  EXPECT_EQ(EscapeLogText("nel\xc2\x85ls\xe2\x80\xa8ps\xe2\x80\xa9"), "nel\\u0085ls\\u2028ps\\u2029");
}

TEST(LogText, OrdinaryTextIsKept) {
  const std::string ok =
      "job-000001 attempt 2: rank 3 exited 1 \"quoted\" 'too' \xc3\xa9t\xc3\xa9 \xe2\x80\x94";
  EXPECT_FALSE(NeedsLogEscape(ok));
  EXPECT_EQ(EscapeLogText(ok), ok);
  EXPECT_TRUE(NeedsLogEscape("x\n"));
  EXPECT_EQ(EscapeLogText("cut \xe2\x80"), "cut \xe2\x80");  // a cut sequence is kept, not read past
}

}  // namespace
}  // namespace shepherd
