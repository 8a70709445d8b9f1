// Entry points of the shepherdd subcommands. Each returns the process exit code.
#pragma once

#include "daemon/config.h"

namespace shepherd {

// Serves until SIGTERM/SIGINT (exit 0 after draining) or a storage failure (exit 1). Exit 1 also when the
// database is held by another daemon or the inventory/config is invalid.
int RunDaemon(const DaemonConfig& config);
// Writes a synthetic inventory JSON to stdout or --out.
int RunGenInventory(int argc, char** argv);
// A node agent (agent/).
int RunAgent(int argc, char** argv);
// Predicts a run's ETTR (goodput/simulator.h); exit 2 on invalid input.
int RunSimulate(int argc, char** argv);
// `store export` / `store import`: a store's records to a file and into an empty store
// (daemon/store_cmd.cpp).
int RunStore(int argc, char** argv);

}  // namespace shepherd
