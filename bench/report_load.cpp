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
//
// Connections, HTTP/1.1 and the epoll loop are in bench/load_client.{h,cpp}, the flags in
// bench/load_options.{h,cpp}; this file holds the report bodies, the scheduling and the statistics.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "load_client.h"
#include "load_options.h"

namespace shepherd::bench {
namespace {

class Generator {
 public:
  explicit Generator(Options o)
      : o_(std::move(o)),
        path_(ExpandPath(o_)),
        client_(ClientOptions{o_.host, o_.port, path_, o_.max, !o_.latency_log.empty()}) {}

  int Run();

 private:
  static std::string ExpandPath(const Options& o) {
    std::string path = o.path_template;
    if (size_t p = path.find("{job}"); p != std::string::npos) path.replace(p, 5, o.job);
    return path;
  }
  bool LoadOrder();
  void BuildBody(const Item& it, std::string* body, int* nreports);
  void Send(Conn& c, const Item& it);
  // Prints the summary and the RESULT line, writes --latency-log; returns the exit code.
  int Report(long sent_requests, long next_batch, Clock::time_point load_end_actual);

  Options o_;
  std::string path_;
  LoadClient client_;
  std::vector<int> order_;  // ranks in batching order
  long batches_per_tick_ = 0;
  Clock::time_point t0_;
  double wall0_ = 0;  // Unix seconds at t0_
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

void Generator::Send(Conn& c, const Item& it) {
  static thread_local std::string body;
  int n = 0;
  BuildBody(it, &body, &n);
  client_.Send(c, it, body, n);
}

int Generator::Run() {
  if (!LoadOrder()) return 2;
  if (!client_.Open(o_.connections)) {
    std::perror("report_load: connect");
    return 1;
  }

  const double batches_per_s = batches_per_tick_ * o_.rate;
  const long total_batches =
      o_.max ? 0 : std::max<long>(1, static_cast<long>(std::floor(o_.duration * batches_per_s + 1e-9)));
  Stats& st = client_.stats();
  st.latency_us.reserve(o_.max ? 1 << 20 : static_cast<size_t>(total_batches));

  t0_ = Clock::now();
  client_.set_start(t0_);
  wall0_ = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto end_of_load =
      t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.duration));
  const auto hard_end =
      end_of_load + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.drain));

  std::deque<Item> queue;  // due batches waiting for a free connection (open loop)
  long next_batch = 0;     // next batch to schedule (open loop) or to send (closed loop)
  long sent_requests = 0;
  Clock::time_point load_end_actual = end_of_load;

  for (;;) {
    auto now = Clock::now();
    bool load_over = now >= end_of_load || (o_.max_requests > 0 && sent_requests >= o_.max_requests);
    if (!o_.max) {
      // Schedule everything that is due.
      while (next_batch < total_batches && !load_over) {
        auto at = t0_ + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(next_batch / batches_per_s));
        if (at > now) break;
        queue.push_back({next_batch % batches_per_tick_, o_.first_tick + next_batch / batches_per_tick_, at});
        ++next_batch;
      }
      if (next_batch >= total_batches) load_over = true;
    }
    // Hand work to free connections.
    for (auto& c : client_.conns()) {
      if (!LoadClient::Ready(c)) continue;
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
    for (auto& c : client_.conns()) inflight = inflight || c.busy;
    if (load_over && queue.empty() && !inflight) {
      load_end_actual = now;
      break;
    }
    if (now >= hard_end) {
      load_end_actual = now;
      client_.Stop();
      st.unsent += static_cast<long>(queue.size());
      for (auto& c : client_.conns())
        if (c.busy) ++st.timed_out;
      break;
    }
    // Wait for I/O, or until the next batch is due.
    int timeout_ms = 1;
    if (o_.max || load_over) timeout_ms = 10;
    client_.Poll(timeout_ms);
  }
  client_.CloseAll();
  return Report(sent_requests, next_batch, load_end_actual);
}

