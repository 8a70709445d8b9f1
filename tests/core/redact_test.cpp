#include "core/redact.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

const std::string kToken(64, 'a');  // today's rank token shape: 64 hex digits

TEST(RedactSecrets, KnownValuesAreReplacedWherever) {
  std::string secret = "s3cr3t-t0ken-of-another-format";
  EXPECT_EQ(RedactSecrets("x" + secret + "y and " + secret, {secret}), "x[redacted]y and [redacted]");
  EXPECT_EQ(RedactSecrets("short abc", {"abc"}), "short abc");  // too short to be a credential
}

// A rank that printed another job's environment: the token after SHEPHERD_TOKEN= is gone.
TEST(RedactSecrets, ValuesAfterTheTokenVariableOrABearerAreReplaced) {
  EXPECT_EQ(RedactSecrets("env: SHEPHERD_TOKEN=Zm9vYmFyYmF6cXV4\nnext"),
            "env: SHEPHERD_TOKEN=[redacted]\nnext");
  EXPECT_EQ(RedactSecrets("SHEPHERD_TOKEN='abc.def-ghi_jkl'"), "SHEPHERD_TOKEN='[redacted]'");
  EXPECT_EQ(RedactSecrets("Authorization: bearer abcdefgh12345678"), "Authorization: bearer [redacted]");
  EXPECT_EQ(RedactSecrets("SHEPHERD_TOKEN="), "SHEPHERD_TOKEN=");
}

TEST(RedactSecrets, LongHexRunsAreReplacedButNotShorterOnesOrWords) {
  EXPECT_EQ(RedactSecrets("token " + kToken + "."), "token [redacted].");
  EXPECT_EQ(RedactSecrets("job.3." + kToken), "job.3.[redacted]");
  std::string commit(40, 'f');
  EXPECT_EQ(RedactSecrets("at commit " + commit), "at commit " + commit);
  EXPECT_EQ(RedactSecrets("x" + kToken), "x" + kToken);  // part of a longer word
}

TEST(RedactSecrets, TextWithoutSecretsIsUnchangedAndRedactingTwiceIsStable) {
  std::string plain = "Traceback (most recent call last):\n  File \"train.py\", line 3\nRuntimeError: NCCL";
  EXPECT_EQ(RedactSecrets(plain), plain);
  std::string once = RedactSecrets("SHEPHERD_TOKEN=" + kToken + " Bearer " + kToken, {kToken});
  EXPECT_EQ(once, "SHEPHERD_TOKEN=[redacted] Bearer [redacted]");
  EXPECT_EQ(RedactSecrets(once, {kToken}), once);
}

}  // namespace
}  // namespace shepherd
