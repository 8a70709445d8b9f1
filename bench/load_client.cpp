#include "load_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace shepherd::bench {
namespace {

bool IEquals(const char* a, size_t n, const char* b) {
  if (std::strlen(b) != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

long FindInt(const char* body, size_t n, const char* key) {
  std::string_view sv(body, n);
  size_t p = sv.find(key);
  if (p == std::string_view::npos) return -1;
  p += std::strlen(key);
  while (p < n && (body[p] == ' ' || body[p] == ':')) ++p;
  return std::strtol(body + p, nullptr, 10);
}

}  // namespace

LoadClient::LoadClient(ClientOptions o) : o_(std::move(o)) {
  host_header_ = o_.host + ":" + std::to_string(o_.port);
}

bool LoadClient::Open(int connections) {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  conns_.resize(connections);  // never resized again: epoll holds pointers to its elements
  events_.resize(connections + 4);
  for (auto& c : conns_)
    if (!Connect(c)) return false;
  return true;
}

bool LoadClient::Connect(Conn& c) {
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

void LoadClient::Close(Conn& c) {
  if (c.fd >= 0) {
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
  }
  c.fd = -1;
  c.connected = false;
  c.busy = false;
}

void LoadClient::CloseAll() {
  stopping_ = true;
  for (auto& c : conns_) Close(c);
  close(epfd_);
}

void LoadClient::UpdateEpoll(Conn& c, bool want_out) {
  if (c.want_out == want_out) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want_out ? EPOLLOUT : 0u);
  ev.data.ptr = &c;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.want_out = want_out;
}

void LoadClient::Send(Conn& c, const Item& it, const std::string& body, int nreports) {
  c.out.clear();
  c.out.append("POST ").append(o_.path).append(" HTTP/1.1\r\nHost: ").append(host_header_);
  c.out.append("\r\nContent-Type: application/json\r\nContent-Length: ");
  c.out.append(std::to_string(body.size())).append("\r\n\r\n").append(body);
  c.out_off = 0;
  c.in.clear();
  c.item = it;
  c.reports = nreports;
  c.busy = true;
  c.sent_at = Clock::now();
  Flush(c);
}

void LoadClient::Flush(Conn& c) {
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

void LoadClient::Fail(Conn& c) {
  if (c.busy) ++st_.errors;
  Close(c);
  if (!stopping_ && c.reconnects < 1000) {
    ++c.reconnects;
    Connect(c);
  }
}

int LoadClient::TryParse(Conn& c) {
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
      if (IEquals(name, nlen, "content-length"))
        content_length = std::atol(value.c_str());
      else if (IEquals(name, nlen, "transfer-encoding"))
        chunked = value.find("chunked") != std::string::npos;
      else if (IEquals(name, nlen, "connection"))
        close_after = value.find("close") != std::string::npos;
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

void LoadClient::Complete(Conn& c, int status, const char* body, size_t body_len) {
  auto now = Clock::now();
  auto from = o_.latency_from_send ? c.sent_at : c.item.scheduled;
  double us = std::chrono::duration<double, std::micro>(now - from).count();
  st_.latency_us.push_back(static_cast<uint32_t>(std::min(us, 4.0e9)));
  if (o_.keep_latency_log)
    log_.push_back({static_cast<float>(Seconds(t0_, from)), static_cast<float>(us / 1000)});
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

void LoadClient::OnReadable(Conn& c) {
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

void LoadClient::Poll(int timeout_ms) {
  int n = epoll_wait(epfd_, events_.data(), static_cast<int>(events_.size()), timeout_ms);
  for (int i = 0; i < n; ++i) {
    Conn& c = *static_cast<Conn*>(events_[i].data.ptr);
    if (c.fd < 0) continue;
    uint32_t ev = events_[i].events;
    if (!c.connected && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        Fail(c);
        continue;
      }
      c.connected = true;
      if (c.busy)
        Flush(c);
      else
        UpdateEpoll(c, false);
      continue;
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) OnReadable(c);
    if (c.fd >= 0 && c.busy && (ev & EPOLLOUT)) Flush(c);
  }
}

}  // namespace shepherd::bench
