// report_load: an HTTP load generator for rank reports (POST /v1/jobs/{id}/reports).
//
// It plays N ranks reporting at R Hz in batches (by default the 8 ranks of one node per request) over a
// few keep-alive HTTP/1.1 connections, single-threaded (epoll, non-blocking sockets, no pipelining).
//
// Open loop (default): batch i is scheduled at t0 + i / (batches per tick * rate), whether or not earlier
// requests have been answered; a due batch waits in a FIFO until a connection is free. Latency runs from
// the batch's scheduled time to the end of its response, so queueing in the generator or the server is
// counted (no coordinated omission). After --duration no new batches are scheduled; queued and in-flight
// ones get --drain seconds, after which they count as "unsent"/"timed out".
// Closed loop (--max): every connection sends its next batch as soon as the previous answer arrived, for
// --duration seconds; latency runs from the send. This finds the ceiling in reports per second.
//
// Report mix per rank per tick (documented in docs/benchmarks.md, "Report ingestion"): one heartbeat
// {rank, attempt, time, kind: heartbeat, step, phase: train}; on every --step-every'th tick (all ranks at
// once, as in synchronous training) also one step report {rank, attempt, time, kind: step, step, loss,
// grad_norm, step_time_s}. --step-every 0 sends heartbeats only. "Rank reports" below count report objects.
//
// Output: a human-readable summary, then one line "RESULT key=value ..." for scripts.
// Only loopback hosts are accepted (127.0.0.0/8).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string job;
  long ranks = 131072;
  double rate = 1.0;
  double duration = 20.0;
  int connections = 32;
  int batch = 8;
  std::string path_template = "/v1/jobs/{job}/reports";
  bool max = false;
  int attempt = 1;
  int step_every = 4;
  double drain = 5.0;
  std::string rank_order;  // file: ranks in the order to batch them (one per line), e.g. grouped by node
  long max_requests = 0;   // 0: no cap besides the duration
  std::string latency_log;  // file: one line per answer, "<scheduled or send time, s since start> <latency ms>"
  long first_tick = 0;     // tick (and so step) to start at: lets a second run continue where one stopped
};

[[noreturn]] void Usage(const char* msg) {
  if (msg) std::fprintf(stderr, "report_load: %s\n", msg);
  std::fprintf(stderr,
               "usage: report_load --port P --job ID [--ranks N=131072] [--rate HZ=1] [--duration S=20]\n"
               "         [--connections C=32] [--batch RANKS_PER_REQUEST=8] [--path-template T]\n"
               "         [--max] [--attempt A=1] [--step-every TICKS=4] [--drain S=5] [--rank-order FILE]\n"
               "         [--max-requests N] [--first-tick T=0] [--latency-log FILE] [--host 127.0.0.1]\n"
               "  --path-template: '{job}' is replaced by --job (default /v1/jobs/{job}/reports)\n"
               "  --max: closed loop for --duration seconds (ceiling); default is open loop at ranks*rate\n");
  std::exit(2);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--host") o.host = next();
    else if (a == "--port") o.port = std::atoi(next().c_str());
    else if (a == "--job") o.job = next();
    else if (a == "--ranks") o.ranks = std::atol(next().c_str());
    else if (a == "--rate") o.rate = std::atof(next().c_str());
    else if (a == "--duration") o.duration = std::atof(next().c_str());
    else if (a == "--connections") o.connections = std::atoi(next().c_str());
    else if (a == "--batch") o.batch = std::atoi(next().c_str());
    else if (a == "--path-template") o.path_template = next();
    else if (a == "--max") o.max = true;
    else if (a == "--attempt") o.attempt = std::atoi(next().c_str());
    else if (a == "--step-every") o.step_every = std::atoi(next().c_str());
    else if (a == "--drain") o.drain = std::atof(next().c_str());
    else if (a == "--rank-order") o.rank_order = next();
    else if (a == "--max-requests") o.max_requests = std::atol(next().c_str());
    else if (a == "--first-tick") o.first_tick = std::atol(next().c_str());
    else if (a == "--latency-log") o.latency_log = next();
    else if (a == "-h" || a == "--help") Usage(nullptr);
    else Usage(("unknown argument " + a).c_str());
  }
  if (o.port <= 0 || o.port > 65535) Usage("--port is required (1..65535)");
  if (o.path_template.find("{job}") != std::string::npos && o.job.empty()) Usage("--job is required");
  if (o.ranks <= 0 || o.ranks > (1L << 24)) Usage("--ranks must be in [1, 2^24]");
  if (!(o.rate > 0) || o.rate > 1000) Usage("--rate must be in (0, 1000]");
  if (!(o.duration > 0) || o.duration > 3600) Usage("--duration must be in (0, 3600]");
  if (o.connections < 1 || o.connections > 1024) Usage("--connections must be in [1, 1024]");
  if (o.batch < 1 || o.batch > 4096) Usage("--batch must be in [1, 4096]");
  if (o.step_every < 0) Usage("--step-every must be >= 0");
  if (o.first_tick < 0) Usage("--first-tick must be >= 0");
  if (!(o.drain >= 0) || o.drain > 600) Usage("--drain must be in [0, 600]");
  in_addr addr{};
  if (inet_pton(AF_INET, o.host.c_str(), &addr) != 1 || (ntohl(addr.s_addr) >> 24) != 127)
    Usage("--host must be an IPv4 loopback address (127.0.0.0/8)");
  return o;
}

