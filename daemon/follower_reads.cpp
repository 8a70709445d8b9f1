#include "daemon/follower_reads.h"

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>

#include "api/plan_runner.h"
#include "api/problem.h"
#include "api/router.h"
#include "daemon/follower_lease.h"
#include "net/etcd_client.h"
#include "storage/etcd_store.h"

namespace asio = boost::asio;

namespace shepherd {
namespace {

constexpr std::size_t kPlannerCapacity = 16;  // as the leader's: planner searches waiting or running

using Steady = std::chrono::steady_clock;

std::string_view QueryValue(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return {};
}

std::string Seconds3(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", s);
  return buf;
}

}  // namespace

const std::vector<FollowerRouteRule>& FollowerRouteTable() {
  using enum FollowerRoute;
  static const std::vector<FollowerRouteRule> table = {
      // Served from the read view: each answer is a function of the stored records (and the time).
      {"GET", "/v1/nodes", kRead, "the inventory's records (an agent's liveness as last stored)"},
      {"GET", "/v1/nodes/{id}", kRead, "the node's record (an agent's liveness as last stored)"},
      {"GET", "/v1/jobs", kRead, "the jobs' records"},
      {"GET", "/v1/jobs/{id}", kRead, "the job's and its attempts' records"},
      {"GET", "/v1/jobs/{id}/placement", kRead, "the attempt's record"},
      {"GET", "/v1/jobs/{id}/checkpoints", kRead, "the checkpoint records"},
      {"GET", "/v1/jobs/{id}/failures", kRead, "the finding records"},
      {"GET", "/v1/failures", kRead, "the finding records"},
      {"GET", "/v1/jobs/{id}/goodput", kRead, "computed from the job's, attempts' and findings' records"},
      {"GET", "/v1/goodput", kRead, "computed from every job's records"},
      {"GET", "/v1/events", kRead, "the event records (a long poll, wait > 0, goes to the leader)"},
      {"GET", "/v1/whoami", kRead, "the token alone"},
      {"POST", "/v1/plan", kRead,
       "a planner search over the inventory's and findings' records; writes nothing"},
      // Reads the leader answers: live state that is never stored.
      {"GET", "/v1/jobs/{id}/health", kToLeader, "live: ranks' heartbeats, collectives, lateness"},
      {"GET", "/v1/jobs/{id}/steps", kToLeader, "live: the step history is kept in memory"},
      {"GET", "/v1/nodes/{id}/assignments", kToLeader, "a long poll on the agent board"},
      {"POST", "/v1/simulate", kToLeader, "runs on the leader's simulator"},
      {"GET", "/ui", kToLeader, "the dashboard follows its API to the leader"},
      {"GET", "/ui/{file}", kToLeader, "the dashboard follows its API to the leader"},
  };
  return table;
}

FollowerRoute ClassifyFollowerRoute(std::string_view method, std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  std::map<std::string, std::string> params;
  bool known = false;
  const RouteRule* rule = FindRouteRule(method, path, &params, &known);
  if (!rule) return FollowerRoute::kToLeader;  // the leader answers 404/405 as it always has
  for (const FollowerRouteRule& r : FollowerRouteTable()) {
    if (r.pattern != rule->pattern || r.method != rule->method) continue;
    if (r.route == FollowerRoute::kRead && r.pattern == "/v1/events") {
      const std::string_view wait = QueryValue(target, "wait");
      if (!wait.empty() && wait.find_first_not_of("0.") != std::string_view::npos)
        return FollowerRoute::kToLeader;
    }
    return r.route;
  }
  return FollowerRoute::kToLeader;
}

ViewFreshness JudgeView(std::optional<SteadyTime> confirmed_at, SteadyTime now,
                        std::chrono::nanoseconds max_age) {
  if (!confirmed_at) return ViewFreshness::kCheck;
  return now - *confirmed_at <= max_age ? ViewFreshness::kFresh : ViewFreshness::kCheck;
}

ViewRefresh JudgeRevision(std::optional<int64_t> view_revision, int64_t current) {
  return view_revision && *view_revision == current ? ViewRefresh::kKeep : ViewRefresh::kReload;
}

bool WaitedTooLong(SteadyTime queued, SteadyTime now, std::chrono::nanoseconds max_wait) {
  return now - queued > max_wait;
}

// One recovered copy of the replicated state. View thread only (its controller is never ticked: nothing
// in it changes between two loads but what the handlers compute from the time).
struct FollowerReads::View {
  std::unique_ptr<Store> memory = NewMemoryStore();
  SystemClock clock;
  Metrics metrics;  // the router's request counters (not exposed: the follower's /metrics is its own)
  Authenticator auth;
  std::mutex posted_mu;
  std::vector<std::function<void()>> posted;  // the controller's continuations, run by Drain
  std::unique_ptr<Controller> controller;
  std::unique_ptr<Router> router;
  int64_t revision = 0;

