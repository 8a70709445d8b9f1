#include "net/endpoint_list.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace shepherd::net {
namespace {

using Clock = std::chrono::steady_clock;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Normalized(std::string_view url) {
  std::string out(Trim(url));
  while (out.size() > 7 && out.back() == '/') out.pop_back();
  return out;
}

bool IsRedirect(int status) {
  return status == 307 || status == 308;
}

}  // namespace

Result<std::vector<std::string>> ParseEndpointList(std::string_view list) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    const std::string url = Normalized(list.substr(from, comma - from));
    if (url.empty()) return InvalidArgument("server list \"" + std::string(list) + "\": an empty entry");
    if (Result<std::unique_ptr<HttpClient>> c = HttpClient::Create({.base_url = url}); !c.ok())
      return c.status();
    if (std::find(out.begin(), out.end(), url) != out.end())
      return InvalidArgument("server list: " + url + " is listed twice");
    if (out.size() == kMaxEndpoints)
      return InvalidArgument("server list: more than " + std::to_string(kMaxEndpoints) + " URLs");
    out.push_back(url);
    if (comma == list.size()) break;
    from = comma + 1;
  }
  return out;
}

std::string JoinEndpoints(const std::vector<std::string>& urls) {
  std::string out;
  for (const std::string& u : urls) out += (out.empty() ? "" : ",") + u;
  return out;
}

Result<std::unique_ptr<EndpointListClient>> EndpointListClient::Create(const HttpClientOptions& options) {
  Result<std::vector<std::string>> urls = ParseEndpointList(options.base_url);
  if (!urls.ok()) return urls.status();
  return std::unique_ptr<EndpointListClient>(new EndpointListClient(options, std::move(*urls)));
}

EndpointListClient::EndpointListClient(HttpClientOptions options, std::vector<std::string> endpoints)
    : options_(std::move(options)), endpoints_(std::move(endpoints)), current_(endpoints_.front()) {}

EndpointListClient::~EndpointListClient() = default;

void EndpointListClient::Cancel() {
  cancelled_ = true;
  std::lock_guard lock(mu_);
  for (auto& [url, client] : clients_) client->Cancel();
}

HttpClient* EndpointListClient::ClientFor(const std::string& base_url, std::string* error) {
  std::lock_guard lock(mu_);
  for (auto& [url, client] : clients_)
    if (url == base_url) return client.get();
  HttpClientOptions o = options_;
  o.base_url = base_url;
  Result<std::unique_ptr<HttpClient>> made = HttpClient::Create(o);
  if (!made.ok()) {
    *error = made.status().message();
    return nullptr;
  }
  if (cancelled_) (*made)->Cancel();
  // Bounded: at most a few learned (unconfigured) endpoints are kept; the oldest other than the current
  // one goes first. Only this thread uses a client's Request, so none is in flight here.
  const std::size_t cap = endpoints_.size() + 4;
  if (clients_.size() >= cap) {
    auto victim = std::find_if(clients_.begin(), clients_.end(), [&](const auto& e) {
      return e.first != current_ &&
             std::find(endpoints_.begin(), endpoints_.end(), e.first) == endpoints_.end();
    });
    if (victim != clients_.end()) clients_.erase(victim);
  }
  clients_.emplace_back(base_url, std::move(*made));
  return clients_.back().second.get();
}