// One request's worth of work: which batch (node) on which tick.
struct Item {
  long batch_index;  // index into the batch list
  long tick;
  Clock::time_point scheduled;
};

struct Stats {
  std::vector<uint32_t> latency_us;
  long requests_ok = 0;      // 2xx
  long non2xx = 0;           // complete responses with another status
  long errors = 0;           // connection errors, resets, malformed responses (request lost)
  long unsent = 0;           // scheduled but never sent (open loop, after the drain)
  long timed_out = 0;        // sent but unanswered after the drain
  long reports_sent = 0;     // report objects in requests that got a 2xx answer
  long reports_accepted = 0; // from the daemon's {"accepted": n} (when the body says so)
  long reports_ignored = 0;
  long reports_rejected = 0;
  long bodies_with_accepted = 0;
  long bytes_sent = 0;
  long status_counts[6] = {0, 0, 0, 0, 0, 0};
  int first_bad_status = 0;
  std::string first_bad_body;
};

struct Conn {
  int fd = -1;
  bool connected = false;
  bool busy = false;
  std::string out;  // request being written
  size_t out_off = 0;
  std::string in;   // response bytes
  Item item{};
  int reports = 0;  // report objects in the in-flight request
  Clock::time_point sent_at;
  bool want_out = false;
  int reconnects = 0;
};

class Generator {
 public:
  explicit Generator(Options o) : o_(std::move(o)) {}

  int Run();

 private:
  bool LoadOrder();
  void BuildBody(const Item& it, std::string* body, int* nreports);
  bool Connect(Conn& c);
  void Close(Conn& c);
  void Send(Conn& c, const Item& it);
  void Flush(Conn& c);
  void OnReadable(Conn& c);
  // Returns 1 when a complete response was consumed, 0 when more bytes are needed, -1 on a protocol error.
  int TryParse(Conn& c);
  void Complete(Conn& c, int status, const char* body, size_t body_len);
  void Fail(Conn& c);
  void UpdateEpoll(Conn& c, bool want_out);

  Options o_;
  std::string path_;
  std::string host_header_;
  std::vector<int> order_;  // ranks in batching order
  long batches_per_tick_ = 0;
  int epfd_ = -1;
  std::vector<Conn> conns_;
  Stats st_;
  Clock::time_point t0_;
  double wall0_ = 0;  // Unix seconds at t0_
  bool stopping_ = false;
  std::vector<std::pair<float, float>> log_;  // --latency-log: (start s, latency ms)
};

bool Generator::LoadOrder() {
  if (o_.rank_order.empty()) {
    order_.resize(o_.ranks);
    for (long r = 0; r < o_.ranks; ++r) order_[r] = static_cast<int>(r);
  } else {
    std::ifstream in(o_.rank_order);
    if (!in) {
      std::fprintf(stderr, "report_load: cannot read %s\n", o_.rank_order.c_str());
      return false;
    }
    long r;
    while (in >> r) order_.push_back(static_cast<int>(r));
    if (static_cast<long>(order_.size()) != o_.ranks) {
      std::fprintf(stderr, "report_load: %s holds %zu ranks, --ranks is %ld\n", o_.rank_order.c_str(),
                   order_.size(), o_.ranks);
      return false;
    }
  }
  batches_per_tick_ = (o_.ranks + o_.batch - 1) / o_.batch;
  return true;
}