  void Drain() {
    for (;;) {
      std::vector<std::function<void()>> run;
      {
        std::lock_guard lock(posted_mu);
        run.swap(posted);
      }
      if (run.empty()) return;
      for (auto& fn : run) fn();
    }
  }
};

struct FollowerReads::Impl {
  explicit Impl(FollowerReadsOptions o) : options(std::move(o)), tokens(options.tokens) {}

  const FollowerReadsOptions options;
  asio::io_context ioc{1};
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
  std::unique_ptr<PlanRunner> planner = std::make_unique<PlanRunner>(kPlannerCapacity);
  // View thread only.
  std::unique_ptr<net::EtcdClient> client;
  std::unique_ptr<Store> store;  // opened at the first load (unfenced; it only ever Loads)
  std::unique_ptr<View> view;
  std::optional<SteadyTime> confirmed_at;
  std::vector<TokenEntry> tokens;  // options.tokens until a SIGHUP replaces them
  // Any thread.
  std::atomic<std::size_t> queued{0};
  std::atomic<uint64_t> served{0}, unavailable{0}, busy{0}, loads{0};
  // Lease renewals: renewed, stopped (node lost), refused by reason (RenewalRefusal; kNone: etcd unreadable
  // or the request was not a valid heartbeat).
  std::atomic<uint64_t> renewed{0}, stopped{0}, refused_unavailable{0}, refused_invalid{0};
  std::atomic<uint64_t> refused[4] = {0, 0, 0, 0};
  std::atomic<int64_t> confirmed_ns{0};  // steady-clock ns of confirmed_at; 0: no view
  std::atomic<int64_t> revision{0};
  std::atomic<int64_t> load_ns{0}, recover_ns{0};  // the last load's two phases
  std::thread thread;                              // last: starts after everything above is built

  Status Refresh(SteadyTime now) { return Refresh(now, options.max_age); }
  Status Refresh(SteadyTime now, std::chrono::nanoseconds max_age) {
    if (view && JudgeView(confirmed_at, now, max_age) == ViewFreshness::kFresh) return Status::Ok();
    const SteadyTime sent = Steady::now();
    if (!client) {
      auto c = net::EtcdClient::Create({.endpoints = options.endpoints, .timeout = options.etcd_timeout});
      if (!c.ok()) return c.status();
      client = std::move(c).value();
    }
    Result<net::EtcdRangeResult> head = client->Range(options.prefix + "/schema", false);
    if (!head.ok()) return Unavailable("etcd does not answer: " + head.status().message());
    if (JudgeRevision(view ? std::optional<int64_t>(view->revision) : std::nullopt, head->revision) ==
        ViewRefresh::kKeep) {
      Confirm(sent);
      return Status::Ok();
    }
    if (!store) {
      EtcdStoreOptions so{.endpoints = options.endpoints, .prefix = options.prefix};
      so.timeout = options.etcd_timeout;
      so.unavailable_wait = options.etcd_timeout;
      auto opened = OpenEtcdStore(so);
      if (!opened.ok()) return Unavailable("cannot open the store: " + opened.status().message());
      store = std::move(opened).value();
    }
    const SteadyTime load_start = Steady::now();
    Result<Snapshot> snap = store->Load();
    if (!snap.ok()) return Unavailable(snap.status().message());
    const SteadyTime loaded_at = Steady::now();
    // Load reads every record at one revision, at or after the checked one: the view holds every write up
    // to head->revision, which is what it is labelled with (if writes came between, the next check finds
    // the revision moved and loads again).
    auto built = Build(std::move(snap).value(), head->revision);
    if (!built.ok()) return built.status();
    view = std::move(built).value();  // the previous view (and its controller) is dropped here
    load_ns.store((loaded_at - load_start).count(), std::memory_order_relaxed);
    recover_ns.store((Steady::now() - loaded_at).count(), std::memory_order_relaxed);
    revision.store(view->revision, std::memory_order_relaxed);
    loads.fetch_add(1, std::memory_order_relaxed);
    Confirm(sent);  // every write committed before the check was sent is in the view
    return Status::Ok();
  }

