#include "tests/agent/fake_daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace shepherd::agent::testing {
namespace {

std::string QueryParam(const std::string& target, const std::string& name) {
  std::size_t q = target.find('?');
  if (q == std::string::npos) return "";
  std::string query = "&" + target.substr(q + 1);
  std::size_t at = query.find("&" + name + "=");
  if (at == std::string::npos) return "";
  std::size_t start = at + name.size() + 2;
  return query.substr(start, query.find('&', start) - start);
}

std::string PathOf(const std::string& target) {
  return target.substr(0, target.find('?'));
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

FakeDaemon::FakeDaemon(int port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 64) != 0)
    throw std::runtime_error(std::string("fake daemon: bind/listen: ") + std::strerror(errno));
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeDaemon::~FakeDaemon() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
}

void FakeDaemon::AcceptLoop() {
  while (true) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard lock(mu_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) continue;
    ++connections_;
    open_fds_.push_back(fd);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeDaemon::Serve(int fd) {
  std::string buf;
  char chunk[4096];
  while (true) {
    std::size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) goto done;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
    Request req;
    std::size_t content_length = 0;
    {
      std::string head = buf.substr(0, head_end);
      buf.erase(0, head_end + 4);
      std::size_t line_end = head.find("\r\n");
      std::string line = head.substr(0, line_end);
      req.method = line.substr(0, line.find(' '));
      req.target = line.substr(req.method.size() + 1, line.rfind(' ') - req.method.size() - 1);
      std::size_t pos = line_end;
      while (pos != std::string::npos && pos < head.size()) {
        std::size_t next = head.find("\r\n", pos + 2);
        std::string field =
            head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
        pos = next;
        std::size_t colon = field.find(':');
        if (colon == std::string::npos) continue;
        std::string name = field.substr(0, colon), value = field.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        if (strcasecmp(name.c_str(), "content-length") == 0) content_length = std::stoul(value);
        if (strcasecmp(name.c_str(), "authorization") == 0) req.authorization = value;
        if (strcasecmp(name.c_str(), "shepherd-renew-only") == 0) req.renew_only = true;
        if (strcasecmp(name.c_str(), "connection") == 0 && strcasecmp(value.c_str(), "close") == 0)
          req.keep_alive = false;
      }
    }
    while (buf.size() < content_length) {
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) goto done;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
    req.body = buf.substr(0, content_length);
    buf.erase(0, content_length);
    Response res = Handle(req);
    bool drop;
    {
      std::lock_guard lock(mu_);
      drop = drop_after_response_;
    }
    std::string out = "HTTP/1.1 " + std::to_string(res.status) + " X\r\nContent-Type: application/json\r\n" +
                      res.extra_headers + "Content-Length: " + std::to_string(res.body.size()) + "\r\n" +
                      (req.keep_alive ? "" : "Connection: close\r\n") + "\r\n" + res.body;
    if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) break;
    if (!req.keep_alive || drop) break;
  }
done:
  std::lock_guard lock(mu_);
  ::close(fd);
  std::erase(open_fds_, fd);
}

