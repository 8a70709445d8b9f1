// GET /v1/events: the event log (docs/events.md), paged by cursor, with an optional long poll.
#include <cerrno>
#include <cstdlib>

#include "api/handlers.h"
#include "api/problem.h"
#include "api/route_handlers.h"

namespace shepherd {
namespace {

constexpr double kMaxEventWaitS = 300;

Json RenderEventPage(const EventPage& page) {
  Json events = Json::array();
  for (const Event& e : page.events) events.push_back(RenderEvent(e));
  Json body = {{"events", std::move(events)}, {"next_cursor", page.next_cursor}};
  if (page.truncated) body["truncated"] = true;
  return body;
}

}  // namespace

namespace api {

// Runs on the reader thread (a GET), which must never wait: a long poll that finds nothing is handed to
// the control thread, where the event log keeps it until an event is durable or the tick expires it.
SHEPHERD_ROUTE_HANDLER(ListEvents) {
  Controller* const c = ctx.controller;
  const ApiOptions& o = ctx.options;
  const Clock* const clock = ctx.clock;
  if (auto r = api::Precheck(req, *c, o, false)) return respond(*r);
  QueryParams q = ParseQuery(req.target);
  std::vector<FieldError> errs;
  std::size_t limit = api::kDefaultPageSize;
  std::optional<int64_t> after = 0;
  double wait = 0;
  for (auto& [k, v] : q) {
    if (k == "after") {
      after = ParseEventCursor(v);
      if (!after)
        errs.push_back({"after", "must be the next_cursor of a previous answer (a decimal number)"});
    } else if (k == "limit") {
      char* end = nullptr;
      const long long n = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || v.size() > 9 || *end != '\0' || n < 1 || n > static_cast<long long>(api::kMaxPageSize))
        errs.push_back({"limit", "must be an integer from 1 to " + std::to_string(api::kMaxPageSize)});
      else
        limit = static_cast<std::size_t>(n);
    } else if (k == "wait") {
      char* end = nullptr;
      errno = 0;
      wait = v.empty() ? -1 : std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || errno != 0 || !(wait >= 0 && wait <= kMaxEventWaitS))
        errs.push_back({"wait", "must be 0-300 seconds"});
    } else {
      errs.push_back({k, "unknown parameter (after, limit, wait)"});
    }
  }
  if (!errs.empty()) return respond(ProblemFrom(InvalidContent("invalid query", errs)));
  auto reply = [respond](Result<EventPage> page) { api::Reply(respond, page, RenderEventPage); };
  Result<EventPage> page = c->view().ReadEvents(*after, limit);
  if (!page.ok() || wait == 0 || !page->events.empty() || page->truncated) return reply(std::move(page));
  const Time deadline = clock->Now() + Seconds(wait);
  auto watch = [c, after = *after, limit, deadline, reply] { c->WatchEvents(after, limit, deadline, reply); };
  if (o.post_control)
    o.post_control(watch);
  else
    watch();
}

}  // namespace api

}  // namespace shepherd
