#include "slurm/scontrol_fields.h"

#include <gtest/gtest.h>

namespace shepherd::slurm {
namespace {

TEST(SplitRecords, ValuesWithSpacesAndKeysWithPunctuation) {
  auto r = SplitRecords("junk StepId=4.0 Dist=arbitrary task distribution SrunHost:Pid=vm:1 CPUs/Task=1\n",
                        "StepId");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(*FindField(r[0], "Dist"), "arbitrary task distribution");
  EXPECT_EQ(*FindField(r[0], "SrunHost:Pid"), "vm:1");
  EXPECT_EQ(*FindField(r[0], "CPUs/Task"), "1");
  EXPECT_EQ(FindField(r[0], "junk"), nullptr);
}

TEST(SplitRecords, RestOfLineKeyAndMultiLineRecords) {
  const char* text =
      "NodeName=a State=IDLE\n"
      "   Reason=x=y and more [root@2026-01-01T00:00:00]\n"
      "NodeName=b State=DOWN Reason=gone\n";
  auto r = SplitRecords(text, "NodeName", "Reason");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(*FindField(r[0], "Reason"), "x=y and more [root@2026-01-01T00:00:00]");
  EXPECT_EQ(*FindField(r[1], "State"), "DOWN");
  EXPECT_EQ(*FindField(r[1], "Reason"), "gone");
}

}  // namespace
}  // namespace shepherd::slurm
