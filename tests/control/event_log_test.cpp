#include "control/event_log.h"

#include <gtest/gtest.h>

#include "tests/fakes/fake_clock.h"

namespace shepherd {
namespace {

Event Of(EventType type, const std::string& job, const std::string& node, Json detail = Json::object()) {
  Event e;
  e.type = type;
  e.job = job;
  e.node = node;
  e.detail = std::move(detail);
  return e;
}

// Appends one event at `now` and marks it durable; the batch it went into.
WriteBatch AppendOne(EventLog* log, Event e, Time now) {
  WriteBatch b;
  std::vector<Event> events = {std::move(e)};
  events[0].time = now;
  int64_t last = log->Append(&events, now, &b);
  log->MarkDurable(last);
  return b;
}

std::vector<int64_t> Seqs(const EventPage& p) {
  std::vector<int64_t> out;
  for (const Event& e : p.events) out.push_back(e.seq);
  return out;
}

TEST(EventLogTest, EventsAreReadableInOrderOnlyOnceDurable) {
  FakeClock clock;
  EventLog log;
  WriteBatch b;
  std::vector<Event> events = {Of(EventType::kJobState, "job-1", "", {{"state", "queued"}}),
                               Of(EventType::kFinding, "job-1", "n0", {{"kind", "hang"}}),
                               Of(EventType::kNodeState, "", "n0", {{"state", "failed"}})};
  EXPECT_EQ(log.Append(&events, clock.Now(), &b), 3);
  EXPECT_EQ(events[2].seq, 3);
  // Each event and the sequence go into the batch of the change.
  EXPECT_EQ(b.ops.size(), 4u);
  EXPECT_TRUE(log.Read(0, 10)->events.empty());
  log.MarkDurable(3);
  Result<EventPage> all = log.Read(0, 10);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Seqs(*all), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(all->next_cursor, "3");
  EXPECT_FALSE(all->truncated);
  Result<EventPage> one = log.Read(1, 1);
  EXPECT_EQ(Seqs(*one), (std::vector<int64_t>{2}));
  EXPECT_EQ(one->next_cursor, "2");
  // Nothing after the newest: the cursor stays where it was.
  EXPECT_EQ(log.Read(3, 10)->next_cursor, "3");
  Json rendered = RenderEvent(all->events[1]);
  EXPECT_EQ(rendered["cursor"], "2");
  EXPECT_EQ(rendered["type"], "finding");
  EXPECT_EQ(rendered["job"], "job-1");
  EXPECT_EQ(rendered["node"], "n0");
  EXPECT_EQ(rendered["kind"], "hang");
}

TEST(EventLogTest, CursorsAreDecimalSequenceNumbers) {
  EXPECT_EQ(ParseEventCursor(""), 0);
  EXPECT_EQ(ParseEventCursor("0"), 0);
  EXPECT_EQ(ParseEventCursor("17"), 17);
  for (const char* bad : {"-1", "abc", "1e3", " 1", "0x10", "1234567890123456789"})
    EXPECT_FALSE(ParseEventCursor(bad)) << bad;
}

TEST(EventLogTest, ACursorBeyondTheNewestEventIsRefusedNamingAfter) {
  EventLog log;
  Result<EventPage> r = log.Read(5, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidContent);
  ASSERT_EQ(r.status().fields().size(), 1u);
  EXPECT_EQ(r.status().fields()[0].field, "after");
}

TEST(EventLogTest, RetentionKeepsTheNewestAndFlagsACursorOlderThanThem) {
  FakeClock clock;
  EventLog log({.max_events = 3, .max_age_s = 1e9, .prune_batch = 1000});
  for (int i = 0; i < 5; ++i) AppendOne(&log, Of(EventType::kJobState, "job-1", ""), clock.Now());
  EXPECT_EQ(log.size(), 3u);
  Result<EventPage> p = log.Read(0, 10);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_TRUE(p->truncated);
  // A cursor at the edge of what is kept lost nothing.
  EXPECT_FALSE(log.Read(2, 10)->truncated);
  EXPECT_TRUE(log.Read(1, 10)->truncated);
}

TEST(EventLogTest, OldEventsArePrunedByAgeInBoundedBatches) {
  FakeClock clock;
  EventLog log({.max_events = 100, .max_age_s = 60, .prune_batch = 2});
  for (int i = 0; i < 5; ++i) AppendOne(&log, Of(EventType::kJobState, "job-1", ""), clock.Now());
  clock.AdvanceSeconds(120);
  WriteBatch b = AppendOne(&log, Of(EventType::kJobState, "job-1", ""), clock.Now());
  EXPECT_EQ(log.size(), 4u);  // two pruned in this batch
  int erased = 0;
  for (const auto& op : b.ops) erased += op.erase;
  EXPECT_EQ(erased, 2);
  AppendOne(&log, Of(EventType::kJobState, "job-1", ""), clock.Now());
  AppendOne(&log, Of(EventType::kJobState, "job-1", ""), clock.Now());
  EXPECT_EQ(Seqs(*log.Read(0, 10)), (std::vector<int64_t>{6, 7, 8}));
}

TEST(EventLogTest, RoundTripThroughAStoreKeepsEventsAndTheSequence) {
  FakeClock clock;
  auto store = NewMemoryStore();
  EventLog log({.max_events = 2, .max_age_s = 1e9, .prune_batch = 1000});
  for (int i = 0; i < 3; ++i) {
    WriteBatch b = AppendOne(
        &log, Of(EventType::kNodeState, "", "n" + std::to_string(i), {{"state", "failed"}}), clock.Now());
    store->Write(std::move(b), [](Status s) { ASSERT_TRUE(s.ok()); });
    clock.AdvanceSeconds(1);
  }
  auto snap = store->Load();
  ASSERT_TRUE(snap.ok());
  EventLog again({.max_events = 2, .max_age_s = 1e9, .prune_batch = 1000});
  for (const Record& r : snap->records) {
    Result<bool> mine = again.Restore(r);
    ASSERT_TRUE(mine.ok()) << r.key;
    EXPECT_TRUE(*mine) << r.key;
  }
  again.Restored();
  Result<EventPage> before = log.Read(0, 10), after = again.Read(0, 10);
  ASSERT_EQ(Seqs(*after), Seqs(*before));
  EXPECT_TRUE(after->truncated);
  for (std::size_t i = 0; i < after->events.size(); ++i)
    EXPECT_EQ(RenderEvent(after->events[i]), RenderEvent(before->events[i]));
  // The sequence goes on where it stopped, never reusing a cursor.
  WriteBatch b;
  std::vector<Event> next = {Of(EventType::kJobState, "job-1", "")};
  EXPECT_EQ(again.Append(&next, clock.Now(), &b), 4);
  EXPECT_FALSE(again.Restore({Collection::kMeta, "epoch", "", "{}"}).value());
  EXPECT_FALSE(again.Restore({Collection::kMeta, "event/x", "", "[]"}).ok());
}

TEST(EventLogTest, AWaitingPollIsAnsweredByTheNextDurableEventOrAtItsDeadline) {
  FakeClock clock;
  EventLog log;
  std::optional<Result<EventPage>> first, second;
  log.Wait(0, 10, clock.Now() + Seconds(30), [&](Result<EventPage> p) { first = std::move(p); });
  log.Wait(0, 10, clock.Now() + Seconds(5), [&](Result<EventPage> p) { second = std::move(p); });
  EXPECT_FALSE(first);
  clock.AdvanceSeconds(6);
  log.Expire(clock.Now());
  ASSERT_TRUE(second);
  EXPECT_TRUE((*second)->events.empty());
  EXPECT_EQ((*second)->next_cursor, "0");
  EXPECT_FALSE(first);
  WriteBatch b;
  std::vector<Event> events = {Of(EventType::kAction, "job-1", "", {{"action", "restart"}})};
  int64_t last = log.Append(&events, clock.Now(), &b);
  EXPECT_FALSE(first);  // not durable yet
  log.MarkDurable(last);
  ASSERT_TRUE(first);
  EXPECT_EQ(Seqs(**first), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace shepherd