void Generator::BuildBody(const Item& it, std::string* body, int* nreports) {
  const long first = it.batch_index * o_.batch;
  const long last = std::min<long>(first + o_.batch, o_.ranks);
  const bool step_tick = o_.step_every > 0 && it.tick % o_.step_every == 0;
  const long step = o_.step_every > 0 ? it.tick / o_.step_every : it.tick;
  const double now = wall0_ + Seconds(t0_, Clock::now());
  const double step_time = o_.step_every > 0 ? o_.step_every / o_.rate : 1.0 / o_.rate;
  body->clear();
  body->append("{\"reports\":[");
  char buf[256];
  int n = 0;
  for (long i = first; i < last; ++i) {
    int rank = order_[i];
    int len = std::snprintf(buf, sizeof buf,
                            "%s{\"rank\":%d,\"attempt\":%d,\"time\":%.3f,\"kind\":\"heartbeat\",\"step\":%ld,"
                            "\"phase\":\"train\"}",
                            n ? "," : "", rank, o_.attempt, now, step);
    body->append(buf, len);
    ++n;
    if (step_tick) {
      // A smooth loss curve with a little per-rank noise; grad_norm near 1: no anomaly should fire.
      double loss = 2.0 + 1.0 / (1.0 + 0.01 * step) + 0.001 * (rank % 7);
      double grad = 1.0 + 0.01 * (rank % 5);
      len = std::snprintf(buf, sizeof buf,
                          ",{\"rank\":%d,\"attempt\":%d,\"time\":%.3f,\"kind\":\"step\",\"step\":%ld,"
                          "\"loss\":%.5f,\"grad_norm\":%.4f,\"step_time_s\":%.3f}",
                          rank, o_.attempt, now, step, loss, grad, step_time);
      body->append(buf, len);
      ++n;
    }
  }
  body->append("]}");
  *nreports = n;
}

bool Generator::Connect(Conn& c) {
  c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) return false;
  int one = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(o_.port));
  inet_pton(AF_INET, o_.host.c_str(), &sa.sin_addr);
  int rc = connect(c.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  if (rc < 0 && errno != EINPROGRESS) {
    close(c.fd);
    c.fd = -1;
    return false;
  }
  c.connected = rc == 0;
  c.busy = false;
  c.in.clear();
  c.out.clear();
  c.out_off = 0;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
  c.want_out = true;
  ev.data.ptr = &c;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev);
  return true;
}

void Generator::Close(Conn& c) {
  if (c.fd >= 0) {
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
  }
  c.fd = -1;
  c.connected = false;
  c.busy = false;
}

void Generator::UpdateEpoll(Conn& c, bool want_out) {
  if (c.want_out == want_out) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want_out ? EPOLLOUT : 0u);
  ev.data.ptr = &c;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.want_out = want_out;
}

void Generator::Send(Conn& c, const Item& it) {
  static thread_local std::string body;
  int n = 0;
  BuildBody(it, &body, &n);
  c.out.clear();
  c.out.append("POST ").append(path_).append(" HTTP/1.1\r\nHost: ").append(host_header_);
  c.out.append("\r\nContent-Type: application/json\r\nContent-Length: ");
  c.out.append(std::to_string(body.size())).append("\r\n\r\n").append(body);
  c.out_off = 0;
  c.in.clear();
  c.item = it;
  c.reports = n;
  c.busy = true;
  c.sent_at = Clock::now();
  Flush(c);
}

void Generator::Flush(Conn& c) {
  if (!c.connected) {
    UpdateEpoll(c, true);
    return;
  }
  while (c.out_off < c.out.size()) {
    ssize_t w = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (w > 0) {
      c.out_off += static_cast<size_t>(w);
      st_.bytes_sent += w;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      UpdateEpoll(c, true);
      return;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      Fail(c);
      return;
    }
  }
  UpdateEpoll(c, false);
}

void Generator::Fail(Conn& c) {
  if (c.busy) ++st_.errors;
  Close(c);
  if (!stopping_ && c.reconnects < 1000) {
    ++c.reconnects;
    Connect(c);
  }
}