int Generator::Report(long sent_requests, long next_batch, Clock::time_point load_end_actual) {
  Stats& st = client_.stats();
  const double batches_per_s = batches_per_tick_ * o_.rate;
  const double reports_per_rank_tick = 1.0 + (o_.step_every > 0 ? 1.0 / o_.step_every : 0.0);
  // The load window is the scheduled duration (open loop) or until the last answer (closed loop).
  double elapsed = o_.max ? Seconds(t0_, load_end_actual) : std::max(o_.duration, 1e-9);
  double wall = Seconds(t0_, load_end_actual);
  std::vector<uint32_t>& l = st.latency_us;
  std::sort(l.begin(), l.end());
  auto pct = [&](double p) -> double {
    if (l.empty()) return 0;
    size_t idx = static_cast<size_t>(std::ceil(p / 100.0 * l.size()));
    idx = idx == 0 ? 0 : idx - 1;
    return l[std::min(idx, l.size() - 1)] / 1000.0;
  };
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  double gen_cpu_s =
      ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  double gen_cpu_pct = 100.0 * gen_cpu_s / std::max(Seconds(t0_, Clock::now()), 1e-9);
  double target_reports = o_.max ? 0 : o_.ranks * o_.rate * reports_per_rank_tick;
  double target_requests = o_.max ? 0 : batches_per_s;
  double achieved_requests = st.requests_ok / elapsed;
  double achieved_reports = st.reports_sent / elapsed;
  std::printf(
      "report_load: %s, %ld ranks, %d ranks/request, step report every %d ticks, %d connections, %s\n",
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
  std::printf(
      "  requests: %ld sent, %ld 2xx, %ld non-2xx, %ld errors, %ld unsent, %ld timed out; %.1f MB sent\n",
      sent_requests, st.requests_ok, st.non2xx, st.errors, st.unsent, st.timed_out, st.bytes_sent / 1e6);
  if (st.bodies_with_accepted > 0)
    std::printf("  server says: %ld accepted (%ld ignored), %ld not accepted\n", st.reports_accepted,
                st.reports_ignored, st.reports_rejected);
  std::printf("  generator CPU: %.1f%% of one core\n", gen_cpu_pct);
  if (st.first_bad_status)
    std::printf("  first non-2xx: %d %s\n", st.first_bad_status, st.first_bad_body.c_str());
  std::printf(
      "RESULT mode=%s target_reports_s=%.0f target_requests_s=%.0f reports_s=%.0f requests_s=%.0f "
      "p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f sent=%ld ok=%ld non2xx=%ld errors=%ld "
      "unsent=%ld timed_out=%ld accepted=%ld not_accepted=%ld elapsed_s=%.3f next_tick=%ld "
      "gen_cpu_pct=%.1f\n",
      o_.max ? "max" : "open", target_reports, target_requests, achieved_reports, achieved_requests, pct(50),
      pct(90), pct(99), pct(99.9), l.empty() ? 0.0 : l.back() / 1000.0, sent_requests, st.requests_ok,
      st.non2xx, st.errors, st.unsent, st.timed_out, st.reports_accepted, st.reports_rejected, elapsed,
      o_.first_tick + (next_batch + batches_per_tick_ - 1) / batches_per_tick_, gen_cpu_pct);
  std::fflush(stdout);
  if (!o_.latency_log.empty()) {
    if (FILE* f = std::fopen(o_.latency_log.c_str(), "w")) {
      for (auto& [t, ms] : client_.latency_log()) std::fprintf(f, "%.6f %.3f\n", t, ms);
      std::fclose(f);
    }
  }
  bool clean = st.non2xx == 0 && st.errors == 0 && st.unsent == 0 && st.timed_out == 0;
  return clean ? 0 : 3;
}

}  // namespace
}  // namespace shepherd::bench

int main(int argc, char** argv) {
  using namespace shepherd::bench;
  Options o = ParseArgs(argc, argv);
  Generator g(std::move(o));
  return g.Run();
}
