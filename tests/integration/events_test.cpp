// GET /v1/events and webhooks through the real daemon: a GPU fault's finding, actions, job and node state
// changes in commit order, a long poll answered by the next event, cursors that resume across a restart,
// and signed webhook deliveries retried after a failure.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/json.h"
#include "tests/integration/harness.h"

namespace shepherd::testing {
namespace {

// A loopback HTTP endpoint that records every POST (its signature header and body) and answers 500 to the
// first `fail_first` of them, 200 after.
class Receiver {
 public:
  explicit Receiver(int fail_first) : fail_left_(fail_first) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 16);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Receiver() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  struct Post {
    std::string signature, body;
    int answered = 0;
  };
  std::vector<Post> posts() {
    std::lock_guard lock(mu_);
    return posts_;
  }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      timeval tv{5, 0};
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string in;
      char buf[4096];
      std::size_t head_end = std::string::npos, length = 0;
      for (;;) {
        if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
          std::string lower = in.substr(0, head_end);
          for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          auto at = lower.find("content-length:");
          if (at != std::string::npos) length = std::stoul(lower.substr(at + 15));
        }
        if (head_end != std::string::npos && in.size() >= head_end + 4 + length) break;
        ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<std::size_t>(n));
      }
      Post post;
      if (head_end != std::string::npos) {
        std::string lower = in.substr(0, head_end);
        for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        auto at = lower.find("x-shepherd-signature:");
        if (at != std::string::npos) {
          auto end = in.find("\r\n", at);
          post.signature = in.substr(at + 21, end - at - 21);
          post.signature.erase(0, post.signature.find_first_not_of(' '));
        }
        post.body = in.substr(head_end + 4, length);
      }
      post.answered = fail_left_ > 0 ? 500 : 200;
      if (fail_left_ > 0) --fail_left_;
      {
        std::lock_guard lock(mu_);
        posts_.push_back(post);
      }
      std::string out = "HTTP/1.1 " + std::to_string(post.answered) +
                        " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      send(c, out.data(), out.size(), MSG_NOSIGNAL);
      close(c);
    }
  }

  int fd_ = -1, port_ = 0, fail_left_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Post> posts_;
  std::thread thread_;
};

// HMAC-SHA256 of `body` under the secret file's key, computed by Python's hmac module (not the daemon's
// code).
std::string PythonHmac(const std::string& dir, const std::string& secret_file, const std::string& body) {
  const std::string body_file = dir + "/body";
  std::ofstream(body_file) << body;
  const std::string cmd =
      "python3 -c \"import hmac,hashlib,sys; print(hmac.new(open(sys.argv[1],'rb').read()"
      ".strip(), open(sys.argv[2],'rb').read(), hashlib.sha256).hexdigest())\" " +
      secret_file + " " + body_file;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  char out[128] = {};
  std::string hex = fgets(out, sizeof out, p) ? out : "";
  pclose(p);
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.back()))) hex.pop_back();
  return hex;
}

// Every event after `after`, page by page.
Json AllEvents(int port, const std::string& after = "0") {
  Json out = Json::array();
  std::string cursor = after;
  for (;;) {
    HttpResult r = Http(port, "GET", "/v1/events?limit=7&after=" + cursor);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return out;
    Json page = Json::parse(r.body);
    if (page["events"].empty()) return out;
    for (Json& e : page["events"]) out.push_back(e);
    cursor = page["next_cursor"];
  }
}

// Whether `events` hold the job's second attempt (the restart after the fault).
bool Restarted(const Json& events) {
  for (const Json& e : events)
    if (e["type"] == "job_state" && e["attempt"] == 2) return true;
  return false;
}

class EventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = dir_.path + "/webhook.secret";
    std::ofstream(secret_) << "s3cret-for-tests\n";
    chmod(secret_.c_str(), 0600);
    std::ofstream(dir_.path + "/config.json") << Json{
        {"tick_interval_s", 0.05},
        {"webhooks",
         {{{"url", "http://127.0.0.1:" + std::to_string(rx_.port()) + "/hook"},
           {"events", {"finding", "action", "job_state", "node_state"}},
           {"secret_file", secret_}}}}}.dump();
  }
  std::unique_ptr<Daemon> Start() {
    auto d =
        std::make_unique<Daemon>(dir_.path, std::vector<std::string>{"--config", dir_.path + "/config.json"});
    EXPECT_TRUE(d->WaitReady()) << d->log();
    return d;
  }
  int Heartbeat(int port, const std::string& node, const Json& processes,
                const Json& faults = Json::array()) {
    return Http(port, "POST", "/v1/nodes/" + node + "/heartbeat",
                Json{{"processes", processes}, {"gpu_faults", faults}}.dump())
        .status;
  }
  Json Running(int port, const std::string& node) {
    Json procs = Json::array();
    HttpResult a = Http(port, "GET", "/v1/nodes/" + node + "/assignments?version=-1&wait=0&keep=1");
    EXPECT_EQ(a.status, 200) << a.body;
    const Json assigned = Json::parse(a.body);  // kept: a range over a temporary's member would dangle
    for (const Json& r : assigned["ranks"])
      procs.push_back({{"job", r["job"]},
                       {"attempt", r["attempt"]},
                       {"rank", r["rank"]},
                       {"pid", 1000 + r["rank"].get<int>()},
                       {"state", "running"}});
    return procs;
  }
  // Three 4-GPU nodes (n0, n1, spare sp0) whose agents heartbeat, an 8-rank job on n0 and n1 running, then
  // a GPU fault on n0: the job's id.
  std::string RunJobIntoAGpuFault(int port) {
    for (const char* n : {"n0", "n1", "sp0"}) {
      Json node = {{"id", n},
                   {"gpus", 4},
                   {"topology", {{"spine", "s0"}, {"leaf", "l0"}}},
                   {"spare", std::string(n) == "sp0"}};
      EXPECT_EQ(Http(port, "POST", "/v1/nodes", node.dump()).status, 201);
      EXPECT_EQ(Heartbeat(port, n, Json::array()), 200);
    }
    HttpResult job = Http(port, "POST", "/v1/jobs", R"({"name": "a", "model": {"parameters": 1e8, "layers": 4,
        "hidden": 512, "heads": 8, "seq_len": 512}, "training": {"global_batch_size": 32},
        "parallelism": {"tp": 1, "pp": 1, "dp": 8}, "resources": {"gpus": 8, "gpus_per_node": 4},
        "command": ["python3", "train.py"], "policy": {"startup_grace_s": 600, "restart_backoff_s": 0}})");
    EXPECT_EQ(job.status, 201) << job.body;
    const std::string id = Json::parse(job.body)["id"];
    Json n0 = Running(port, "n0"), n1 = Running(port, "n1");
    EXPECT_EQ(n0.size(), 4u);
    EXPECT_EQ(Heartbeat(port, "n1", n1), 200);
    EXPECT_EQ(Heartbeat(port, "n0", n0, Json::array({{{"gpu", 2}, {"kind", "ecc_uncorrectable"}}})), 200);
    return id;
  }

  TempDir dir_;
  Receiver rx_{1};
  std::string secret_;
};

