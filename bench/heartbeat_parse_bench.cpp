// The daemon's per-heartbeat parse work at fleet scale: an agent heartbeat of one 8-GPU node relaying its
// ranks' summaries (the fleet simulator's `--telemetry relay --rank-reports summary` body), read as the
// front door reads it (the route's text step, core/json_lite.h; the tree and its prepare step only if the
// text step did not take it) into the typed heartbeat and relayed reports. Plain main; prints CPU
// microseconds per heartbeat.
//
//   ninja -C build heartbeat_parse_bench && taskset -c 0 build/bench/heartbeat_parse_bench [iterations [tree]]
// `tree`: the body through ParseJsonText and the tree's prepare step only (the path before the text reader).
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/handlers.h"
#include "api/metrics.h"
#include "api/router.h"
#include "core/time.h"
#include "core/json.h"

namespace {

std::string Body(int ranks) {
  std::string b = R"({"agent":{"pid":1234,"started_at":"2026-11-29T12:00:00Z"},"gpu_faults":[],"processes":[)";
  for (int r = 0; r < ranks; ++r)
    b += std::string(r ? "," : "") + R"({"job":"job-000001","attempt":1,"rank":)" + std::to_string(800 + r) +
         R"(,"pid":)" + std::to_string(40000 + r) + R"(,"state":"running"})";
  b += R"(],"reports":[)";
  for (int r = 0; r < ranks; ++r) {
    const std::string head = R"({"rank":)" + std::to_string(800 + r) + R"(,"attempt":1,"time":1796040000.125)";
    std::string s = head + R"(,"kind":"summary","step":412,"phase":"train","groups":[)";
    const char* groups[] = {"tp", "pp", "dp"};
    for (int g = 0; g < 3; ++g)
      s += std::string(g ? "," : "") + R"({"group":")" + groups[g] + R"(","completed":1643,"count":1,"wait_s":0.0123})";
    s += "]}";
    b += std::string(r ? "," : "") + R"({"job":"job-000001","attempt":1,"rank":)" + std::to_string(800 + r) +
         R"(,"reports":[)" + s + "]}";
  }
  return b + "]}";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shepherd;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
  const bool tree = argc > 2 && std::string(argv[2]) == "tree";  // the body through ParseJsonText only
  SystemClock clock;
  Metrics metrics;
  Router router(&metrics);
  ApiOptions options;
  // The heartbeat's prepare steps use only the options and the clock: no controller.
  router.Bind(std::make_shared<const ApiContext>(ApiContext{nullptr, &metrics, options, &clock}));
  const std::string body = Body(8);
  auto once = [&] {
    HttpRequest req;
    req.method = "POST";
    req.target = "/v1/nodes/node-00001/heartbeat";
    req.body = body;
    // As FrontDoor::ParseBody: the route's reading of the text first (unless `tree`), then the tree.
    if (!tree && router.PrepareText(req)) std::abort();
    if (req.prepared) return;
    Result<Json> j = ParseJsonText(req.body, options.json_limits);
    if (!j.ok()) std::abort();
    req.json = std::make_shared<const Json>(std::move(j).value());
    if (router.Prepare(req) || !req.prepared) std::abort();
  };
  for (int i = 0; i < iterations / 10; ++i) once();  // warm
  // CPU time, not wall time: on a shared machine the wall clock also counts other processes' turns.
  auto cpu_us = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
  };
  const double t0 = cpu_us();
  for (int i = 0; i < iterations; ++i) once();
  const double us = cpu_us() - t0;
  std::printf("heartbeat of 8 relayed summaries (%zu bytes), %s: %.2f us CPU per heartbeat (%d iterations)\n",
              body.size(), tree ? "as a tree" : "as the daemon reads it", us / iterations, iterations);
  return 0;
}
