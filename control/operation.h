// Operation: one mutating call of the Controller (an API call, a report batch, an agent heartbeat, the tick,
// a Slurm worker's report, start-up recovery): the time it runs at and the batch its changes go into.
// Owned by the Controller for the span of that call, on the control thread; one is open at a time.
// Controller::Begin opens it and returns its scope; Controller::Commit settles it and hands its batch to
// the store. What the owners queue during it (JobBook's attempt events) is settled by the Controller
// alone: before any step reads an owner that settling writes, and in Commit before the batch is persisted.
// A scope that ends without Commit commits what its operation holds (nothing, for a call refused before
// it changed anything).
#pragma once

#include "core/time.h"
#include "storage/store.h"

namespace shepherd {

struct Operation {
  explicit Operation(Time at) : now(at) {}
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  const Time now;
  WriteBatch batch;
};

}  // namespace shepherd
