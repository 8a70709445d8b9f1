// EtcdCluster: real etcd 3.4 members for tests. Starts 1 or 3 members (`/usr/bin/etcd`, or $ETCD) as one
// cluster on free loopback ports, each with its data directory under a private temporary directory, and
// waits (bounded) until every member reports healthy. Members can be killed (-9), paused (SIGSTOP/SIGCONT),
// stopped (SIGTERM) and restarted on the same ports and data. The destructor kills every member still
// running and removes the directory. Members die with the test process (PR_SET_PDEATHSIG).
//
// Threading: one thread (the test's).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace shepherd::testing {

class EtcdCluster {
 public:
  // Starts `members` members (each with `extra_args` on its command line) and waits at most `deadline` for
  // all of them to be healthy; see ok().
  explicit EtcdCluster(int members = 1, std::chrono::milliseconds deadline = std::chrono::seconds(60),
                       std::vector<std::string> extra_args = {});
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // Whether every member started and became healthy; error() says why not (with the members' logs' tails).
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  int size() const { return static_cast<int>(members_.size()); }
  // "http://127.0.0.1:PORT" of member i (its client URL).
  std::string endpoint(int i) const;
  std::vector<std::string> endpoints() const;
  // "etcd://127.0.0.1:P1,127.0.0.1:P2,..." as --store takes it.
  std::string store_url() const;
  pid_t pid(int i) const { return members_[i].pid; }
  bool running(int i) const { return members_[i].pid > 0; }
  const std::string& dir() const { return dir_; }
  std::string log(int i) const;  // member i's stdout+stderr so far

  void Kill(int i);    // SIGKILL, reaped
  void Stop(int i);    // SIGTERM, waits for the exit (SIGKILL after 20 s)
  void Pause(int i);   // SIGSTOP
  void Resume(int i);  // SIGCONT
  // Starts a member that was killed or stopped again, same name, ports and data; waits at most `deadline`
  // for it to be healthy (which needs a quorum). False (and error() set) when it is not.
  bool Restart(int i, std::chrono::milliseconds deadline = std::chrono::seconds(60));
  // Whether member i answers GET /health with "health":"true" (within `timeout`).
  bool Healthy(int i, std::chrono::milliseconds timeout = std::chrono::seconds(2)) const;
  // Polls until every running member is healthy or `deadline` passes.
  bool WaitHealthy(std::chrono::milliseconds deadline = std::chrono::seconds(60));

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  void Start(int i);
  std::vector<std::string> extra_args_;
  std::string LogTails() const;

  std::string dir_;
  std::string error_;
  std::string initial_cluster_;
  std::vector<Member> members_;
};

}  // namespace shepherd::testing
