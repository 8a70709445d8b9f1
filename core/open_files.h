// Open-files limit (RLIMIT_NOFILE): every connection, rank pipe and log is a file descriptor. The daemon and
// the agent raise their soft limit to the hard one at start-up and log the result; the daemon then fits its
// connection cap to it (ConnectionsThatFit). Called once, on the starting thread, before any other thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shepherd {

struct OpenFilesLimit {
  uint64_t soft_before = 0;  // the soft limit found at start-up
  uint64_t soft = 0;         // the soft limit now (raised to `hard` when allowed)
  uint64_t hard = 0;
  bool unlimited = false;  // the soft limit is RLIM_INFINITY (`soft` and `hard` are then meaningless)
  bool known = true;       // getrlimit worked
};

// Raises the soft limit to the hard one (when lower) and says what it found and did.
OpenFilesLimit RaiseOpenFilesLimit();
// One log line for `l`: "open files: soft limit 1024 raised to 524288 (the hard limit)" and the like.
std::string Describe(const OpenFilesLimit& l);

// Connections that fit in `l`: `wanted`, or fewer when the limit cannot hold them besides `reserved`
// descriptors for everything else (at least 1). Pure.
std::size_t ConnectionsThatFit(const OpenFilesLimit& l, std::size_t wanted, std::size_t reserved);

}  // namespace shepherd