static bool IEquals(const char* a, size_t n, const char* b) {
  if (std::strlen(b) != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

int Generator::TryParse(Conn& c) {
  const std::string& s = c.in;
  size_t hend = s.find("\r\n\r\n");
  if (hend == std::string::npos) return s.size() > 65536 ? -1 : 0;
  if (s.compare(0, 5, "HTTP/") != 0) return -1;
  size_t sp = s.find(' ');
  if (sp == std::string::npos || sp > hend) return -1;
  int status = std::atoi(s.c_str() + sp + 1);
  long content_length = -1;
  bool chunked = false, close_after = false;
  size_t pos = s.find("\r\n") + 2;
  while (pos < hend) {
    size_t eol = s.find("\r\n", pos);
    size_t colon = s.find(':', pos);
    if (colon != std::string::npos && colon < eol) {
      const char* name = s.data() + pos;
      size_t nlen = colon - pos;
      size_t v = colon + 1;
      while (v < eol && (s[v] == ' ' || s[v] == '\t')) ++v;
      std::string value = s.substr(v, eol - v);
      for (auto& ch : value) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (IEquals(name, nlen, "content-length")) content_length = std::atol(value.c_str());
      else if (IEquals(name, nlen, "transfer-encoding")) chunked = value.find("chunked") != std::string::npos;
      else if (IEquals(name, nlen, "connection")) close_after = value.find("close") != std::string::npos;
    }
    pos = eol + 2;
  }
  size_t body_start = hend + 4;
  std::string body;
  size_t consumed;
  if (status == 204 || status == 304 || (status >= 100 && status < 200)) {
    consumed = body_start;
  } else if (chunked) {
    size_t p = body_start;
    for (;;) {
      size_t eol = s.find("\r\n", p);
      if (eol == std::string::npos) return 0;
      long n = std::strtol(s.c_str() + p, nullptr, 16);
      if (n < 0) return -1;
      if (n == 0) {
        size_t end = s.find("\r\n\r\n", eol);  // trailers, if any, end with an empty line
        if (s.compare(eol, 4, "\r\n\r\n") == 0) end = eol;
        if (end == std::string::npos) return 0;
        consumed = end + 4;
        break;
      }
      if (s.size() < eol + 2 + n + 2) return 0;
      body.append(s, eol + 2, n);
      p = eol + 2 + n + 2;
    }
  } else if (content_length >= 0) {
    if (s.size() < body_start + content_length) return 0;
    body.assign(s, body_start, content_length);
    consumed = body_start + content_length;
  } else {
    return -1;  // read-until-close bodies are not expected from either server
  }
  Complete(c, status, body.data(), body.size());
  c.in.erase(0, consumed);
  if (close_after) return 2;
  return 1;
}

static long FindInt(const char* body, size_t n, const char* key) {
  std::string_view sv(body, n);
  size_t p = sv.find(key);
  if (p == std::string_view::npos) return -1;
  p += std::strlen(key);
  while (p < n && (body[p] == ' ' || body[p] == ':')) ++p;
  return std::strtol(body + p, nullptr, 10);
}

void Generator::Complete(Conn& c, int status, const char* body, size_t body_len) {
  auto now = Clock::now();
  auto from = o_.max ? c.sent_at : c.item.scheduled;
  double us = std::chrono::duration<double, std::micro>(now - from).count();
  st_.latency_us.push_back(static_cast<uint32_t>(std::min(us, 4.0e9)));
  if (!o_.latency_log.empty()) log_.push_back({static_cast<float>(Seconds(t0_, from)), static_cast<float>(us / 1000)});
  int cls = status / 100;
  if (cls >= 1 && cls <= 5) ++st_.status_counts[cls];
  if (cls == 2) {
    ++st_.requests_ok;
    st_.reports_sent += c.reports;
    long acc = FindInt(body, body_len, "\"accepted\"");
    if (acc >= 0) {
      ++st_.bodies_with_accepted;
      st_.reports_accepted += acc;
      long ign = FindInt(body, body_len, "\"ignored\"");
      if (ign > 0) st_.reports_ignored += ign;
      if (acc < c.reports) st_.reports_rejected += c.reports - acc;
    }
  } else {
    ++st_.non2xx;
    if (!st_.first_bad_status) {
      st_.first_bad_status = status;
      st_.first_bad_body.assign(body, std::min<size_t>(body_len, 300));
    }
  }
  c.busy = false;
}

void Generator::OnReadable(Conn& c) {
  char buf[65536];
  for (;;) {
    ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
    if (r > 0) {
      c.in.append(buf, static_cast<size_t>(r));
      if (r < static_cast<ssize_t>(sizeof buf)) break;
    } else if (r == 0) {
      // Peer closed; a complete response may still be in the buffer.
      if (c.busy) {
        int p = TryParse(c);
        if (p >= 1) {
          Close(c);
          if (!stopping_) Connect(c);
          return;
        }
      }
      Fail(c);
      return;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno == EINTR) {
      continue;
    } else {
      Fail(c);
      return;
    }
  }
  if (!c.busy) {
    if (!c.in.empty()) Fail(c);  // unsolicited bytes
    return;
  }
  int p = TryParse(c);
  if (p < 0) {
    Fail(c);
  } else if (p == 2) {
    Close(c);
    if (!stopping_) Connect(c);
  }
}

int Generator::Run() {
  if (!LoadOrder()) return 2;
  path_ = o_.path_template;
  if (size_t p = path_.find("{job}"); p != std::string::npos) path_.replace(p, 5, o_.job);
  host_header_ = o_.host + ":" + std::to_string(o_.port);
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  conns_.resize(o_.connections);
  for (auto& c : conns_)
    if (!Connect(c)) {
      std::perror("report_load: connect");
      return 1;
    }

  const double batches_per_s = batches_per_tick_ * o_.rate;
  const long total_batches =
      o_.max ? 0 : std::max<long>(1, static_cast<long>(std::floor(o_.duration * batches_per_s + 1e-9)));
  const double reports_per_rank_tick = 1.0 + (o_.step_every > 0 ? 1.0 / o_.step_every : 0.0);
  st_.latency_us.reserve(o_.max ? 1 << 20 : static_cast<size_t>(total_batches));

  t0_ = Clock::now();
  wall0_ = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto end_of_load = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.duration));
  const auto hard_end = end_of_load + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.drain));

  std::deque<Item> queue;  // due batches waiting for a free connection (open loop)
  long next_batch = 0;     // next batch to schedule (open loop) or to send (closed loop)
  long sent_requests = 0;
  std::vector<epoll_event> events(o_.connections + 4);
  Clock::time_point load_end_actual = end_of_load;

  for (;;) {
    auto now = Clock::now();
    bool load_over = now >= end_of_load || (o_.max_requests > 0 && sent_requests >= o_.max_requests);
    if (!o_.max) {
      // Schedule everything that is due.
      while (next_batch < total_batches && !load_over) {
        auto at = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(next_batch / batches_per_s));
        if (at > now) break;
        queue.push_back({next_batch % batches_per_tick_, o_.first_tick + next_batch / batches_per_tick_, at});
        ++next_batch;
      }
      if (next_batch >= total_batches) load_over = true;
    }
    // Hand work to free connections.
    for (auto& c : conns_) {
      if (c.fd < 0 || c.busy || !c.connected) continue;
      if (o_.max) {
        if (load_over) break;
        Item it{next_batch % batches_per_tick_, o_.first_tick + next_batch / batches_per_tick_, now};
        ++next_batch;
        ++sent_requests;
        Send(c, it);
      } else {
        if (queue.empty()) break;
        Item it = queue.front();
        queue.pop_front();
        ++sent_requests;
        Send(c, it);
      }
    }
    bool inflight = false;
    for (auto& c : conns_) inflight = inflight || c.busy;
    if (load_over && queue.empty() && !inflight) {
      load_end_actual = now;
      break;
    }
    if (now >= hard_end) {
      load_end_actual = now;
      stopping_ = true;
      st_.unsent += static_cast<long>(queue.size());
      for (auto& c : conns_)
        if (c.busy) ++st_.timed_out;
      break;
    }
    // Wait for I/O, or until the next batch is due.
    int timeout_ms = 1;
    if (o_.max || load_over) timeout_ms = 10;
    int n = epoll_wait(epfd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    for (int i = 0; i < n; ++i) {
      Conn& c = *static_cast<Conn*>(events[i].data.ptr);
      if (c.fd < 0) continue;
      uint32_t ev = events[i].events;
      if (!c.connected && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          Fail(c);
          continue;
        }
        c.connected = true;
        if (c.busy) Flush(c);
        else UpdateEpoll(c, false);
        continue;
      }
      if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) OnReadable(c);
      if (c.fd >= 0 && c.busy && (ev & EPOLLOUT)) Flush(c);
    }
  }
  stopping_ = true;
  for (auto& c : conns_) Close(c);
  close(epfd_);

  // Results. The load window is the scheduled duration (open loop) or until the last answer (closed loop).
  double elapsed = o_.max ? Seconds(t0_, load_end_actual) : std::max(o_.duration, 1e-9);
  double wall = Seconds(t0_, load_end_actual);
  std::vector<uint32_t>& l = st_.latency_us;
  std::sort(l.begin(), l.end());
  auto pct = [&](double p) -> double {
    if (l.empty()) return 0;
    size_t idx = static_cast<size_t>(std::ceil(p / 100.0 * l.size()));
    idx = idx == 0 ? 0 : idx - 1;
    return l[std::min(idx, l.size() - 1)] / 1000.0;
  };
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double gen_cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  double gen_cpu_pct = 100.0 * gen_cpu_s / std::max(Seconds(t0_, Clock::now()), 1e-9);
  double target_reports = o_.max ? 0 : o_.ranks * o_.rate * reports_per_rank_tick;
  double target_requests = o_.max ? 0 : batches_per_s;
  double achieved_requests = st_.requests_ok / elapsed;
  double achieved_reports = st_.reports_sent / elapsed;
  std::printf("report_load: %s, %ld ranks, %d ranks/request, step report every %d ticks, %d connections, %s\n",
              o_.max ? "closed loop (--max)" : "open loop", o_.ranks, o_.batch, o_.step_every, o_.connections,
              path_.c_str());
  if (!o_.max)
    std::printf("  target:   %.0f rank-reports/s, %.0f requests/s (%.3g Hz, %.1f s)\n", target_reports,
                target_requests, o_.rate, o_.duration);
  std::printf("  achieved: %.0f rank-reports/s, %.0f requests/s (2xx over %.2f s; last answer at %.2f s)\n",
              achieved_reports, achieved_requests, elapsed, wall);
  std::printf("  latency ms (%s): p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n",
              o_.max ? "from send" : "from scheduled send", pct(50), pct(90), pct(99), pct(99.9),
              l.empty() ? 0.0 : l.back() / 1000.0);
  std::printf("  requests: %ld sent, %ld 2xx, %ld non-2xx, %ld errors, %ld unsent, %ld timed out; %.1f MB sent\n",
              sent_requests, st_.requests_ok, st_.non2xx, st_.errors, st_.unsent, st_.timed_out,
              st_.bytes_sent / 1e6);
  if (st_.bodies_with_accepted > 0)
    std::printf("  server says: %ld accepted (%ld ignored), %ld not accepted\n", st_.reports_accepted,
                st_.reports_ignored, st_.reports_rejected);
  std::printf("  generator CPU: %.1f%% of one core\n", gen_cpu_pct);
  if (st_.first_bad_status)
    std::printf("  first non-2xx: %d %s\n", st_.first_bad_status, st_.first_bad_body.c_str());
  std::printf(
      "RESULT mode=%s target_reports_s=%.0f target_requests_s=%.0f reports_s=%.0f requests_s=%.0f "
      "p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f sent=%ld ok=%ld non2xx=%ld errors=%ld "
      "unsent=%ld timed_out=%ld accepted=%ld not_accepted=%ld elapsed_s=%.3f next_tick=%ld gen_cpu_pct=%.1f\n",
      o_.max ? "max" : "open", target_reports, target_requests, achieved_reports, achieved_requests, pct(50),
      pct(90), pct(99), pct(99.9), l.empty() ? 0.0 : l.back() / 1000.0, sent_requests, st_.requests_ok,
      st_.non2xx, st_.errors, st_.unsent, st_.timed_out, st_.reports_accepted, st_.reports_rejected, elapsed,
      o_.first_tick + (next_batch + batches_per_tick_ - 1) / batches_per_tick_, gen_cpu_pct);
  std::fflush(stdout);
  if (!o_.latency_log.empty()) {
    if (FILE* f = std::fopen(o_.latency_log.c_str(), "w")) {
      for (auto& [t, ms] : log_) std::fprintf(f, "%.6f %.3f\n", t, ms);
      std::fclose(f);
    }
  }
  bool clean = st_.non2xx == 0 && st_.errors == 0 && st_.unsent == 0 && st_.timed_out == 0;
  return clean ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  Generator g(std::move(o));
  return g.Run();
}