  void Confirm(SteadyTime sent) {
    confirmed_at = sent;
    confirmed_ns.store(std::max<int64_t>(1, sent.time_since_epoch().count()), std::memory_order_relaxed);
  }

  Result<std::unique_ptr<View>> Build(Snapshot snap, int64_t revision_seen) {
    auto v = std::make_unique<View>();
    v->revision = revision_seen;
    WriteBatch seed;
    for (Record& r : snap.records) seed.Put(std::move(r));
    v->memory->Write(std::move(seed), nullptr);
    View* vp = v.get();
    const Post post = [vp](std::function<void()> fn) {
      std::lock_guard lock(vp->posted_mu);
      vp->posted.push_back(std::move(fn));
    };
    v->controller = std::make_unique<Controller>(v->memory.get(), &v->clock, post, options.controller);
    Status s = v->controller->Recover(false);
    v->Drain();
    if (!s.ok()) return Unavailable("the stored state does not recover: " + s.message());
    v->router = std::make_unique<Router>(&v->metrics);
    ApiOptions api = options.api;
    api.planner = planner.get();
    api.simulator = nullptr;
    api.post_control = post;
    RegisterRoutes(v->router.get(), v->controller.get(), &v->metrics, api, &v->clock);
    if (!tokens.empty()) v->auth.SetStatic(tokens);
    InstallAuth(v->router.get(), v->controller.get(), &v->auth);
    return v;
  }

  void Run(HttpRequest request, Respond respond, SteadyTime queued_at) {
    queued.fetch_sub(1, std::memory_order_relaxed);
    const SteadyTime now = Steady::now();
    if (WaitedTooLong(queued_at, now, kMaxReadWait)) {
      busy.fetch_add(1, std::memory_order_relaxed);
      return respond(
          Refusal("this follower's reads waited too long for its view of the store; retry, or "
                  "ask the leader"));
    }
    if (Status s = Refresh(now); !s.ok()) {
      unavailable.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("follower read of {} refused: {}", request.target, s.message());
      return respond(Refusal("this follower cannot serve reads no older than " +
                             Seconds3(std::chrono::duration<double>(options.max_age).count()) +
                             " s: " + s.message() + "; retry, or ask the leader"));
    }
    served.fetch_add(1, std::memory_order_relaxed);
    const std::string at = std::to_string(view->revision);
    const std::string max_age = Seconds3(std::chrono::duration<double>(options.max_age).count());
    view->router->Handle(
        std::move(request), [respond, at, max_age, confirmed = *confirmed_at](HttpResponse r) {
          r.headers.emplace_back("Shepherd-Served-By", "follower");
          r.headers.emplace_back("Shepherd-Read-Revision", at);
          r.headers.emplace_back("Shepherd-Read-Age",
                                 Seconds3(std::chrono::duration<double>(Steady::now() - confirmed).count()));
          r.headers.emplace_back("Shepherd-Read-Max-Age", max_age);
          respond(std::move(r));
        });
    view->Drain();
  }

