#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace shepherd::testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/shepherd-test-XXXXXX";
  path = mkdtemp(tmpl);
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

Connection::Connection(int port, std::chrono::milliseconds timeout) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd_);
    fd_ = -1;
  }
}
Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

bool Connection::Send(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

HttpResult Connection::Read() {
  HttpResult r;
  char buf[65536];
  size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      r.closed = true;
      return r;
    }
    buffer_.append(buf, size_t(n));
  }
  std::istringstream head(buffer_.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  if (line.size() > 12) r.status = std::atoi(line.substr(9, 3).c_str());
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = char(std::tolower(c));
    size_t v = line.find_first_not_of(' ', colon + 1);
    r.headers[name] = v == std::string::npos ? "" : line.substr(v);
  }
  size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
  buffer_.erase(0, head_end + 4);
  while (buffer_.size() < length) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    buffer_.append(buf, size_t(n));
  }
  r.body = buffer_.substr(0, length);
  buffer_.erase(0, std::min(length, buffer_.size()));
  r.closed = r.headers["connection"] == "close";
  return r;
}

bool Connection::WaitClosed() {
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

HttpResult Http(int port, const std::string& method, const std::string& target, const std::string& body,
                const std::string& content_type) {
  Connection c(port);
  if (!c.ok()) return {};
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST" || method == "PATCH")
    req += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  if (!c.Send(req)) return {};
  return c.Read();
}

pid_t SpawnWithLog(std::vector<std::string> args, const std::string& log_path,
                   std::optional<unsigned long> open_files, std::optional<unsigned long> open_files_soft) {
  pid_t pid = fork();
  if (pid == 0) {
    if (open_files) {
      rlimit lim{open_files_soft.value_or(*open_files), *open_files};
      setrlimit(RLIMIT_NOFILE, &lim);
    }
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

Daemon::Daemon(const std::string& dir, std::vector<std::string> extra,
               std::optional<unsigned long> open_files)
    : dir_(dir),
      port_file_(dir + "/port"),
      log_file_(dir + "/daemon-" + std::to_string(std::rand()) + ".log") {
  std::filesystem::remove(port_file_);
  std::vector<std::string> args = {SHEPHERDD_PATH, "--port-file", port_file_};
  if (std::find(extra.begin(), extra.end(), std::string("--listen")) == extra.end()) {
    args.push_back("--listen");
    args.push_back("127.0.0.1:0");
  }
  if (std::find(extra.begin(), extra.end(), std::string("--db")) == extra.end() &&
      std::find(extra.begin(), extra.end(), std::string("--store")) == extra.end()) {
    args.push_back("--db");
    args.push_back(dir + "/shepherd.db");
  }
  args.insert(args.end(), extra.begin(), extra.end());
  pid_ = SpawnWithLog(std::move(args), log_file_, open_files);
}

Daemon::~Daemon() {
  if (pid_ > 0 && !exit_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool Daemon::WaitReady(std::chrono::milliseconds deadline) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream in(port_file_);
    int port = 0;
    if (in >> port && port > 0) {
      port_ = port;
      return true;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling interval, not a correctness wait
  }
  return false;
}

void Daemon::Signal(int sig) {
  kill(pid_, sig);
}

std::optional<int> Daemon::Wait(std::chrono::milliseconds deadline) {
  if (exit_) return exit_;
  auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

std::string Daemon::log() const {
  std::ifstream in(log_file_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double Metric(int port, const std::string& name) {
  const std::string body = Http(port, "GET", "/metrics").body;
  const size_t at = body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(body.substr(at + name.size() + 2));
}

}  // namespace shepherd::testing
