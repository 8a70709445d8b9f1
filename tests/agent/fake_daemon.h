// FakeDaemon: a tiny blocking HTTP/1.1 server on 127.0.0.1:0 (plain POSIX sockets, one thread per
// connection) that plays the daemon's side of docs/agent-protocol.md with scripted answers:
//   POST /v1/nodes                          201, records the body, the node becomes known (409 while
//                                           SetRegisterConflict)
//   POST /v1/nodes/{id}/heartbeat           404 while the node is unknown; else records the body and
//                                           acknowledges every exit in it (when auto_ack) -> 200
//                                           (with lease_s when SetLease)
//   GET  /v1/nodes/{id}/assignments?version=N&wait=S
//                                           404 while unknown; answers when the version differs from N,
//                                           else after S seconds, with {"version", "ranks"}
//   GET  /echo                              200 with {"authorization", "body", "method"}
//   POST /echo                              same
//   GET  /slow?ms=N                         200 after N ms
// A renew-only heartbeat (header Shepherd-Renew-Only) is answered 200 with the SetRenewAnswer body, when
// set, before any redirect (a follower that renews leases), and recorded in renewals().
// Every request is answered 503 while SetDown(true), 429 with Retry-After while SetBusy(n), and 307 (or
// 308) with "Location: <base><target>" while SetRedirect(base) (a follower naming its leader). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"

namespace shepherd::agent::testing {

class FakeDaemon {
 public:
  // REQUIRES: `port` is 0 (any free port) or one this process may bind.
  explicit FakeDaemon(int port = 0);
  ~FakeDaemon();  // stops accepting, wakes held long polls, joins every thread

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Replaces the desired rank set (a JSON array as in the assignments answer) and bumps the version.
  void SetAssignments(Json ranks);
  void SetDown(bool down);
  // Answer every request 429 with "Retry-After: <seconds>" (nullopt: serve normally).
  void SetBusy(std::optional<int> retry_after_s);
  // Answer every request `status` (307 or 308) with Location: `base` + the request's target; "": serve.
  void SetRedirect(const std::string& base, int status = 307);
  // Answer renew-only heartbeats with `answer` (nullopt: as any other heartbeat).
  void SetRenewAnswer(std::optional<Json> answer);
  std::vector<Json> renewals() const;  // the bodies of the renew-only heartbeats answered so
  void ForgetNode();
  void KnowNode();  // the node is known without registering (state another replica wrote)  // the daemon
                    // "lost" the node: 404 until it registers again
  // Registrations are answered 409 (the daemon keeps its record of a busy node); a known node stays known.
  void SetRegisterConflict(bool on);
  void SetAutoAck(bool on);
  // Heartbeat answers grant this lease (lease_s); 0 (the default): none.
  void SetLease(double seconds);
  // Answer 401 to every request without "Authorization: Bearer <token>" ("": accept any).
  void SetRequiredToken(const std::string& token);
  // Answer keep-alive requests with keep-alive, then close the connection anyway (a stale connection).
  void SetDropAfterResponse(bool on);

  std::vector<Json> registrations() const;
  std::vector<Json> heartbeats() const;
  std::vector<std::string> requests() const;  // "METHOD target"
  std::vector<std::string> bodies() const;    // the body of each request of requests()
  // When each request of requests() arrived.
  std::vector<std::chrono::steady_clock::time_point> request_times() const;
  int connections() const;

 private:
  struct Request {
    std::string method, target, body, authorization;
    bool keep_alive = true;
    bool renew_only = false;
  };
  struct Response {
    int status = 200;
    std::string body;
    std::string extra_headers;  // "Name: value\r\n" lines
  };
  void AcceptLoop();
  void Serve(int fd);
  Response Handle(const Request& r);

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool down_ = false;
  std::optional<int> busy_;
  std::string redirect_base_;
  int redirect_status_ = 307;
  bool known_ = false;
  bool register_conflict_ = false;
  std::string required_token_;
  bool auto_ack_ = true;
  double lease_s_ = 0;
  bool drop_after_response_ = false;
  std::int64_t version_ = 0;
  Json ranks_ = Json::array();
  std::vector<Json> registrations_, heartbeats_, renewals_;
  std::optional<Json> renew_answer_;
  std::vector<std::string> requests_, bodies_;
  std::vector<std::chrono::steady_clock::time_point> request_times_;
  std::vector<std::thread> workers_;
  std::vector<int> open_fds_;
  int connections_ = 0;
};

}  // namespace shepherd::agent::testing