  // An agent's renew-only heartbeat (daemon/follower_lease.h).
  void RunRenewal(HttpRequest request, const std::string& node, Respond respond, SteadyTime queued_at) {
    queued.fetch_sub(1, std::memory_order_relaxed);
    const SteadyTime now = Steady::now();
    const std::string max_age = Seconds3(std::chrono::duration<double>(options.renew_max_age).count());
    if (WaitedTooLong(queued_at, now, kMaxReadWait)) {
      busy.fetch_add(1, std::memory_order_relaxed);
      return respond(Refusal("this follower's lease renewals waited too long for its view; retry"));
    }
    if (Status s = Refresh(now, options.renew_max_age); !s.ok()) {
      refused_unavailable.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("lease renewal for node {} refused: {}", node, s.message());
      return respond(Refusal("this follower cannot renew a lease from a view no older than " + max_age +
                             " s: " + s.message() + "; retry"));
    }
    std::optional<Principal> principal;
    if (auto refused_auth = view->router->Admit(request, &principal)) return respond(*refused_auth);
    Result<Json> body = ParseJsonText(request.body);
    Result<std::vector<RankRef>> ranks =
        body.ok() ? RunningRanksOf(*body) : Result<std::vector<RankRef>>(body.status());
    if (!ranks.ok()) {
      refused_invalid.fetch_add(1, std::memory_order_relaxed);
      HttpResponse r = ProblemFrom(ranks.status());
      r.headers.emplace_back("Shepherd-Served-By", "follower");
      return respond(std::move(r));
    }
    RenewalInput in{.confirmed_at = confirmed_at, .now = Steady::now(), .max_age = options.renew_max_age};
    const Controller& c = *view->controller;
    c.AssertReadable();  // the view thread constructed the view's Controller
    in.node_known = c.view().GetNode(node).ok();
    LostAttempts lost;  // a node's ranks are mostly of one attempt: its findings are read once
    for (const RankRef& r : *ranks) in.running.push_back(Classify(c, node, r, &lost));
    in.now = Steady::now();  // the answer's time: the view's age is judged here
    const RenewalDecision d = DecideRenewal(in);
    const std::string at = std::to_string(view->revision);
    if (d.verdict == RenewalVerdict::kRefuse) {
      refused[static_cast<int>(d.why)].fetch_add(1, std::memory_order_relaxed);
      spdlog::info("lease renewal for node {} refused ({}) at revision {}", node, ToString(d.why), at);
      HttpResponse r = Refusal(d.why == RenewalRefusal::kNotDesired
                                   ? "node " + node +
                                         " runs ranks this follower's view does not assign it; "
                                         "only the leader renews its lease"
                               : d.why == RenewalRefusal::kUnknownNode
                                   ? "node " + node + " is not in this follower's view; ask the leader"
                                   : "this follower's view is older than " + max_age + " s; retry");
      r.headers.emplace_back("Shepherd-Read-Revision", at);
      return respond(std::move(r));
    }
    const bool stop = d.verdict == RenewalVerdict::kStop;
    (stop ? stopped : renewed).fetch_add(1, std::memory_order_relaxed);
    if (stop)
      spdlog::warn("node {} was declared lost (revision {}): its agent is told to stop its ranks", node, at);
    Json answer = {
        {"renew_only", true}, {"ack_exits", Json::array()}, {"reports_accepted", 0}, {"reports_rejected", 0}};
    if (stop)
      answer["node_lost"] = true;  // no lease_s: none is granted (and agents take only a positive one)
    else
      answer["lease_s"] = options.controller.agent_lease_s;
    HttpResponse r = JsonResponse(200, answer);
    r.headers.emplace_back("Shepherd-Served-By", "follower");
    r.headers.emplace_back("Shepherd-Read-Revision", at);
    r.headers.emplace_back("Shepherd-Read-Age",
                           Seconds3(std::chrono::duration<double>(Steady::now() - *confirmed_at).count()));
    r.headers.emplace_back("Shepherd-Read-Max-Age", max_age);
    respond(std::move(r));
  }

  // Per (job, attempt) of one heartbeat: whether a node_lost finding of that attempt names the node.
  using LostAttempts = std::map<std::pair<std::string, int>, bool>;

