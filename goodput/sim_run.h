// One seed of the run simulator (goodput/simulator.h): the event loop and the world around the policy.
// Not part of the public interface.
#pragma once

#include <cstdint>

#include "goodput/simulator.h"

namespace shepherd::sim_internal {

// Runs one seed. REQUIRES: ValidateSimInput(in).ok(), interval_s > 0, and the job fits the fleet (checked
// by the caller with Place; kInvalidContent otherwise).
// `cancel`: checked once per event; true stops the run with kUnavailable.
Result<SeedOutcome> RunSeed(const SimInput& in, double interval_s, uint64_t seed,
                            std::vector<int>* day_min_spares, const std::atomic<bool>* cancel);

// Seconds of training (compute, saves excluded) and of saves after `elapsed` seconds of an attempt's
// training, with a save of save_s after every interval_s of compute.
struct TrainingSplit {
  double compute_s = 0;
  double save_s = 0;
  int64_t saves_done = 0;  // saves completed
};
TrainingSplit SplitTraining(double elapsed, double interval_s, double save_s);
// Seconds of an attempt's training after which `compute` seconds of compute are done (before the save
// that may follow them).
double ElapsedForCompute(double compute, double interval_s, double save_s);

}  // namespace shepherd::sim_internal
