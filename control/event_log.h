// EventLog: what happened to jobs and nodes, in the order it was committed: findings, the actions recovery
// took on them, job state changes and node state changes (docs/events.md). Readers page through it with a
// cursor, the event's sequence number, which survives a daemon restart.
// Owns: the kept events, their sequence (persisted as the meta record "event_seq"), retention, and the
// long polls waiting for events.
// Thread: the control thread for every non-const method; const methods also run on the reader thread
// under the daemon's shared ControlLock (REQUIRES(kControl) / REQUIRES_SHARED(kControl), checked by clang).
// Invariants: sequence numbers are unique, contiguous and increase with commit order; an event is stored
// in the batch of the change it describes and is readable only once that batch is durable (MarkDurable),
// so a cursor a reader holds always names a durable event and is never reused for another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "control/callbacks.h"
#include "control/control_lock.h"
#include "core/json.h"
#include "core/time.h"
#include "storage/store.h"

namespace shepherd {

enum class EventType { kFinding, kAction, kJobState, kNodeState };
const char* ToString(EventType t);
std::optional<EventType> EventTypeFromString(const std::string& s);

struct Event {
  int64_t seq = 0;  // assigned by Append
  Time time{};      // set by Append
  EventType type = EventType::kFinding;
  std::string job;               // empty for node events
  std::string node;              // empty for job events
  Json detail = Json::object();  // type-specific fields (docs/events.md)
};

// Events are kept while both bounds hold; older ones are pruned in the batches that append new events, at
// most prune_batch per batch.
struct EventRetention {
  std::size_t max_events = 100000;  // REQUIRES: >= 1
  double max_age_s = 7 * 86400;
  std::size_t prune_batch = 1000;
};

struct EventPage {
  std::vector<Event> events;
  std::string next_cursor;  // pass as `after` to continue; unchanged when nothing followed
  bool truncated = false;   // events after the cursor were pruned before it was read
};

// A cursor is the decimal sequence number of the last event read ("0" or "": from the start). nullopt
// when `s` is not one.
std::optional<int64_t> ParseEventCursor(const std::string& s);
Json RenderEvent(const Event& e);

class EventLog {
 public:
  explicit EventLog(EventRetention retention = {}) : retention_(retention) {}

  // Numbers `events` in place and stamps them with `now` (their commit), keeps them and puts them (and the
  // sequence) into `batch`; prunes what retention no longer keeps from memory and `batch`. Returns the last
  // sequence number taken (0 when `events` is empty).
  int64_t Append(std::vector<Event>* events, Time now, WriteBatch* batch) REQUIRES(kControl);
  // The batch holding events up to `seq` committed: they become readable and waiting polls are answered.
  void MarkDurable(int64_t seq) REQUIRES(kControl);

  // Recovery: true when `r` is one of the log's records (an error when it does not decode). After the
  // last record, Restored() makes everything restored durable.
  Result<bool> Restore(const Record& r) REQUIRES(kControl);
  void Restored() REQUIRES(kControl);

  // Durable events after `after`, oldest first, at most `limit`. kInvalidContent when `after` is beyond the
  // newest durable event (a cursor of another database).
  Result<EventPage> Read(int64_t after, std::size_t limit) const REQUIRES_SHARED(kControl);
  // Read, but when nothing follows `after` yet, answers once something does or at `deadline` (empty).
  void Wait(int64_t after, std::size_t limit, Time deadline, Done<EventPage> done) REQUIRES(kControl);
  // Answers the polls whose deadline passed (the daemon's tick); ReleaseAll answers every poll (shutdown).
  void Expire(Time now) REQUIRES(kControl);
  void ReleaseAll() REQUIRES(kControl);

  int64_t durable() const REQUIRES_SHARED(kControl) { return durable_; }
  std::size_t size() const REQUIRES_SHARED(kControl) { return kept_.size(); }

 private:
  struct Waiter {
    int64_t after;
    std::size_t limit;
    Time deadline;
    Done<EventPage> done;
  };
  void Prune(Time now, WriteBatch* batch) REQUIRES(kControl);

  EventRetention retention_;
  std::deque<Event> kept_;  // seq order
  int64_t next_seq_ = 1;
  int64_t durable_ = 0;
  std::vector<Waiter> waiters_;
};

}  // namespace shepherd
