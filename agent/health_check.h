// HealthCheck: the site's node health check (`shepherdd agent --health-check CMD`), run periodically on a
// thread of its own so a slow check never delays supervision or heartbeats. Each run is `/bin/sh -c CMD`
// with a timeout; exit status 0 passes. The latest result goes into every heartbeat (docs/agent-protocol.md):
// a node cordoned on suspicion returns to service after passing it `health_check_passes` times in a row.
// Thread-safe: Latest() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace shepherd::agent {

struct HealthCheckResult {
  int64_t seq = 0;  // increases with every run, so the daemon counts each run once
  bool ok = false;
  std::string output;  // the last 512 bytes of stdout and stderr
  std::string at;      // RFC 3339, when the run ended
};

// Runs `command` once: passes when it exits 0 within `timeout` (killed otherwise).
HealthCheckResult RunHealthCheck(const std::string& command, std::chrono::milliseconds timeout);

class HealthCheck {
 public:
  // Starts the thread: a first run at once, then every `interval`.
  HealthCheck(std::string command, std::chrono::milliseconds interval, std::chrono::milliseconds timeout);
  ~HealthCheck();  // stops the thread (waits for a run in progress, at most `timeout`)
  std::optional<HealthCheckResult> Latest() const;

 private:
  void Loop();
  const std::string command_;
  const std::chrono::milliseconds interval_, timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<HealthCheckResult> latest_;
  std::thread thread_;
};

}  // namespace shepherd::agent