  static RankInView Classify(const Controller& c, const std::string& node, const RankRef& r, LostAttempts* lost)
      REQUIRES_SHARED(kControl) {
    auto [known, fresh] = lost->try_emplace({r.job, r.attempt}, false);
    if (fresh) {
      Result<std::vector<Finding>> found = c.view().GetFailures({.job = r.job, .kind = FindingKind::kNodeLost});
      if (found.ok())
        for (const Finding& f : *found)
          if (f.attempt == r.attempt && std::find(f.nodes.begin(), f.nodes.end(), node) != f.nodes.end())
            known->second = true;
    }
    if (known->second) return RankInView::kLost;
    // The placement as recorded, without GetPlacement's quality evaluation (O(ranks) per call).
    const JobEntry* e = c.view().jobs().Find(r.job);
    if (!e || !e->attempt || e->attempt->number != r.attempt || !IsActive(e->job.state) ||
        e->job.state == JobState::kQueued)
      return RankInView::kNotDesired;
    const auto& slots = e->attempt->placement.ranks;  // indexed by rank
    if (r.rank < 0 || r.rank >= static_cast<int>(slots.size())) return RankInView::kNotDesired;
    return slots[r.rank].rank == r.rank && slots[r.rank].node == node ? RankInView::kDesired
                                                                      : RankInView::kNotDesired;
  }

