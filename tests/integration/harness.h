// Integration harness: runs the real shepherdd binary on 127.0.0.1:0 in a temp dir and speaks HTTP/1.1 to
// it over loopback sockets. Bounded waits everywhere (deadlines), no sleeps for correctness.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace shepherd::testing {

struct TempDir {
  TempDir();
  ~TempDir();
  std::string path;
};

struct HttpResult {
  int status = 0;                              // 0: no response (connection closed or timed out)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool closed = false;  // the server closed the connection after the response
};

// One blocking loopback connection with a receive timeout.
class Connection {
 public:
  explicit Connection(int port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~Connection();
  bool ok() const { return fd_ >= 0; }
  // Sends bytes; false when the peer has closed or reset the connection.
  bool Send(const std::string& bytes);
  // Reads one response (Content-Length framing).
  HttpResult Read();
  // True when the peer closes within the timeout (reads and discards data until EOF).
  bool WaitClosed();

 private:
  int fd_ = -1;
  std::string buffer_;
};

HttpResult Http(int port, const std::string& method, const std::string& target, const std::string& body = "",
                const std::string& content_type = "application/json");

// Polls `f` every 50 ms until it is true or `deadline` has passed; its last answer.
template <typename F>
bool Eventually(F f, std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return f();
}

// The value of the unlabelled metric `name` on GET /metrics; -1 when absent.
double Metric(int port, const std::string& name);

// Runs args[0] (a path) with args, stdout and stderr to `log_path`; the child's pid. `open_files`: the
// child's open-files limit (soft and hard), when given; `open_files_soft`: a lower soft limit than that.
pid_t SpawnWithLog(std::vector<std::string> args, const std::string& log_path,
                   std::optional<unsigned long> open_files = std::nullopt,
                   std::optional<unsigned long> open_files_soft = std::nullopt);

class Daemon {
 public:
  // Starts shepherdd with --listen 127.0.0.1:0 (unless `extra` names --listen) --port-file ... plus `extra`
  // args, and --db <dir>/shepherd.db unless `extra` names --db or --store.
  explicit Daemon(const std::string& dir, std::vector<std::string> extra = {},
                  std::optional<unsigned long> open_files = std::nullopt);
  ~Daemon();  // SIGKILL if still running
  // Waits for the port file; false if the process exited or the deadline passed.
  bool WaitReady(std::chrono::milliseconds deadline = std::chrono::seconds(20));
  int port() const { return port_; }
  int pid() const { return pid_; }
  void Signal(int sig);
  // Waits for exit; the exit code, 128+signal when killed, nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds deadline = std::chrono::seconds(20));
  std::string log() const;  // stdout+stderr so far

 private:
  std::string dir_, port_file_, log_file_;
  int pid_ = -1;
  int port_ = 0;
  std::optional<int> exit_;
};

}  // namespace shepherd::testing
