// The agent's node health check: real /bin/sh processes, bounded by their timeout.
#include "agent/health_check.h"

#include <gtest/gtest.h>

namespace shepherd::agent {
namespace {

using std::chrono::milliseconds;

TEST(HealthCheckTest, ExitZeroPassesAndOutputIsKept) {
  HealthCheckResult r = RunHealthCheck("echo gpus ok", milliseconds(10000));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.output, "gpus ok\n");
  EXPECT_FALSE(r.at.empty());
}

TEST(HealthCheckTest, NonZeroExitFailsAndOutputIsTheTail) {
  HealthCheckResult r = RunHealthCheck(
      "head -c 2000 /dev/zero | tr '\\\\0' x; echo; echo ecc errors >&2; exit 3", milliseconds(10000));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.output.size(), 512u);
  EXPECT_NE(r.output.find("ecc errors"), std::string::npos);
}

TEST(HealthCheckTest, AHangingCheckIsKilledAtItsTimeoutAndFails) {
  auto t0 = std::chrono::steady_clock::now();
  HealthCheckResult r = RunHealthCheck("sleep 30", milliseconds(300));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.output.find("timed out"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

}  // namespace
}  // namespace shepherd::agent
