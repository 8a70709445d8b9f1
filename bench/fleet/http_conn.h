// A minimal HTTP/1.1 keep-alive client connection for the fleet simulator (bench/fleet/fleet_sim.cpp).
// Owns one TCP connection to the daemon, bound to a chosen local source address (each simulated node has
// its own, as real nodes do). One request at a time; Send() while busy is refused (returns false). All of it
// runs on the simulator's single io_context thread; callbacks run there too. Answers must carry
// Content-Length (the daemon's always do). A refused or reset connection, a timeout or a malformed answer is
// reported as status 0 and the connection is closed; the next Send() reconnects.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace fleet {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct Traffic {  // what all connections sent and received
  uint64_t requests = 0, bytes_out = 0, bytes_in = 0, connects = 0, connect_errors = 0, errors = 0;
  uint64_t timeouts = 0, status_429 = 0, status_503 = 0, status_5xx = 0, status_4xx = 0;
};

class HttpConn : public std::enable_shared_from_this<HttpConn> {
 public:
  using Done = std::function<void(int status, std::string body)>;
  HttpConn(asio::io_context& io, tcp::endpoint server, asio::ip::address_v4 source, Traffic* traffic)
      : server_(server), source_(source), socket_(io), timer_(io), traffic_(traffic) {}

  bool busy() const { return busy_; }
  // Each request on a fresh connection ("Connection: close"): fewer connections held at the daemon.
  void set_close_each(bool v) { close_each_ = v; }
  void Close() {
    boost::system::error_code ec;
    socket_.close(ec);
    timer_.cancel();
    connected_ = false;
  }

  // Sends one request; `done` is called exactly once (status 0: transport error or timeout).
  bool Send(const char* method, const std::string& target, const std::string& body,
            std::chrono::milliseconds timeout, Done done) {
    if (busy_) return false;
    busy_ = true;
    done_ = std::move(done);
    out_.clear();
    out_.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: shepherd\r\n");
    if (close_each_) out_.append("Connection: close\r\n");
    if (!body.empty() || method[0] == 'P')
      out_.append("Content-Type: application/json\r\nContent-Length: ")
          .append(std::to_string(body.size()))
          .append("\r\n");
    out_.append("\r\n").append(body);
    ++traffic_->requests;
    traffic_->bytes_out += out_.size();
    auto self = shared_from_this();
    timer_.expires_after(timeout);
    timer_.async_wait([self, gen = ++gen_](boost::system::error_code ec) {
      if (ec || gen != self->gen_ || !self->busy_) return;
      ++self->traffic_->timeouts;
      self->Fail();
    });
    if (connected_) {
      Write();
    } else {
      Connect();
    }
    return true;
  }

 private:
  void Connect() {
    boost::system::error_code ec;
    socket_.close(ec);
    socket_.open(tcp::v4(), ec);
    if (!ec) {
      int one = 1;
      ::setsockopt(socket_.native_handle(), IPPROTO_IP, 24 /* IP_BIND_ADDRESS_NO_PORT */, &one, sizeof one);
      socket_.bind(tcp::endpoint(source_, 0), ec);
    }
    if (ec) {
      ++traffic_->connect_errors;
      Fail();
      return;
    }
    ++traffic_->connects;
    auto self = shared_from_this();
    socket_.async_connect(server_, [self, gen = gen_](boost::system::error_code ec) {
      if (gen != self->gen_ || !self->busy_) return;
      if (ec) {
        ++self->traffic_->connect_errors;
        self->Fail();
        return;
      }
      self->socket_.set_option(tcp::no_delay(true), ec);
      self->connected_ = true;
      self->Write();
    });
  }
  void Write() {
    auto self = shared_from_this();
    in_.clear();
    asio::async_write(socket_, asio::buffer(out_), [self, gen = gen_](boost::system::error_code ec, size_t) {
      if (gen != self->gen_ || !self->busy_) return;
      if (ec) {
        self->Fail();
        return;
      }
      self->Read();
    });
  }
  void Read() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(buf_), [self, gen = gen_](boost::system::error_code ec, size_t n) {
      if (gen != self->gen_ || !self->busy_) return;
      if (ec) {
        self->Fail();
        return;
      }
      self->traffic_->bytes_in += n;
      self->in_.append(self->buf_, n);
      self->Parse();
    });
  }
  void Parse() {
    size_t head_end = in_.find("\r\n\r\n");
    if (head_end == std::string::npos) {
      if (in_.size() > 65536) return Fail();
      return Read();
    }
    if (in_.compare(0, 9, "HTTP/1.1 ") != 0 || in_.size() < 12) return Fail();
    int status = std::atoi(in_.c_str() + 9);
    size_t length = 0;
    size_t p = 0;
    bool close = false;
    while ((p = in_.find("\r\n", p)) != std::string::npos && p < head_end) {
      p += 2;
      if (strncasecmp(in_.c_str() + p, "content-length:", 15) == 0) length = std::strtoul(in_.c_str() + p + 15, nullptr, 10);
      if (strncasecmp(in_.c_str() + p, "connection: close", 17) == 0) close = true;
    }
    if (in_.size() < head_end + 4 + length) return Read();
    std::string body = in_.substr(head_end + 4, length);
    if (status == 429) ++traffic_->status_429;
    else if (status == 503) ++traffic_->status_503;
    else if (status >= 500) ++traffic_->status_5xx;
    else if (status >= 400) ++traffic_->status_4xx;
    if (close || close_each_) Close();
    Finish(status, std::move(body));
  }
  void Fail() {
    ++traffic_->errors;
    Close();
    Finish(0, {});
  }
  void Finish(int status, std::string body) {
    busy_ = false;
    ++gen_;
    timer_.cancel();
    Done d = std::move(done_);
    done_ = nullptr;
    if (d) d(status, std::move(body));
  }

  tcp::endpoint server_;
  asio::ip::address_v4 source_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  Traffic* traffic_;
  bool busy_ = false, connected_ = false, close_each_ = false;
  uint64_t gen_ = 0;
  Done done_;
  std::string out_, in_;
  char buf_[16384];
};

}  // namespace fleet
