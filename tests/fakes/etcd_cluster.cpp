#include "tests/fakes/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "net/http_client.h"

namespace shepherd::testing {
namespace {

// A port the kernel chose for a socket bound to 127.0.0.1:0; the socket stays open (in `fds`) so that the
// next call cannot get the same port. The caller closes them all before the members start.
int ReservePort(std::vector<int>& fds) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  fds.push_back(fd);
  return ntohs(addr.sin_port);
}

std::string Url(int port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

bool WaitExit(pid_t pid, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval
  }
}

}  // namespace

EtcdCluster::EtcdCluster(int members, std::chrono::milliseconds deadline, std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "shepherd-etcd-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    error_ = "cannot create a temporary directory";
    return;
  }
  dir_ = tmpl;
  std::vector<int> fds;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = ReservePort(fds);
    m.peer_port = ReservePort(fds);
    if (m.client_port == 0 || m.peer_port == 0) error_ = "cannot reserve loopback ports";
    initial_cluster_ += (i ? "," : "") + m.name + "=" + Url(m.peer_port);
    members_.push_back(m);
  }
  for (int fd : fds) close(fd);
  if (!error_.empty()) return;
  for (int i = 0; i < members; ++i) Start(i);
  if (!WaitHealthy(deadline)) error_ = "etcd members not healthy within the deadline\n" + LogTails();
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) {
    if (members_[i].pid > 0) {
      kill(members_[i].pid, SIGCONT);
      Kill(i);
    }
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string EtcdCluster::endpoint(int i) const {
  return Url(members_[i].client_port);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
  return out;
}

std::string EtcdCluster::store_url() const {
  std::string out = "etcd://";
  for (int i = 0; i < size(); ++i)
    out += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(members_[i].client_port);
  return out;
}

std::string EtcdCluster::log(int i) const {
  std::ifstream in(dir_ + "/" + members_[i].name + ".log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string EtcdCluster::LogTails() const {
  std::string out;
  for (int i = 0; i < size(); ++i) {
    std::string l = log(i);
    if (l.size() > 2000) l = l.substr(l.size() - 2000);
    out += "--- " + members_[i].name + " (" + endpoint(i) + ")\n" + l + "\n";
  }
  return out;
}

void EtcdCluster::Start(int i) {
  Member& m = members_[i];
  const char* env = std::getenv("ETCD");
  std::vector<std::string> args = {env && *env ? env : "/usr/bin/etcd",
                                   "--name",
                                   m.name,
                                   "--data-dir",
                                   dir_ + "/" + m.name + ".etcd",
                                   "--listen-client-urls",
                                   Url(m.client_port),
                                   "--advertise-client-urls",
                                   Url(m.client_port),
                                   "--listen-peer-urls",
                                   Url(m.peer_port),
                                   "--initial-advertise-peer-urls",
                                   Url(m.peer_port),
                                   "--initial-cluster",
                                   initial_cluster_,
                                   "--initial-cluster-token",
                                   "shepherd-test-" + std::to_string(getpid()),
                                   "--initial-cluster-state",
                                   "new",
                                   "--logger",
                                   "zap",
                                   "--log-level",
                                   "warn"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  const std::string log_path = dir_ + "/" + m.name + ".log";
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  m.pid = pid;
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return;
  kill(m.pid, SIGKILL);
  waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

void EtcdCluster::Stop(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return;
  kill(m.pid, SIGCONT);
  kill(m.pid, SIGTERM);
  if (!WaitExit(m.pid, std::chrono::seconds(20))) {
    kill(m.pid, SIGKILL);
    waitpid(m.pid, nullptr, 0);
  }
  m.pid = -1;
}

void EtcdCluster::Pause(int i) {
  if (members_[i].pid > 0) kill(members_[i].pid, SIGSTOP);
}

void EtcdCluster::Resume(int i) {
  if (members_[i].pid > 0) kill(members_[i].pid, SIGCONT);
}

bool EtcdCluster::Restart(int i, std::chrono::milliseconds deadline) {
  if (members_[i].pid > 0) return true;
  Start(i);
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (Healthy(i)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling interval
  }
  error_ = members_[i].name + " not healthy after restart\n" + LogTails();
  return false;
}

bool EtcdCluster::Healthy(int i, std::chrono::milliseconds timeout) const {
  if (members_[i].pid <= 0) return false;
  auto client = net::HttpClient::Create(net::HttpClientOptions{.base_url = endpoint(i), .keep_alive = false});
  if (!client.ok()) return false;
  auto r = (*client)->Request("GET", "/health", "", timeout);
  return r.ok() && r->status == 200 && r->body.find("\"true\"") != std::string::npos;
}

bool EtcdCluster::WaitHealthy(std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    bool all = true;
    for (int i = 0; i < size() && all; ++i) {
      if (members_[i].pid <= 0) continue;
      int status;
      if (waitpid(members_[i].pid, &status, WNOHANG) == members_[i].pid) {
        members_[i].pid = -1;
        error_ = members_[i].name + " exited\n" + LogTails();
        return false;
      }
      all = Healthy(i);
    }
    if (all) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling interval
  }
}

}  // namespace shepherd::testing
