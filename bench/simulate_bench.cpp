// The run simulator on the Llama 3 scenario: 2,048 nodes (16,384 GPUs) plus 128 spares, 54 days, the
// Table 5 fault mix (goodput/simulator.h). Prints the wall time of each seed on one core (steady_clock) and
// its ETTR. Target: one seed in at most 60 s. Usage: simulate_bench [seeds, default 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "goodput/simulator.h"

int main(int argc, char** argv) {
  using namespace shepherd;
  const int seeds = argc > 1 ? std::atoi(argv[1]) : 3;
  double worst = 0, total = 0;
  for (int s = 1; s <= seeds; ++s) {
    SimInput in = Llama3Scenario();
    in.seeds = 1;
    in.seed = static_cast<uint64_t>(s);
    const auto t0 = std::chrono::steady_clock::now();
    Result<SimResult> r = Simulate(in);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) {
      std::fprintf(stderr, "simulate: %s\n", r.status().message().c_str());
      return 1;
    }
    const SeedOutcome& o = r->seeds.front();
    int faults = 0;
    for (int n : o.interruptions) faults += n;
    std::printf("seed %d: %.2f s wall, ETTR %.4f, %d interruptions, %d restarts, %lld events\n", s, secs,
                o.ettr, faults, o.restarts, static_cast<long long>(o.events));
    worst = std::max(worst, secs);
    total += secs;
  }
  std::printf("54-day 16,384-GPU run: mean %.2f s, worst %.2f s per seed (target <= 60 s)\n", total / seeds,
              worst);
  return worst <= 60 ? 0 : 1;
}