Result<HttpResult> EndpointListClient::Chain(const std::string& first, std::string_view method,
                                             std::string_view target, std::string_view body,
                                             Clock::time_point deadline, const HttpHeaders& headers,
                                             int* hops, bool* loop, std::string* answered_by,
                                             std::vector<std::string>* visited) {
  std::string base = first;      // the client to use
  std::string sent(target);      // the target it is sent (appended to base's prefix)
  std::string remember = first;  // what answered_by becomes if this hop gives the answer
  std::string chain = first + std::string(target);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= std::chrono::milliseconds(0))
      return Unavailable(base + ": no time left in the request's budget");
    std::string error;
    visited->push_back(base);
    HttpClient* client = ClientFor(base, &error);
    if (client == nullptr) return Unavailable(base + ": " + error);
    Result<HttpResult> r = client->Request(method, sent, body, left, headers);
    if (!r.ok()) return Unavailable(base + ": " + r.status().message());
    if (!IsRedirect(r->status)) {
      *answered_by = remember;
      return r;
    }
    const std::string& loc = r->location;
    constexpr std::string_view kScheme = "http://";
    if (loc.compare(0, kScheme.size(), kScheme) != 0)
      return Unavailable(base + ": redirected (" + std::to_string(r->status) + ") to \"" +
                         loc.substr(0, 200) + "\", which is not an absolute http:// URL");
    chain += " -> " + loc;
    if (*hops >= kMaxRedirects) {
      *loop = true;
      return Unavailable(std::string(method) + " " + std::string(target) + ": more than " +
                         std::to_string(kMaxRedirects) + " redirects (a redirect loop?): " + chain);
    }
    ++*hops;
    if (loc.size() > target.size() && loc.compare(loc.size() - target.size(), target.size(), target) == 0) {
      base = Normalized(std::string_view(loc).substr(0, loc.size() - target.size()));
      sent = std::string(target);
      remember = base;
    } else {  // the leader's base URL cannot be told apart from the path: follow, do not remember
      const std::size_t slash = loc.find('/', kScheme.size());
      base = loc.substr(0, slash);
      sent = slash == std::string::npos ? "/" : loc.substr(slash);
      remember.clear();
    }
  }
}

Result<HttpResult> EndpointListClient::Request(std::string_view method, std::string_view target,
                                               std::string_view body, std::chrono::milliseconds timeout,
                                               const HttpHeaders& headers) {
  const Clock::time_point deadline = Clock::now() + timeout;
  // The order: the current endpoint, then the configured ones after it, wrapping around.
  auto at = std::find(endpoints_.begin(), endpoints_.end(), current_);
  const std::size_t start =
      at == endpoints_.end() ? 0 : static_cast<std::size_t>(at - endpoints_.begin()) + 1;
  std::vector<std::string> order{current_};
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    const std::string& e = endpoints_[(start + i) % endpoints_.size()];
    if (e != current_) order.push_back(e);
  }
  int hops = 0;
  std::optional<HttpResult> last_503;
  std::string errors;
  std::vector<std::string> visited;  // each endpoint at most once per request, redirect targets included
  for (const std::string& endpoint : order) {
    if (cancelled_) return Unavailable("http client cancelled");
    if (std::find(visited.begin(), visited.end(), endpoint) != visited.end()) continue;
    std::string answered_by;
    bool loop = false;
    Result<HttpResult> r =
        Chain(endpoint, method, target, body, deadline, headers, &hops, &loop, &answered_by, &visited);
    if (!r.ok()) {
      if (loop) return r.status();
      errors += (errors.empty() ? "" : "; ") + r.status().message();
      if (Clock::now() >= deadline) break;
      continue;
    }
    if (r->status == 503) {
      errors += (errors.empty() ? "" : "; ") + endpoint + ": HTTP 503";
      last_503 = std::move(*r);
      continue;
    }
    if (!answered_by.empty() && answered_by != current_) {
      if (endpoints_.size() > 1 || hops > 0) spdlog::info("http: {} answers now", answered_by);
      current_ = answered_by;
    }
    return r;
  }
  // Nothing answered: the next request starts after the endpoint that was current.
  current_ = endpoints_[start % endpoints_.size()];
  if (last_503) return std::move(*last_503);
  if (cancelled_) return Unavailable("http client cancelled");
  return Unavailable(std::string(method) + " " + std::string(target) + ": no daemon answered (" + errors +
                     ")");
}

}  // namespace shepherd::net
