// The connection side of report_load: a few keep-alive HTTP/1.1 connections to one loopback server,
// single-threaded (epoll, non-blocking sockets, no pipelining). It writes POST requests, parses their
// responses (Content-Length or chunked bodies) and counts the answers in Stats; which batch to send when,
// and what goes in its body, is the caller's business (bench/report_load.cpp).
#pragma once

#include <sys/epoll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace shepherd::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One request's worth of work: which batch (node) on which tick.
struct Item {
  long batch_index;  // index into the batch list
  long tick;
  Clock::time_point scheduled;
};

struct Stats {
  std::vector<uint32_t> latency_us;
  long requests_ok = 0;       // 2xx
  long non2xx = 0;            // complete responses with another status
  long errors = 0;            // connection errors, resets, malformed responses (request lost)
  long unsent = 0;            // scheduled but never sent (open loop, after the drain)
  long timed_out = 0;         // sent but unanswered after the drain
  long reports_sent = 0;      // report objects in requests that got a 2xx answer
  long reports_accepted = 0;  // from the daemon's {"accepted": n} (when the body says so)
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
  std::string in;  // response bytes
  Item item{};
  int reports = 0;  // report objects in the in-flight request
  Clock::time_point sent_at;
  bool want_out = false;
  int reconnects = 0;
};

struct ClientOptions {
  std::string host;  // IPv4 loopback address
  int port = 0;
  std::string path;                // request target of every POST
  bool latency_from_send = false;  // closed loop: latency from the send, else from Item::scheduled
  bool keep_latency_log = false;   // record (start s since set_start, latency ms) per answer
};

class LoadClient {
 public:
  explicit LoadClient(ClientOptions o);

  // Creates the epoll instance and starts `connections` non-blocking connects. False (errno set by the
  // failing call) when a socket cannot be created or connect fails at once.
  bool Open(int connections);
  // Latencies in the latency log count from t0.
  void set_start(Clock::time_point t0) { t0_ = t0; }
  // A connection that can take a request now.
  static bool Ready(const Conn& c) { return c.fd >= 0 && !c.busy && c.connected; }
  // Writes POST path with `body` (holding `nreports` report objects) for `it` on a ready connection.
  void Send(Conn& c, const Item& it, const std::string& body, int nreports);
  // Waits up to timeout_ms for I/O and handles it: connects, writes, responses, failures.
  void Poll(int timeout_ms);
  // No reconnects from now on.
  void Stop() { stopping_ = true; }
  // Stop(), then close every connection and the epoll instance.
  void CloseAll();

  std::vector<Conn>& conns() { return conns_; }
  Stats& stats() { return st_; }
  const std::vector<std::pair<float, float>>& latency_log() const { return log_; }

 private:
  bool Connect(Conn& c);
  void Close(Conn& c);
  void Flush(Conn& c);
  void OnReadable(Conn& c);
  // Returns 1 when a complete response was consumed (2: and the server closes the connection), 0 when
  // more bytes are needed, -1 on a protocol error.
  int TryParse(Conn& c);
  void Complete(Conn& c, int status, const char* body, size_t body_len);
  void Fail(Conn& c);
  void UpdateEpoll(Conn& c, bool want_out);

  ClientOptions o_;
  std::string host_header_;
  int epfd_ = -1;
  std::vector<Conn> conns_;
  std::vector<epoll_event> events_;  // epoll_wait's output, sized in Open
  Stats st_;
  Clock::time_point t0_;
  bool stopping_ = false;
  std::vector<std::pair<float, float>> log_;  // latency log: (start s, latency ms)
};

}  // namespace shepherd::bench