TEST_F(EventsTest, AGpuFaultIsAFindingItsActionsAndTheStateChangesInCommitOrder) {
  auto d = Start();
  const std::string job = RunJobIntoAGpuFault(d->port());
  Json events;
  // The fault's consequences commit with the heartbeat's answer; the restart follows in the same batch.
  ASSERT_TRUE(Eventually([&] {
    events = AllEvents(d->port());
    for (const Json& e : events)
      if (e["type"] == "job_state" && e["attempt"] == 2) return true;
    return false;
  })) << events.dump(1);
  // Cursors are 1, 2, 3, ... with no gap.
  for (std::size_t i = 0; i < events.size(); ++i) ASSERT_EQ(events[i]["cursor"], std::to_string(i + 1));
  auto find = [&](auto pred) -> std::ptrdiff_t {
    for (std::size_t i = 0; i < events.size(); ++i)
      if (pred(events[i])) return static_cast<std::ptrdiff_t>(i);
    return -1;
  };
  const auto created = find([&](const Json& e) { return e["type"] == "job_state" && e["job"] == job; });
  const auto launching = find([&](const Json& e) {
    return e["type"] == "job_state" && e["job"] == job && e["state"] == "launching" && e["attempt"] == 1;
  });
  const auto running = find([&](const Json& e) {
    return e["type"] == "job_state" && e["job"] == job && e["state"] == "running" && e["attempt"] == 1;
  });
  const auto finding = find([&](const Json& e) {
    return e["type"] == "finding" && e["kind"] == "gpu_fault" && e["job"] == job && e["node"] == "n0";
  });
  ASSERT_GE(finding, 0) << events.dump(1);
  const std::string finding_id = events[finding]["finding"];
  const auto action =
      find([&](const Json& e) { return e["type"] == "action" && e["finding"] == finding_id; });
  const auto failed = find([&](const Json& e) {
    return e["type"] == "node_state" && e["node"] == "n0" && e["state"] == "failed";
  });
  const auto restarted =
      find([&](const Json& e) { return e["type"] == "job_state" && e["job"] == job && e["attempt"] == 2; });
  const auto n0_created = find([&](const Json& e) { return e["type"] == "node_state" && e["node"] == "n0"; });
  EXPECT_GE(n0_created, 0);
  EXPECT_FALSE(events[n0_created].contains("previous"));
  EXPECT_GE(created, 0);
  EXPECT_LE(created, launching);
  EXPECT_LT(launching, running);
  EXPECT_LT(running, finding);
  EXPECT_LT(finding, action);
  EXPECT_NE(events[action]["action"].get<std::string>().find("n0"), std::string::npos) << events[action];
  EXPECT_GT(failed, running);
  EXPECT_EQ(events[failed]["previous"], "allocated");
  EXPECT_GT(restarted, finding);
  for (const Json& e : events) {
    EXPECT_TRUE(e.contains("time")) << e;
    EXPECT_TRUE(e.contains("job") || e.contains("node")) << e;
  }
}

