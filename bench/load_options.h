// report_load's command line: the flags (see Usage in load_options.cpp) and their checks.
#pragma once

#include <string>

namespace shepherd::bench {

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string job;
  long ranks = 131072;
  double rate = 1.0;
  double duration = 20.0;
  int connections = 32;
  int batch = 8;
  std::string path_template = "/v1/jobs/{job}/reports";
  bool max = false;
  int attempt = 1;
  int step_every = 4;
  double drain = 5.0;
  std::string rank_order;  // file: ranks in the order to batch them (one per line), e.g. grouped by node
  long max_requests = 0;   // 0: no cap besides the duration
  // file: one line per answer, "<scheduled or send time, s since start> <latency ms>"
  std::string latency_log;
  long first_tick = 0;  // tick (and so step) to start at: lets a second run continue where one stopped
};

// Parses and checks argv; prints the usage and exits 2 on a bad or missing flag, or on -h/--help.
Options ParseArgs(int argc, char** argv);

}  // namespace shepherd::bench