  static HttpResponse Refusal(const std::string& detail) {
    HttpResponse r = Problem(503, detail);
    r.headers.emplace_back("Retry-After", "1");
    r.headers.emplace_back("Shepherd-Served-By", "follower");
    return r;
  }
};

FollowerReads::FollowerReads(FollowerReadsOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

FollowerReads::~FollowerReads() {
  impl_->work.reset();
  impl_->ioc.stop();  // reads still queued are dropped (their connections are closing with the phase)
  impl_->thread.join();
  impl_->planner.reset();  // the search in progress ends; waiting ones are dropped
  impl_->view.reset();
}

void FollowerReads::Serve(HttpRequest request, Respond respond) {
  if (impl_->queued.fetch_add(1, std::memory_order_relaxed) >= kMaxQueuedReads) {
    impl_->queued.fetch_sub(1, std::memory_order_relaxed);
    impl_->busy.fetch_add(1, std::memory_order_relaxed);
    return respond(
        Impl::Refusal("this follower has as many reads waiting as it holds; retry, or ask the leader"));
  }
  asio::post(impl_->ioc, [impl = impl_.get(), request = std::move(request), respond = std::move(respond),
                          queued_at = Steady::now()]() mutable {
    impl->Run(std::move(request), std::move(respond), queued_at);
  });
}

void FollowerReads::Renew(HttpRequest request, std::string node, Respond respond) {
  if (impl_->queued.fetch_add(1, std::memory_order_relaxed) >= kMaxQueuedReads) {
    impl_->queued.fetch_sub(1, std::memory_order_relaxed);
    impl_->busy.fetch_add(1, std::memory_order_relaxed);
    return respond(Impl::Refusal("this follower has as many requests waiting as it holds; retry"));
  }
  asio::post(impl_->ioc, [impl = impl_.get(), request = std::move(request), node = std::move(node),
                          respond = std::move(respond), queued_at = Steady::now()]() mutable {
    impl->RunRenewal(std::move(request), node, std::move(respond), queued_at);
  });
}

bool FollowerReads::renews() const {
  return impl_->options.renew_max_age > std::chrono::nanoseconds(0);
}

void FollowerReads::SetTokens(std::vector<TokenEntry> tokens) {
  asio::post(impl_->ioc, [impl = impl_.get(), tokens = std::move(tokens)]() mutable {
    if (impl->view) impl->view->auth.SetStatic(tokens);
    impl->tokens = std::move(tokens);
  });
}

void FollowerReads::AppendMetrics(std::string* out) const {
  const Impl& i = *impl_;
  *out +=
      "# HELP shepherd_follower_reads_total Reads this follower answered from its view (served) or refused "
      "(unavailable: etcd unreadable; busy: too many waiting).\n"
      "# TYPE shepherd_follower_reads_total counter\n";
  *out += "shepherd_follower_reads_total{result=\"served\"} " + std::to_string(i.served.load()) + "\n";
  *out +=
      "shepherd_follower_reads_total{result=\"unavailable\"} " + std::to_string(i.unavailable.load()) + "\n";
  *out += "shepherd_follower_reads_total{result=\"busy\"} " + std::to_string(i.busy.load()) + "\n";
  const int64_t confirmed = i.confirmed_ns.load(std::memory_order_relaxed);
  double age = NAN;
  if (confirmed != 0)
    age =
        std::chrono::duration<double>(Steady::now().time_since_epoch() - std::chrono::nanoseconds(confirmed))
            .count();
  *out +=
      "# HELP shepherd_follower_view_age_seconds Time since the read view's revision was last confirmed "
      "against etcd (NaN: no view).\n# TYPE shepherd_follower_view_age_seconds gauge\n";
  *out +=
      "shepherd_follower_view_age_seconds " + (std::isnan(age) ? std::string("NaN") : Seconds3(age)) + "\n";
  *out +=
      "# HELP shepherd_follower_view_revision The etcd revision the read view was loaded at (0: none).\n"
      "# TYPE shepherd_follower_view_revision gauge\n";
  *out += "shepherd_follower_view_revision " + std::to_string(i.revision.load()) + "\n";
  *out +=
      "# HELP shepherd_follower_view_loads_total Full loads of the read view (a check that finds the "
      "revision unchanged loads nothing).\n# TYPE shepherd_follower_view_loads_total counter\n";
  *out += "shepherd_follower_view_loads_total " + std::to_string(i.loads.load()) + "\n";
  *out +=
      "# HELP shepherd_follower_view_load_seconds The last load of the read view: reading the records from "
      "etcd (phase etcd) and recovering them into memory (phase recover).\n"
      "# TYPE shepherd_follower_view_load_seconds gauge\n";
  *out += "shepherd_follower_view_load_seconds{phase=\"etcd\"} " + Seconds3(i.load_ns.load() / 1e9) + "\n";
  *out +=
      "shepherd_follower_view_load_seconds{phase=\"recover\"} " + Seconds3(i.recover_ns.load() / 1e9) + "\n";
  *out +=
      "# HELP shepherd_follower_lease_renewals_total Renew-only heartbeats this follower answered: lease "
      "renewed, ranks stopped (the node was declared lost), or refused (no lease given; by reason in "
      "shepherd_follower_lease_refusals_total).\n# TYPE shepherd_follower_lease_renewals_total counter\n";
  uint64_t refusals = i.refused_unavailable.load() + i.refused_invalid.load();
  for (const auto& r : i.refused) refusals += r.load();
  *out +=
      "shepherd_follower_lease_renewals_total{result=\"renewed\"} " + std::to_string(i.renewed.load()) + "\n";
  *out +=
      "shepherd_follower_lease_renewals_total{result=\"stopped\"} " + std::to_string(i.stopped.load()) + "\n";
  *out += "shepherd_follower_lease_renewals_total{result=\"refused\"} " + std::to_string(refusals) + "\n";
  *out +=
      "# HELP shepherd_follower_lease_refusals_total Renew-only heartbeats refused: etcd unreadable "
      "(unavailable), a view older than the renewal bound (stale_view), a node not in the view "
      "(unknown_node), ranks the view does not assign the node (not_desired), not a valid heartbeat "
      "(invalid).\n# TYPE shepherd_follower_lease_refusals_total counter\n";
  auto line = [out](const char* reason, uint64_t n) {
    *out += std::string("shepherd_follower_lease_refusals_total{reason=\"") + reason + "\"} " +
            std::to_string(n) + "\n";
  };
  line("unavailable", i.refused_unavailable.load());
  for (RenewalRefusal why :
       {RenewalRefusal::kStaleView, RenewalRefusal::kUnknownNode, RenewalRefusal::kNotDesired})
    line(ToString(why), i.refused[static_cast<int>(why)].load());
  line("invalid", i.refused_invalid.load());
}

}  // namespace shepherd