TEST_F(EventsTest, ALongPollIsAnsweredByTheNextEventAndAnEmptyOneAtItsDeadline) {
  auto d = Start();
  ASSERT_EQ(Http(d->port(), "POST", "/v1/nodes",
                 R"({"id": "n0", "gpus": 4, "topology": {"spine": "s0", "leaf": "l0"}})")
                .status,
            201);
  Json events = AllEvents(d->port());
  ASSERT_FALSE(events.empty());
  const std::string last = events.back()["cursor"];
  // Nothing happens: an empty page, after the wait, with the cursor unchanged.
  auto start = std::chrono::steady_clock::now();
  HttpResult idle = Http(d->port(), "GET", "/v1/events?wait=1&after=" + last);
  const double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(idle.status, 200) << idle.body;
  EXPECT_TRUE(Json::parse(idle.body)["events"].empty());
  EXPECT_EQ(Json::parse(idle.body)["next_cursor"], last);
  EXPECT_GE(idle_s, 0.9);
  // A cordon while a poll waits (or just before it arrives: either way the poll answers with it).
  HttpResult got;
  double waited_s = 0;
  std::thread poll([&] {
    auto t0 = std::chrono::steady_clock::now();
    got = Http(d->port(), "GET", "/v1/events?wait=60&after=" + last);
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  HttpResult patch = Http(d->port(), "PATCH", "/v1/nodes/n0", R"({"schedulable": false, "reason": "fan"})");
  poll.join();
  ASSERT_EQ(patch.status, 200) << patch.body;
  ASSERT_EQ(got.status, 200) << got.body;
  Json page = Json::parse(got.body);
  ASSERT_EQ(page["events"].size(), 1u) << got.body;
  EXPECT_EQ(page["events"][0]["type"], "node_state");
  EXPECT_EQ(page["events"][0]["state"], "cordoned");
  EXPECT_EQ(page["events"][0]["reason"], "fan");
  EXPECT_LT(waited_s, 30) << "answered by the event, not the deadline";
}

TEST_F(EventsTest, BadCursorsAndParametersAre422NamingTheField) {
  auto d = Start();
  auto field_of = [&](const std::string& q) {
    HttpResult r = Http(d->port(), "GET", "/v1/events?" + q);
    EXPECT_EQ(r.status, 422) << q << ": " << r.body;
    Json b = Json::parse(r.body, nullptr, false);
    return b.is_object() && b.contains("errors") && !b["errors"].empty() ? b["errors"][0]["field"].dump()
                                                                         : r.body;
  };
  EXPECT_EQ(field_of("after=abc"), "\"after\"");
  EXPECT_EQ(field_of("after=-3"), "\"after\"");
  EXPECT_EQ(field_of("after=99999999"), "\"after\"");  // beyond the newest: a cursor of another database
  EXPECT_EQ(field_of("wait=301"), "\"wait\"");
  EXPECT_EQ(field_of("wait=soon"), "\"wait\"");
  EXPECT_EQ(field_of("limit=0"), "\"limit\"");
  EXPECT_EQ(field_of("since=1"), "\"since\"");
}

TEST_F(EventsTest, ACursorResumesAfterARestartWithoutDuplicatesOrGaps) {
  Json before;
  std::string job;
  {
    auto d = Start();
    job = RunJobIntoAGpuFault(d->port());
    ASSERT_TRUE(Eventually([&] {
      before = AllEvents(d->port());
      return Restarted(before);
    })) << before.dump(1);
    d->Signal(SIGTERM);
    ASSERT_EQ(d->Wait(), 0) << d->log();
  }
  ASSERT_GE(before.size(), 6u);
  const std::size_t mid = before.size() / 2;
  auto d = Start();
  // After the restart, a cordon: an event that must follow the old ones.
  ASSERT_EQ(
      Http(d->port(), "PATCH", "/v1/nodes/n1", R"({"schedulable": false, "reason": "after restart"})").status,
      200);
  Json after = AllEvents(d->port(), before[mid - 1]["cursor"]);
  ASSERT_GE(after.size(), before.size() - mid + 1) << after.dump(1);
  for (std::size_t i = 0; i < before.size() - mid; ++i) EXPECT_EQ(after[i], before[mid + i]) << i;
  for (std::size_t i = 0; i < after.size(); ++i)
    EXPECT_EQ(after[i]["cursor"], std::to_string(mid + 1 + i)) << "a gap or a duplicate at " << i;
  bool cordon = false;
  for (std::size_t i = before.size() - mid; i < after.size(); ++i)
    cordon |=
        after[i]["type"] == "node_state" && after[i]["node"] == "n1" && after[i]["reason"] == "after restart";
  EXPECT_TRUE(cordon) << after.dump(1);
}

TEST_F(EventsTest, WebhooksGetEverySignedEventInOrderAndARetryAfterAFailure) {
  auto d = Start();
  RunJobIntoAGpuFault(d->port());
  Json events;
  ASSERT_TRUE(Eventually([&] {
    events = AllEvents(d->port());
    return Restarted(events);
  }));
  std::vector<Receiver::Post> posts;
  // Every event delivered once with 200, after the one 500 the receiver answered first.
  ASSERT_TRUE(Eventually([&] {
    posts = rx_.posts();
    std::size_t ok = 0;
    for (const auto& p : posts) ok += p.answered == 200;
    return ok >= events.size();
  })) << posts.size()
      << " posts for " << events.size() << " events\n"
      << d->log();
  ASSERT_GE(posts.size(), 2u);
  EXPECT_EQ(posts[0].answered, 500);
  EXPECT_EQ(posts[1].body, posts[0].body) << "the failed delivery is retried first";
  std::vector<Json> delivered;
  for (const auto& p : posts)
    if (p.answered == 200) delivered.push_back(Json::parse(p.body));
  for (std::size_t i = 0; i < events.size(); ++i) EXPECT_EQ(delivered[i], events[i]) << i;
  for (const auto& p : posts) {
    ASSERT_EQ(p.signature.rfind("sha256=", 0), 0u) << p.signature;
    EXPECT_EQ(p.signature.substr(7), PythonHmac(dir_.path, secret_, p.body)) << p.body;
  }
  HttpResult m = Http(d->port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("shepherd_webhook_deliveries_total{result=\"retried\"} 1\n"), std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("shepherd_webhook_deliveries_total{result=\"delivered\"} "), std::string::npos);
}

}  // namespace
}  // namespace shepherd::testing
