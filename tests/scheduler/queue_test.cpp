// FIFO admission with conservative backfill (scheduler/queue.h).
#include "scheduler/queue.h"

#include <gtest/gtest.h>

namespace shepherd {
namespace {

Cluster TwoLeaves(int nodes_per_leaf) {
  Cluster c;
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < nodes_per_leaf; ++i) {
      Node n;
      n.id = "l" + std::to_string(l) + "-n" + std::to_string(i);
      n.gpus = 8;
      n.topology = {{"spine", "s0"}, {"leaf", "l" + std::to_string(l)}};
      n.nvlink_domain = n.id;
      EXPECT_TRUE(c.UpsertNode(n).ok());
    }
  return c;
}

QueuedJob Queued(const std::string& id, int tp, int dp) {
  QueuedJob q;
  q.id = id;
  q.plan.tp = tp;
  q.plan.dp = dp;
  return q;
}

std::vector<std::string> Ids(const std::vector<Admission>& a) {
  std::vector<std::string> out;
  for (const auto& x : a) out.push_back(x.job);
  return out;
}

}  // namespace

TEST(Queue, AdmitsInOrderWhileCapacityLasts) {
  Cluster c = TwoLeaves(2);  // 32 GPUs
  auto a = AdmitFromQueue(c, {Queued("a", 8, 2), Queued("b", 8, 1), Queued("c", 8, 1), Queued("d", 8, 1)});
  EXPECT_EQ(Ids(a), (std::vector<std::string>{"a", "b", "c"}));  // 16 + 8 + 8; d no longer fits
  EXPECT_EQ(c.FreeUsableGpus(), 32);                             // the input cluster is untouched
}

TEST(Queue, NoBackfillThatTakesCapacityTheHeadWaitsFor) {
  Cluster c = TwoLeaves(2);
  Placement p;  // 24 of 32 GPUs busy: 8 free
  for (int i = 0; i < 24; ++i)
    p.ranks.push_back({i, "l" + std::to_string(i / 16) + "-n" + std::to_string((i / 8) % 2), i % 8, 0, 0, 0});
  ASSERT_TRUE(c.Allocate("running", p).ok());
  // The head needs 16 and waits; an 8-GPU job behind it would fit now but leaves less than 16 free.
  auto a = AdmitFromQueue(c, {Queued("head", 8, 2), Queued("small", 8, 1)});
  EXPECT_TRUE(a.empty());
}

TEST(Queue, BackfillsWhenTheHeadIsBlockedByFragmentationNotCount) {
  Cluster c = TwoLeaves(3);  // 48 GPUs
  Placement p;               // 4 GPUs busy on each of 4 nodes: 32 free, but only 2 nodes whole
  int rank = 0;
  for (const char* n : {"l0-n0", "l0-n1", "l1-n0", "l1-n1"})
    for (int g = 0; g < 4; ++g) p.ranks.push_back({rank++, n, g, 0, 0, 0});
  ASSERT_TRUE(c.Allocate("running", p).ok());
  // Head: TP 8 × DP 3 = 24 GPUs, needs 3 whole nodes; only 2 are whole (32 GPUs free in all).
  // Behind it, a TP 4 job of 4 GPUs fits in a half-used node and leaves 28 >= 24 free.
  auto a = AdmitFromQueue(c, {Queued("head", 8, 3), Queued("tp4", 4, 1)});
  EXPECT_EQ(Ids(a), std::vector<std::string>{"tp4"});
  ASSERT_EQ(a[0].placement.ranks.size(), 4u);
  EXPECT_NE(a[0].placement.ranks[0].node, "l0-n2");  // it took a fragment, not a whole node
}

// Nodes cordoned after the head queued: it can start only when they return, and no ending job makes room
// for it, so the jobs behind it are admitted as if it were not there.
TEST(Queue, AJobLargerThanTheUsableGpusIsNoHead) {
  Cluster c = TwoLeaves(2);  // 32 GPUs
  Node cordoned = *c.Find("l1-n1");
  cordoned.schedulable = false;
  ASSERT_TRUE(c.UpsertNode(cordoned).ok());  // 24 usable
  auto a = AdmitFromQueue(c, {Queued("head", 8, 4), Queued("small", 8, 1), Queued("next", 8, 2)});
  EXPECT_EQ(Ids(a), (std::vector<std::string>{"small", "next"}));
}

}  // namespace shepherd
