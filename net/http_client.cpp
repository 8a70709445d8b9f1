// The agent's only Beast translation unit. Each step (connect, write, read) is an async operation on a
// private io_context run to completion on the calling thread, so beast::tcp_stream's expiry gives real
// timeouts (synchronous Asio calls have none) and Cancel() can abort by posting a close to that context.
#include "net/http_client.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>

namespace shepherd::net {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

struct Url {
  std::string host, port, prefix;
};

Result<Url> ParseUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return InvalidArgument("server URL must start with http://: " + std::string(url));
  std::string_view rest = url.substr(kScheme.size());
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  Url out;
  if (slash != std::string_view::npos) out.prefix = std::string(rest.substr(slash));
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  std::size_t colon = authority.rfind(':');
  std::size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    out.host = std::string(authority.substr(0, colon));
    out.port = std::string(authority.substr(colon + 1));
  } else {
    out.host = std::string(authority);
    out.port = "80";
  }
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  if (out.host.empty() || out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument("bad server URL: " + std::string(url));
  return out;
}

}  // namespace

Result<std::string> ReadTokenFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return InvalidArgument("--token-file " + path + ": cannot stat");
  if ((st.st_mode & 077) != 0)
    return InvalidArgument("--token-file " + path + ": must be mode 0600 or stricter");
  std::ifstream in(path);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return InvalidArgument("--token-file " + path + ": empty");
  return token;
}

namespace {

class BeastHttpClient final : public HttpClient {
 public:
  BeastHttpClient(HttpClientOptions options, Url url) : options_(std::move(options)), url_(std::move(url)) {}

  using HttpClient::Request;
  Result<HttpResult> Request(std::string_view method, std::string_view target, std::string_view body,
                             std::chrono::milliseconds timeout, const HttpHeaders& headers) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int attempt = 0;; ++attempt) {
      if (cancelled_) return Unavailable("http client cancelled");
      bool reused = connected_;
      if (!connected_) {
        if (Status s = Connect(deadline); !s.ok()) return s;
      }
      http::request<http::string_body> req{
          http::string_to_verb(beast::string_view(method.data(), method.size())),
          url_.prefix + std::string(target), 11};
      req.set(http::field::host, url_.host + ":" + url_.port);
      req.set(http::field::user_agent, "shepherd-agent");
      if (!options_.token.empty()) req.set(http::field::authorization, "Bearer " + options_.token);
      for (const auto& [name, value] : headers) req.set(name, value);
      if (!body.empty()) {
        req.set(http::field::content_type, "application/json");
        req.body() = std::string(body);
      }
      req.keep_alive(options_.keep_alive);
      req.prepare_payload();

      stream_.expires_at(deadline);
      beast::error_code ec = Run([&](auto handler) { http::async_write(stream_, req, handler); });
      if (!ec) {
        http::response_parser<http::string_body> parser;
        parser.body_limit(options_.body_limit);
        stream_.expires_at(deadline);
        ec = Run([&](auto handler) { http::async_read(stream_, buffer_, parser, handler); });
        if (!ec) {
          http::response<http::string_body> res = parser.release();
          if (!res.keep_alive() || !options_.keep_alive) Close();
          HttpResult out{.status = static_cast<int>(res.result_int()), .body = std::move(res.body())};
          if (auto it = res.find(http::field::location); it != res.end())
            out.location = std::string(it->value());
          if (out.status == 401 && TokenRotated()) continue;  // the same call with the new token
          if (auto it = res.find(http::field::retry_after); it != res.end()) {
            const std::string v(it->value());
            char* end = nullptr;
            const double secs = std::strtod(v.c_str(), &end);
            if (!v.empty() && *end == '\0' && secs >= 0 && secs < 1e6) out.retry_after_s = secs;
          }
          return out;
        }
      }
      Close();
      bool closed_by_peer = ec == http::error::end_of_stream || ec == asio::error::eof ||
                            ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
      if (reused && attempt == 0 && closed_by_peer) continue;  // a stale keep-alive connection
      return Unavailable(std::string(method) + " " + std::string(target) + ": " + ec.message());
    }
  }

  // True when the token file now holds another token (which replaces ours). At most once per call: a
  // rotated token the daemon refuses too is answered as is.
  bool TokenRotated() {
    if (options_.token_file.empty()) return false;
    Result<std::string> t = ReadTokenFile(options_.token_file);
    if (!t.ok()) {
      spdlog::warn("agent: refused (401), and {}", t.status().message());
      return false;
    }
    if (*t == options_.token) return false;
    spdlog::info("agent: refused (401); using the new token in {}", options_.token_file);
    options_.token = *t;
    return true;
  }

  void Cancel() override {
    cancelled_ = true;
    asio::post(ioc_, [this] {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_.cancel();
    });
  }

 private:
  // Runs one async operation to completion on this thread and returns its error code.
  template <typename Initiate>
  beast::error_code Run(Initiate&& initiate) {
    beast::error_code result = asio::error::would_block;
    initiate([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    return result;
  }

  Status Connect(std::chrono::steady_clock::time_point deadline) {
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    auto endpoints = resolver.resolve(url_.host, url_.port, ec);
    if (ec) return Unavailable("resolve " + url_.host + ": " + ec.message());
    stream_.expires_at(deadline);
    ec = Run([&](auto handler) { stream_.async_connect(endpoints, handler); });
    if (ec) {
      Close();
      return Unavailable("connect " + url_.host + ":" + url_.port + ": " + ec.message());
    }
    connected_ = true;
    return Status::Ok();
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    buffer_.clear();
    connected_ = false;
  }

  HttpClientOptions options_;
  Url url_;
  asio::io_context ioc_;
  beast::tcp_stream stream_{ioc_};
  beast::flat_buffer buffer_;
  bool connected_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpClientOptions& options) {
  Result<Url> url = ParseUrl(options.base_url);
  if (!url.ok()) return url.status();
  return std::unique_ptr<HttpClient>(new BeastHttpClient(options, std::move(*url)));
}

std::optional<std::chrono::milliseconds> RetryDelay(const HttpResult& r, double unit) {
  if (!r.retry_after_s) return std::nullopt;
  const double secs = std::min(*r.retry_after_s * (1.0 + 0.5 * std::clamp(unit, 0.0, 1.0)), 60.0);
  return std::chrono::milliseconds(static_cast<long long>(secs * 1000));
}

std::string EscapePathSegment(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

}  // namespace shepherd::net
