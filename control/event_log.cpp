#include "control/event_log.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace shepherd {
namespace {

constexpr const char* kSeqKey = "event_seq";
constexpr const char* kEventPrefix = "event/";

// Zero-padded so that keys sort as sequence numbers do.
std::string EventKey(int64_t seq) {
  char key[40];
  std::snprintf(key, sizeof key, "event/%019lld", static_cast<long long>(seq));
  return key;
}

Json StoredEvent(const Event& e) {
  return {{"seq", e.seq},
          {"time_ns", e.time.time_since_epoch().count()},
          {"type", ToString(e.type)},
          {"job", e.job},
          {"node", e.node},
          {"detail", e.detail}};
}

}  // namespace

std::optional<EventType> EventTypeFromString(const std::string& s) {
  for (EventType t : {EventType::kFinding, EventType::kAction, EventType::kJobState, EventType::kNodeState})
    if (s == ToString(t)) return t;
  return std::nullopt;
}

const char* ToString(EventType t) {
  switch (t) {
    case EventType::kFinding:
      return "finding";
    case EventType::kAction:
      return "action";
    case EventType::kJobState:
      return "job_state";
    case EventType::kNodeState:
      return "node_state";
  }
  return "unknown";
}

std::optional<int64_t> ParseEventCursor(const std::string& s) {
  if (s.empty()) return 0;
  if (s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(s);
}

Json RenderEvent(const Event& e) {
  Json j = {{"cursor", std::to_string(e.seq)}, {"time", FormatRfc3339(e.time)}, {"type", ToString(e.type)}};
  if (!e.job.empty()) j["job"] = e.job;
  if (!e.node.empty()) j["node"] = e.node;
  for (auto& [k, v] : e.detail.items()) j[k] = v;
  return j;
}

int64_t EventLog::Append(std::vector<Event>* events, Time now, WriteBatch* batch) {
  if (events->empty()) return 0;
  for (Event& e : *events) {
    e.seq = next_seq_++;
    e.time = now;
    batch->Put({Collection::kMeta, EventKey(e.seq), "", StoredEvent(e).dump()});
    kept_.push_back(e);
  }
  batch->Put({Collection::kMeta, kSeqKey, "", Json{{"next", next_seq_}}.dump()});
  Prune(now, batch);
  return next_seq_ - 1;
}

void EventLog::Prune(Time now, WriteBatch* batch) {
  const Time oldest = now - Seconds(retention_.max_age_s);
  for (std::size_t n = 0; n < retention_.prune_batch && !kept_.empty(); ++n) {
    if (kept_.size() <= retention_.max_events && kept_.front().time >= oldest) break;
    batch->Erase(Collection::kMeta, EventKey(kept_.front().seq));
    kept_.pop_front();
  }
}

void EventLog::MarkDurable(int64_t seq) {
  if (seq <= durable_) return;
  durable_ = seq;
  std::vector<Waiter> ws = std::move(waiters_);
  waiters_.clear();
  for (Waiter& w : ws) {
    Result<EventPage> page = Read(w.after, w.limit);
    if (!page.ok() || !page->events.empty() || page->truncated)
      w.done(std::move(page));
    else
      waiters_.push_back(std::move(w));
  }
}

Result<bool> EventLog::Restore(const Record& r) {
  if (r.collection != Collection::kMeta) return false;
  if (r.key == kSeqKey) {
    Result<Json> j = ParseJsonText(r.body);
    if (!j.ok() || !j->is_object() || !j->contains("next") || !(*j)["next"].is_number_integer())
      return InvalidArgument("no integer next");
    next_seq_ = std::max(next_seq_, (*j)["next"].get<int64_t>());
    return true;
  }
  if (r.key.rfind(kEventPrefix, 0) != 0) return false;
  Result<Json> j = ParseJsonText(r.body, kLargeJsonLimits);
  if (!j.ok() || !j->is_object()) return InvalidArgument("not a JSON object");
  const Json& o = *j;
  auto integer = [&](const char* k) { return o.contains(k) && o[k].is_number_integer(); };
  auto text = [&](const char* k) { return o.contains(k) && o[k].is_string(); };
  if (!integer("seq") || !integer("time_ns") || !text("type") || !text("job") || !text("node") ||
      !o.contains("detail") || !o["detail"].is_object())
    return InvalidArgument("an event needs seq, time_ns, type, job, node and detail");
  auto type = EventTypeFromString(o["type"].get<std::string>());
  if (!type) return InvalidArgument("unknown event type");
  Event e;
  e.seq = o["seq"].get<int64_t>();
  e.time = Time(Duration(o["time_ns"].get<int64_t>()));
  e.type = *type;
  e.job = o["job"].get<std::string>();
  e.node = o["node"].get<std::string>();
  e.detail = o["detail"];
  // Records load in first-write order, which is sequence order; sort anyway for a restored copy.
  auto at = std::upper_bound(kept_.begin(), kept_.end(), e.seq,
                             [](int64_t s, const Event& x) { return s < x.seq; });
  next_seq_ = std::max(next_seq_, e.seq + 1);
  kept_.insert(at, std::move(e));
  return true;
}

void EventLog::Restored() {
  durable_ = next_seq_ - 1;
}

Result<EventPage> EventLog::Read(int64_t after, std::size_t limit) const {
  if (after > durable_)
    return InvalidContent("invalid query",
                          {{"after", "is beyond the newest event (" + std::to_string(durable_) + ")"}});
  EventPage page;
  // Everything before the first kept event, or everything durable when none is kept, was pruned.
  const int64_t pruned_through = kept_.empty() ? durable_ : kept_.front().seq - 1;
  page.truncated = after < pruned_through;
  auto it = std::upper_bound(kept_.begin(), kept_.end(), after,
                             [](int64_t s, const Event& x) { return s < x.seq; });
  for (; it != kept_.end() && it->seq <= durable_ && page.events.size() < limit; ++it)
    page.events.push_back(*it);
  const int64_t next = page.events.empty() ? std::max(after, pruned_through) : page.events.back().seq;
  page.next_cursor = std::to_string(next);
  return page;
}

void EventLog::Wait(int64_t after, std::size_t limit, Time deadline, Done<EventPage> done) {
  Result<EventPage> page = Read(after, limit);
  if (!page.ok() || !page->events.empty() || page->truncated) return done(std::move(page));
  waiters_.push_back({after, limit, deadline, std::move(done)});
}

void EventLog::Expire(Time now) {
  std::vector<Waiter> due;
  auto keep =
      std::partition(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.deadline > now; });
  std::move(keep, waiters_.end(), std::back_inserter(due));
  waiters_.erase(keep, waiters_.end());
  for (Waiter& w : due) w.done(Read(w.after, w.limit));
}

void EventLog::ReleaseAll() {
  std::vector<Waiter> ws = std::move(waiters_);
  waiters_.clear();
  for (Waiter& w : ws) w.done(Read(w.after, w.limit));
}

}  // namespace shepherd