FakeDaemon::Response FakeDaemon::Handle(const Request& r) {
  std::unique_lock lock(mu_);
  requests_.push_back(r.method + " " + r.target);
  bodies_.push_back(r.body);
  request_times_.push_back(std::chrono::steady_clock::now());
  if (down_) return {503, R"({"title": "down"})", ""};
  if (r.renew_only && renew_answer_ && r.method == "POST" && EndsWith(PathOf(r.target), "/heartbeat")) {
    renewals_.push_back(Json::parse(r.body));
    return {200, renew_answer_->dump()};
  }
  if (!redirect_base_.empty())
    return {redirect_status_, R"({"title": "not the leader"})",
            "Location: " + redirect_base_ + r.target + "\r\n"};
  if (busy_) return {429, R"({"title": "busy"})", "Retry-After: " + std::to_string(*busy_) + "\r\n"};
  if (!required_token_.empty() && r.authorization != "Bearer " + required_token_)
    return {401, R"({"detail": "the credential was withdrawn"})", ""};
  std::string path = PathOf(r.target);
  if (path == "/echo") {
    return {200, Json{{"authorization", r.authorization}, {"body", r.body}, {"method", r.method}}.dump()};
  }
  if (path == "/slow") {
    auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::stoi(QueryParam(r.target, "ms")));
    cv_.wait_until(lock, until, [this] { return stopping_; });
    return {200, "{}"};
  }
  if (r.method == "POST" && path == "/v1/nodes") {
    registrations_.push_back(Json::parse(r.body));
    if (register_conflict_) return {409, R"({"detail": "node n1 runs ranks: its GPU count cannot shrink"})"};
    bool was_known = known_;
    known_ = true;
    cv_.notify_all();
    return {was_known ? 200 : 201, r.body};
  }
  if (r.method == "POST" && EndsWith(path, "/heartbeat")) {
    if (!known_) return {404, R"({"title": "unknown node"})"};
    Json hb = Json::parse(r.body);
    heartbeats_.push_back(hb);
    Json acks = Json::array();
    for (const Json& p : hb["processes"])
      if (auto_ack_ && p["state"] == "exited")
        acks.push_back({{"job", p["job"]}, {"attempt", p["attempt"]}, {"rank", p["rank"]}});
    Json answer = {{"ack_exits", acks}, {"assignments_version", version_}};
    if (lease_s_ > 0) answer["lease_s"] = lease_s_;
    return {200, answer.dump()};
  }
  if (r.method == "GET" && EndsWith(path, "/assignments")) {
    if (!known_) return {404, R"({"title": "unknown node"})"};
    std::int64_t asked = std::stoll(QueryParam(r.target, "version"));
    auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(std::stoi(QueryParam(r.target, "wait")));
    cv_.wait_until(lock, until, [&] { return stopping_ || version_ != asked || !known_ || down_; });
    if (!known_) return {404, R"({"title": "unknown node"})"};
    return {200, Json{{"version", version_}, {"ranks", ranks_}}.dump()};
  }
  return {404, R"({"title": "no route"})"};
}

void FakeDaemon::SetAssignments(Json ranks) {
  {
    std::lock_guard lock(mu_);
    ranks_ = std::move(ranks);
    ++version_;
  }
  cv_.notify_all();
}

void FakeDaemon::SetDown(bool down) {
  {
    std::lock_guard lock(mu_);
    down_ = down;
  }
  cv_.notify_all();
}

void FakeDaemon::SetBusy(std::optional<int> retry_after_s) {
  {
    std::lock_guard lock(mu_);
    busy_ = retry_after_s;
  }
  cv_.notify_all();
}

std::vector<std::chrono::steady_clock::time_point> FakeDaemon::request_times() const {
  std::lock_guard lock(mu_);
  return request_times_;
}

void FakeDaemon::SetRenewAnswer(std::optional<Json> answer) {
  std::lock_guard lock(mu_);
  renew_answer_ = std::move(answer);
}

std::vector<Json> FakeDaemon::renewals() const {
  std::lock_guard lock(mu_);
  return renewals_;
}

void FakeDaemon::SetRequiredToken(const std::string& token) {
  std::lock_guard lock(mu_);
  required_token_ = token;
}

void FakeDaemon::SetRedirect(const std::string& base, int status) {
  std::lock_guard lock(mu_);
  redirect_base_ = base;
  redirect_status_ = status;
}

std::vector<std::string> FakeDaemon::bodies() const {
  std::lock_guard lock(mu_);
  return bodies_;
}

void FakeDaemon::SetRegisterConflict(bool on) {
  std::lock_guard lock(mu_);
  register_conflict_ = on;
}

void FakeDaemon::ForgetNode() {
  {
    std::lock_guard lock(mu_);
    known_ = false;
  }
  cv_.notify_all();
}

void FakeDaemon::KnowNode() {
  {
    std::lock_guard lock(mu_);
    known_ = true;
  }
  cv_.notify_all();
}

void FakeDaemon::SetLease(double seconds) {
  std::lock_guard lock(mu_);
  lease_s_ = seconds;
}

void FakeDaemon::SetAutoAck(bool on) {
  std::lock_guard lock(mu_);
  auto_ack_ = on;
}

void FakeDaemon::SetDropAfterResponse(bool on) {
  std::lock_guard lock(mu_);
  drop_after_response_ = on;
}

std::vector<Json> FakeDaemon::registrations() const {
  std::lock_guard lock(mu_);
  return registrations_;
}
std::vector<Json> FakeDaemon::heartbeats() const {
  std::lock_guard lock(mu_);
  return heartbeats_;
}
std::vector<std::string> FakeDaemon::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}
int FakeDaemon::connections() const {
  std::lock_guard lock(mu_);
  return connections_;
}

}  // namespace shepherd::agent::testing
